// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/figure/record"
)

// TestSimRecordAndResults records a short simulated run, splices the
// table into a document and checks it, then holds the check to a changed
// table.
func TestSimRecordAndResults(t *testing.T) {
	tmp := t.TempDir()
	results := filepath.Join(tmp, "results")
	code, out, errOut := runCLI(t, "sim", "kihl-step", "--seed", "3", "--out", filepath.Join(tmp, "run"),
		"--set", "compare_service=false", "--set", "duration=30s", "--record="+results)
	if code != 0 {
		t.Fatalf("sim: exit %d, stderr %q", code, errOut)
	}
	path := filepath.Join(results, "kihl-step", "sim.json")
	if !strings.Contains(out, "record: "+path+"\n") {
		t.Errorf("sim output does not name the record:\n%s", out)
	}
	r, err := record.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "sluice-lab sim kihl-step --seed 3 --set compare_service=false --set duration=30s"; r.Command != want {
		t.Errorf("command %q, want %q", r.Command, want)
	}
	if r.Mode != figure.Sim || r.Seed != 3 || r.CPUs < 1 || len(r.Checks) == 0 || r.Started.IsZero() {
		t.Errorf("record %+v", r)
	}

	doc := filepath.Join(tmp, "docs", "experiments.md")
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, []byte("# E\n\n"+record.Begin+"\n"+record.End+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "results", "--dir", results, "--doc", doc, "--check"); code != 1 || !strings.Contains(errOut, "differs") {
		t.Errorf("check of an empty table: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "results", "--dir", results, "--doc", doc, "--write"); code != 0 {
		t.Fatalf("write: exit %d, stderr %q", code, errOut)
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "| `kihl-step` | sim | [") || !strings.Contains(string(data), "](../results/kihl-step/sim.json)") {
		t.Errorf("written table lacks the recorded row linked to its record:\n%s", data)
	}
	if code, _, errOut := runCLI(t, "results", "--dir", results, "--doc", doc, "--check"); code != 0 {
		t.Errorf("check after write: exit %d, stderr %q", code, errOut)
	}
	code, printed, _ := runCLI(t, "results", "--dir", results, "--doc", doc)
	if code != 0 || !strings.Contains(string(data), printed) {
		t.Errorf("printed table (exit %d) is not the written one:\n%s", code, printed)
	}
	if code, _, errOut := runCLI(t, "results", "--write", "--check"); code != 2 || !strings.Contains(errOut, "give one") {
		t.Errorf("--write --check: exit %d, stderr %q", code, errOut)
	}
}

func TestCommandLine(t *testing.T) {
	cmd := newExperimentCmd()
	if err := cmd.ParseFlags([]string{"--quick", "--rows", "nginx,auto", "--seed", "2", "--out", "/tmp/x", "--record", "--backend-process=false", "--service", "log normal"}); err != nil {
		t.Fatal(err)
	}
	want := "experiment adaptive --backend-process=false --quick --rows nginx,auto --seed 2 --service 'log normal'"
	if got := commandLine(cmd, "adaptive"); got != want {
		t.Errorf("commandLine = %q, want %q", got, want)
	}
}
