// SPDX-License-Identifier: Apache-2.0

package record

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
)

func load(v float64) *float64 { return &v }

// testRecords is a met live run and a missed simulated one.
func testRecords() []*Record {
	t := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
	return []*Record{
		{Figure: "seda-spike", Mode: figure.Live, Seed: 1, Started: t, Load1: load(0.19), CPUs: 2, Revision: "abcdef012345",
			Command: "sluice-lab experiment seda-spike", WallTimeS: 120,
			Checks: []Check{{Claim: "p90 ≤ 1.5 × target", Measured: "p90_ms = 176 (must be ≤ 375)", Pass: true}}},
		{Figure: "kihl-step", Mode: figure.Sim, Seed: 2, Started: t.Add(time.Hour), CPUs: 2,
			Command: "sluice-lab sim kihl-step --seed 2", WallTimeS: 1,
			Checks: []Check{
				{Claim: "settles", Measured: "settling_time_s = 30 (must be ≤ 17)", Pass: false},
				{Claim: "|diff| ≤ 0.1", Measured: "x = 0", Pass: true},
			}},
	}
}

func TestWriteReadAll(t *testing.T) {
	root := t.TempDir()
	for _, r := range testRecords() {
		if _, err := r.Write(root); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadAll(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Figure != "kihl-step" || got[1].Figure != "seda-spike" || *got[1].Load1 != 0.19 || got[0].Load1 != nil {
		t.Fatalf("ReadAll = %+v", got)
	}
	if met, total := got[0].Passed(); met != 1 || total != 2 {
		t.Errorf("Passed = %d, %d; want 1, 2", met, total)
	}
	if recs, err := ReadAll(filepath.Join(root, "none")); err != nil || recs != nil {
		t.Errorf("ReadAll(missing root) = %v, %v; want no records", recs, err)
	}
}

func TestReadRejects(t *testing.T) {
	good := `{"figure": "seda-spike", "mode": "live", "seed": 1, "started": "2026-12-05T01:02:03Z", "load_1m_at_start": null,
		"cpus": 2, "revision": "", "command": "sluice-lab experiment seda-spike", "wall_time_s": 1, "checks": [{"claim": "c", "measured": "m", "pass": true}]}`
	for _, tc := range []struct{ name, file, data, want string }{
		{"unknown figure", "nope/live.json", strings.Replace(good, `"seda-spike", "mode"`, `"nope", "mode"`, 1), `unknown experiment "nope"`},
		{"sim of a live-only figure", "peers/sim.json", strings.Replace(strings.Replace(good, `"live"`, `"sim"`, 1), `"seda-spike", "mode"`, `"peers", "mode"`, 1), `unknown scenario "peers"`},
		{"bad mode", "seda-spike/live.json", strings.Replace(good, `"live"`, `"both"`, 1), `mode "both"`},
		{"misplaced", "seda-spike/sim.json", good, "belongs in seda-spike/live.json"},
		{"no checks", "seda-spike/live.json", strings.Replace(good, `[{"claim": "c", "measured": "m", "pass": true}]`, `[]`, 1), "checks: none"},
		{"unknown field", "seda-spike/live.json", strings.Replace(good, `"seed"`, `"sead"`, 1), `unknown field "sead"`},
		{"stray file", "seda-spike/notes.txt", "notes", "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, tc.file)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadAll(root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadAll = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	got := Table(testRecords(), "../lab/results")
	for _, want := range []string{
		"| figure | mode | expectations met | run (UTC) | load at start | build | command |\n|---|---|---|---|---|---|---|\n" +
			"| `kihl-step` | live | no record | — | — | — | `sluice-lab experiment kihl-step` |\n" +
			"| `kihl-step` | sim | [**1 of 2** (missed 1)](../lab/results/kihl-step/sim.json) | 2026-12-05 02:02 | — (2 CPUs) | — | `sluice-lab sim kihl-step --seed 2` |\n",
		"| `seda-spike` | live | [all 1 met](../lab/results/seda-spike/live.json) | 2026-12-05 01:02 | 0.19 (2 CPUs) | `abcdef012345` | `sluice-lab experiment seda-spike` |\n" +
			"| `seda-spike` | sim | no record |",
		"| `peers` | live | no record |",
		fmt.Sprintf("\n2 of %d figure runs recorded; 1 met every expectation.\n\nMissed", strings.Count(got, "\n| `")),
		"\nMissed expectations:\n\n- `kihl-step` sim: settles — settling_time_s = 30 (must be ≤ 17)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks\n%s\n--- table:\n%s", want, got)
		}
	}
	busy := testRecords()
	busy[0].Load1 = load(2.5)
	busy[1].Load1 = load(30)
	b := Table(busy, "../lab/results")
	for _, want := range []string{"| **2.50 (2 CPUs)** busy |", "| 30.00 (2 CPUs) |", "\n1 live runs started on a busy machine"} {
		if !strings.Contains(b, want) {
			t.Errorf("table of a busy live run lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(got, "| `peers` | sim") || strings.Contains(got, "| `cluster` | sim") {
		t.Error("table lists a simulated row for a live-only figure")
	}
	rows := 0
	for _, s := range figure.All() {
		for _, m := range []figure.Mode{figure.Live, figure.Sim} {
			if s.Has(m) {
				rows++
			}
		}
	}
	if n := strings.Count(got, "\n| `"); n != rows {
		t.Errorf("table has %d rows; want one per figure and mode, %d", n, rows)
	}
}

func TestSpliceVerify(t *testing.T) {
	root := t.TempDir()
	recs := testRecords()
	for _, r := range recs {
		if _, err := r.Write(filepath.Join(root, "lab", "results")); err != nil {
			t.Fatal(err)
		}
	}
	docDir := filepath.Join(root, "docs")
	results := filepath.Join(root, "lab", "results")
	const base = "../lab/results"
	doc := "# Title\n\nintro\n\n" + Begin + "\nstale\n" + End + "\n\nguide\n"
	if err := Verify(doc, results, base, docDir); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("Verify(stale table) = %v; want a difference", err)
	}
	fresh, err := Splice(doc, Table(recs, base))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(fresh, "# Title\n\nintro\n\n"+Begin+"\n| figure |") || !strings.HasSuffix(fresh, "\n"+End+"\n\nguide\n") {
		t.Fatalf("Splice kept the wrong text around the table:\n%s", fresh)
	}
	if err := Verify(fresh, results, base, docDir); err != nil {
		t.Fatalf("Verify(fresh) = %v", err)
	}
	again, err := Splice(fresh, Table(recs, base))
	if err != nil || again != fresh {
		t.Fatalf("Splice is not idempotent: %v", err)
	}

	// A newer run changes the record: the committed table is stale.
	recs[1].Checks[0].Pass = true
	if _, err := recs[1].Write(results); err != nil {
		t.Fatal(err)
	}
	if err := Verify(fresh, results, base, docDir); err == nil || !strings.Contains(err.Error(), "kihl-step") {
		t.Fatalf("Verify(after a newer run) = %v; want the differing kihl-step line", err)
	}

	// A record the table names is gone.
	if err := os.Remove(filepath.Join(results, "seda-spike", "live.json")); err != nil {
		t.Fatal(err)
	}
	if err := Verify(fresh, results, base, docDir); err == nil || !strings.Contains(err.Error(), "record is missing: ../lab/results/seda-spike/live.json") {
		t.Fatalf("Verify(missing record) = %v; want the missing record named", err)
	}

	for _, bad := range []string{"no markers\n", Begin + "\nno end\n", Begin + "no line break" + End} {
		if _, err := Splice(bad, "t\n"); err == nil {
			t.Errorf("Splice(%q) succeeded", bad)
		}
		if err := Verify(bad, results, base, docDir); err == nil {
			t.Errorf("Verify(%q) succeeded", bad)
		}
	}
}

// TestDocsTable holds docs/experiments.md's table to the committed
// records under lab/results: regenerate it with `sluice-lab results
// --write` after recording a run.
func TestDocsTable(t *testing.T) {
	const repo = "../../.."
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "experiments.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(string(doc), filepath.Join(repo, "lab", "results"), "../lab/results", filepath.Join(repo, "docs")); err != nil {
		t.Fatalf("docs/experiments.md: %v", err)
	}
}

func TestBuildRevisionStamped(t *testing.T) {
	defer func(s string) { stampedRevision = s }(stampedRevision)
	for stamp, want := range map[string]string{
		"0123456789abcdef0123":       "0123456789ab",
		"0123456789abcdef0123+dirty": "0123456789ab+dirty",
	} {
		stampedRevision = stamp
		if got := BuildRevision(); got != want {
			t.Errorf("stamped %q: BuildRevision = %q, want %q", stamp, got, want)
		}
	}
}
