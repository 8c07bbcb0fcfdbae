// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lab/figure/live"
	"github.com/sluicehq/sluice/lab/figure/simulated"
	"github.com/sluicehq/sluice/lab/report"
)

// sim --list and experiment --list print one line for each figure of
// their mode, in registry order: its name, then its description.
func TestList(t *testing.T) {
	for cmd, names := range map[string][]string{"sim": simulated.Names(), "experiment": live.Names()} {
		code, out, errOut := runCLI(t, cmd, "--list")
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", cmd, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(names) {
			t.Errorf("%s: %d lines for %d figures:\n%s", cmd, len(lines), len(names), out)
		}
		for i, name := range names {
			if i < len(lines) && !strings.HasPrefix(lines[i], name+" ") {
				t.Errorf("%s: line %d = %q, want the figure %s with its description", cmd, i, lines[i], name)
			}
		}
	}
}

func TestSimParams(t *testing.T) {
	code, out, errOut := runCLI(t, "sim", "kihl-step", "--params")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"kihl-step: ", "ti = 2.8s", "service = exp  (one of exp|det)", "rho_ref = 0.8"} {
		if !strings.Contains(out, want) {
			t.Errorf("--params output lacks %q:\n%s", want, out)
		}
	}
}

func TestSimRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errOut := runCLI(t, "sim", "kihl-step", "--seed", "3", "--out", dir, "--set", "compare_service=false", "--set", "duration=30s")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"kihl-step (seed 3)\n", "  utilization_mean ", "  settling_time_s ", "expectations met (expectations.csv)\n",
		"results: " + dir + " (summary.json, timeseries.csv, expectations.csv, utilization.png, rate.png)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	s, err := report.ReadSummary(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Scenario != "kihl-step" || s.Mode != "sim" || s.Seed != 3 {
		t.Errorf("summary header %q %q %d", s.Scenario, s.Mode, s.Seed)
	}
	for _, f := range []string{"timeseries.csv", "expectations.csv", "utilization.png", "rate.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestSimDefaultOut(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := os.Chdir(tmp); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	code, out, errOut := runCLI(t, "sim", "seda-spike", "--seed", "2", "--set", "spike_length=20s", "--set", "after=5s", "--set", "spike_start=5s")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := filepath.Join("out", "sim", "seda-spike-2")
	if !strings.Contains(out, "results: "+want+" ") {
		t.Errorf("output does not name %s:\n%s", want, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, want, "summary.json")); err != nil {
		t.Error(err)
	}
}

func TestSimUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"sim"}, []string{"name a scenario", "sluice-lab sim --list"}},
		{[]string{"sim", "kihl"}, []string{`unknown scenario "kihl"`, "kihl-step, kihl-distribution"}},
		{[]string{"sim", "--list", "kihl-step"}, []string{"--list takes no scenario"}},
		{[]string{"sim", "kihl-step", "seda-spike"}, []string{"accepts at most 1 arg"}},
		{[]string{"sim", "kihl-step", "--set", "tii=1"}, []string{`unknown parameter "tii"`, "valid: ", "rho_ref"}},
		{[]string{"sim", "kihl-step", "--set", "ti=fast"}, []string{"parameter ti=", "not a duration"}},
		{[]string{"sim", "kihl-step", "--set", "ti"}, []string{"want key=value"}},
		{[]string{"sim", "kihl-step", "--seed", "-1"}, []string{"invalid argument"}},
		{[]string{"sim", "kihl-step", "--bogus"}, []string{"unknown flag: --bogus"}},
	}
	for _, c := range cases {
		wantUsageError(t, c.args, c.want...)
	}
}

func TestSimRuntimeErrorExitsOne(t *testing.T) {
	// Parameters valid one by one but inconsistent together are bad
	// configuration (exit 2), named in the message.
	code, _, errOut := runCLI(t, "sim", "yaksha-load-sweep", "--out", t.TempDir(), "--set", "duration=10s", "--set", "warmup=20s")
	if code != 2 || !strings.Contains(errOut, "warmup 20s must be shorter than duration 10s") {
		t.Errorf("inconsistent parameters: exit %d, stderr %q", code, errOut)
	}
	// An output folder that cannot be created is a runtime failure.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "sim", "kihl-step", "--out", filepath.Join(file, "sub"), "--set", "duration=5s")
	if code != 1 || errOut == "" {
		t.Errorf("unwritable --out: exit %d, stderr %q", code, errOut)
	}
}
