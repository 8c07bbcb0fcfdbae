// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A short run without peers to tune writes best.csv with sluice's and
// the uncontrolled chain's rows.
func TestRunWritesBest(t *testing.T) {
	dir := t.TempDir()
	err := run([]string{"-out", dir, "-scenarios", "graph", "-peers", "", "-seeds", "1", "-after", "2s",
		"-set", "warm=2s,trigger_len=1s"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "best.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "graph,sluice (inprocess)") || !strings.HasPrefix(lines[2], "graph,none,") {
		t.Fatalf("best.csv:\n%s", b)
	}
}

func TestRunUsage(t *testing.T) {
	if err := run([]string{"-scenarios", "graph"}); err == nil {
		t.Fatal("no -out accepted")
	}
	if err := run([]string{"-out", t.TempDir(), "-scenarios", "chain"}); err == nil || !strings.Contains(err.Error(), "chain") {
		t.Fatalf("unknown scenario: %v", err)
	}
	if err := run([]string{"-out", t.TempDir(), "-scenarios", "graph", "-set", "warm=2s,after=1s,trigger_len=1s", "-peers", "sluice"}); err == nil {
		t.Fatal("unknown peer accepted")
	}
}
