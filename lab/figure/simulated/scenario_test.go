// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lab/report"
)

func TestRegistry(t *testing.T) {
	want := []string{"kihl-step", "kihl-distribution", "yaksha-load-sweep", "yaksha-workload-shift",
		"seda-spike", "seda-classes", "seda-degradation", "voigt-sweep", "voigt-step", "voigt-bandwidth", "lijamin-epochs", "adaptive", "graph", "graph-crowd", "graph-recover", "graph-hotel", "tenants", "costly"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	// Every figure with a simulated driver has one registered here, and
	// only those.
	if len(registry) != len(want) {
		t.Errorf("%d drivers registered for %d figures with a simulated driver", len(registry), len(want))
	}
	for _, s := range All() {
		if s.Description == "" || strings.Contains(s.Description, "\n") {
			t.Errorf("%s: description must be one non-empty line, got %q", s.Name, s.Description)
		}
		p, err := Prepare(s.Name)
		if err != nil {
			t.Fatalf("Prepare(%s): %v", s.Name, err)
		}
		params := p.Params.List()
		if len(params) == 0 {
			t.Errorf("%s declares no parameters", s.Name)
		}
		for _, d := range params {
			if d.Doc == "" || d.Type == "" || d.Default == "" {
				t.Errorf("%s: parameter %+v lacks a doc, type or default", s.Name, d)
			}
			// Every default must be accepted back by Set.
			if err := p.Params.Set(d.Name, d.Default); err != nil {
				t.Errorf("%s: default of %s does not parse back: %v", s.Name, d.Name, err)
			}
		}
	}
	if _, err := Prepare("kihl"); err == nil || !strings.Contains(err.Error(), "kihl-step, kihl-distribution") {
		t.Errorf("unknown scenario: error %v should list the valid names", err)
	}
}

func TestSetErrors(t *testing.T) {
	cases := []struct {
		name, set string
		want      []string // substrings of the error; nil means success
	}{
		{"duration with unit", "ti=0.1s", nil},
		{"duration in plain seconds", "ti=0.1", nil},
		{"choice", "service=det", nil},
		{"choice fluid", "model=fluid", nil},
		{"int", "burst=1", nil},
		{"bool", "compare_service=false", nil},
		{"unknown parameter", "tii=0.1", []string{`unknown parameter "tii"`, "valid:", "ti,", "rho_ref"}},
		{"no equals sign", "ti", []string{`--set "ti": want key=value`}},
		{"empty key", "=3", []string{"want key=value"}},
		{"bad duration", "ti=fast", []string{"parameter ti=", "not a duration"}},
		{"negative duration", "ti=-1s", []string{"parameter ti=", "must be within"}},
		{"bad choice", "service=gamma", []string{"parameter service=", "must be one of exp, det"}},
		{"float out of range", "rho_ref=1.5", []string{"parameter rho_ref=", "must be within [0.01, 1]"}},
		{"not a number", "k=abc", []string{"parameter k=", "not a number"}},
		{"NaN", "k=NaN", []string{"parameter k=", "not a number"}},
		{"int not integer", "burst=2.5", []string{"parameter burst=", "not an integer"}},
		{"bad bool", "compare_service=maybe", []string{"parameter compare_service=", "not a boolean"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Prepare("kihl-step")
			if err != nil {
				t.Fatal(err)
			}
			err = p.Set(tc.set)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Set(%q): %v", tc.set, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Set(%q) succeeded, want an error", tc.set)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Set(%q) error %q does not contain %q", tc.set, err, w)
				}
			}
		})
	}
}

// writeRun runs a scenario and writes its folder, returning the folder.
func writeRun(t *testing.T, name string, seed uint64, sets ...string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := runResult(t, name, seed, sets...).Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDeterminism(t *testing.T) {
	for _, name := range []string{"kihl-step", "seda-spike", "graph"} {
		t.Run(name, func(t *testing.T) {
			a := writeRun(t, name, 1)
			b := writeRun(t, name, 1)
			c := writeRun(t, name, 2)
			files, err := os.ReadDir(a)
			if err != nil {
				t.Fatal(err)
			}
			var pngs, csvs int
			for _, f := range files {
				x, _ := os.ReadFile(filepath.Join(a, f.Name()))
				y, err := os.ReadFile(filepath.Join(b, f.Name()))
				if err != nil {
					t.Fatalf("%s missing from the second run: %v", f.Name(), err)
				}
				if !bytes.Equal(x, y) {
					t.Errorf("%s differs between two runs with seed 1", f.Name())
				}
				switch filepath.Ext(f.Name()) {
				case ".png":
					pngs++
				case ".csv":
					csvs++
				}
			}
			if pngs == 0 || csvs == 0 {
				t.Errorf("%d PNG and %d CSV files written, want some of each", pngs, csvs)
			}
			x, _ := os.ReadFile(filepath.Join(a, "timeseries.csv"))
			z, _ := os.ReadFile(filepath.Join(c, "timeseries.csv"))
			if bytes.Equal(x, z) {
				t.Error("seeds 1 and 2 gave identical time series")
			}
			s, err := report.ReadSummary(filepath.Join(a, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			if s.Scenario != name || s.Mode != "sim" || s.Seed != 1 || len(s.Names()) < 3 {
				t.Errorf("summary header %q/%q/%d with %d metrics", s.Scenario, s.Mode, s.Seed, len(s.Names()))
			}
		})
	}
}

// TestTimeseriesOneRowPerPeriod checks the CSV contract: one row per
// control period (per variant), with time, counts and the setting.
func TestTimeseriesOneRowPerPeriod(t *testing.T) {
	p, _ := Prepare("kihl-step")
	if err := p.Set("compare_service=false"); err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	ts := res.Table("timeseries.csv")
	for _, col := range []string{"time_s", "offered", "admitted", "rejected", "completed", "mean_rt_ms", "p90_rt_ms", "utilization", "queue", "rate_rps"} {
		if !slices.Contains(ts.Columns(), col) {
			t.Errorf("timeseries.csv lacks column %s: %v", col, ts.Columns())
		}
	}
	main, _ := ts.Filter("variant", "main")
	if main.Len() != 60 {
		t.Errorf("main variant has %d rows for 60 periods", main.Len())
	}
	times, _ := main.Floats("time_s")
	for i, x := range times {
		if x != float64(i+1) {
			t.Fatalf("row %d at t=%v, want %d", i, x, i+1)
		}
	}
}
