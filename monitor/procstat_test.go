// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fixtures testdata/proc/t0/stat and t1/stat differ by these per-CPU
// tick deltas (user nice system idle iowait irq softirq steal guest):
//
//	cpu0: 60 0 20  15 5 0 0  0 30   busy 1 − 20/100  = 0.8 (guest is inside user)
//	cpu1: 10 0 10  80 0 0 0  0  0   busy 1 − 80/100  = 0.2
//	cpu2:  0 0  0 100 0 0 0  0  0   busy 0
//	cpu3: 50 0 20  10 0 5 5 10  0   busy 1 − 10/100  = 0.9 (steal is busy)
//	all:                            busy 1 − 210/400 = 0.475
func TestProcStatFixtures(t *testing.T) {
	tests := []struct {
		name     string
		cpus     []int
		want     float64
		describe string
	}{
		{"all cpus", nil, 0.475, "cpu ROOT/stat (all cpus)"},
		{"cpu 1", []int{1}, 0.2, "cpu ROOT/stat (cpus 1)"},
		{"cpus 0,2-3", []int{0, 2, 3}, 1 - 130.0/300, "cpu ROOT/stat (cpus 0,2-3)"},
		{"unsorted with duplicates", []int{3, 0, 2, 2}, 1 - 130.0/300, "cpu ROOT/stat (cpus 0,2-3)"},
		{"idle cpu", []int{2}, 0, "cpu ROOT/stat (cpus 2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			stage(t, root, map[string]string{"stat": "proc/t0/stat"})
			p, err := NewProcStat(root, tc.cpus)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p.Describe(), strings.ReplaceAll(tc.describe, "ROOT", root); got != want {
				t.Errorf("Describe() = %q, want %q", got, want)
			}
			// Same file again: the counters have not moved.
			wantNoTimeElapsed(t, "unchanged counters", p, t0)
			stage(t, root, map[string]string{"stat": "proc/t1/stat"})
			wantUtilization(t, "t1", p, t0, tc.want)
		})
	}
}

func TestProcStatCountersBackwards(t *testing.T) {
	root := t.TempDir()
	stage(t, root, map[string]string{"stat": "proc/t1/stat"})
	p, err := NewProcStat(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	stage(t, root, map[string]string{"stat": "proc/t0/stat"})
	_, err = p.Utilization(t0)
	wantErr(t, "backwards", err, filepath.Join(root, "stat"), "backwards")
	// t0 is the new baseline, so t1 now gives the fixture's utilization.
	stage(t, root, map[string]string{"stat": "proc/t1/stat"})
	wantUtilization(t, "after re-baseline", p, t0, 0.475)
}

func TestProcStatErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := NewProcStat(missing, nil)
	wantErr(t, "missing root", err, missing)

	empty := t.TempDir()
	_, err = NewProcStat(empty, nil)
	wantErr(t, "no stat file", err, filepath.Join(empty, "stat"))

	_, err = NewProcStat("testdata/proc/t0", []int{1, 7})
	wantErr(t, "absent CPU", err, "testdata/proc/t0/stat", "CPU 7")

	_, err = NewProcStat("testdata/proc/t0", []int{})
	wantErr(t, "empty selection", err, "testdata/proc/t0/stat", "empty CPU selection")

	_, err = NewProcStat("testdata/proc/t0", []int{-1})
	wantErr(t, "negative CPU", err, "CPU -1")

	// CPU 3 goes offline between two readings.
	root := t.TempDir()
	stage(t, root, map[string]string{"stat": "proc/t0/stat"})
	p, err := NewProcStat(root, []int{0, 3})
	if err != nil {
		t.Fatal(err)
	}
	stage(t, root, map[string]string{"stat": "proc/offline/stat"})
	_, err = p.Utilization(t0)
	wantErr(t, "offline CPU", err, filepath.Join(root, "stat"), "CPU 3")

	// The file disappears.
	if err := os.Remove(filepath.Join(root, "stat")); err != nil {
		t.Fatal(err)
	}
	_, err = p.Utilization(t0)
	wantErr(t, "vanished file", err, filepath.Join(root, "stat"))

	// A corrupt cpu line.
	stage(t, root, map[string]string{"stat": "proc/t0/stat"})
	writeFile(t, root, "stat", "cpu  1 2 x 4\n")
	_, err = p.Utilization(t0)
	wantErr(t, "corrupt file", err, filepath.Join(root, "stat"))
}

// TestProcStatReal reads this machine's /proc/stat.
func TestProcStatReal(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat on this machine")
	}
	sources := []struct {
		name string
		cpus []int
	}{{"all", nil}}
	if data, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		cpus, err := ParseCPUList(string(data))
		if err != nil {
			t.Fatalf("parse /sys/devices/system/cpu/online: %v", err)
		}
		sources = append(sources, struct {
			name string
			cpus []int
		}{"online", cpus})
	}
	for _, s := range sources {
		p, err := NewProcStat("/proc", s.cpus)
		if err != nil {
			t.Fatal(err)
		}
		// The counters advance once per clock tick; spin (keeping a CPU
		// busy) until they do, for at most a few seconds.
		deadline := time.Now().Add(5 * time.Second)
		for {
			u, err := p.Utilization(time.Now())
			if errors.Is(err, ErrNoTimeElapsed) && time.Now().Before(deadline) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if u < 0 || u > 1 {
				t.Fatalf("%s: utilization %v outside [0, 1]", s.name, u)
			}
			t.Logf("%s: %s: %.3f", s.name, p.Describe(), u)
			break
		}
	}
}
