// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Process 4242 in testdata/proc/t0 and t1 uses utime 1500 → 1650 and stime
// 500 → 550 ticks: 200 ticks = 2 CPU-seconds (its children's cutime and
// cstime also grow and must not count).
func TestProcessFixtures(t *testing.T) {
	tests := []struct {
		name string
		cpus float64
		wall time.Duration
		want float64
	}{
		{"2 cpus over 2 s", 2, 2 * time.Second, 0.5},
		{"4 cpus over 2 s", 4, 2 * time.Second, 0.25},
		{"1 cpu over 2 s", 1, 2 * time.Second, 1},
		{"1 cpu over 1 s clamps", 1, time.Second, 1},
		{"half a cpu over 8 s", 0.5, 8 * time.Second, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			stage(t, root, map[string]string{"4242/stat": "proc/t0/4242/stat"})
			p, err := NewProcess(root, 4242, tc.cpus, t0)
			if err != nil {
				t.Fatal(err)
			}
			stage(t, root, map[string]string{"4242/stat": "proc/t1/4242/stat"})
			wantUtilization(t, "t1", p, t0.Add(tc.wall), tc.want)
		})
	}
}

func TestProcessErrors(t *testing.T) {
	root := t.TempDir()
	stage(t, root, map[string]string{"4242/stat": "proc/t0/4242/stat"})

	_, err := NewProcess(root, 4243, 1, t0)
	wantErr(t, "missing pid", err, filepath.Join(root, "4243"))
	for _, pid := range []int{0, -3} {
		_, err = NewProcess(root, pid, 1, t0)
		wantErr(t, "bad pid", err, "pid "+strconv.Itoa(pid))
	}
	for _, cpus := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		_, err = NewProcess(root, 4242, cpus, t0)
		wantErr(t, "bad cpus", err, "cpus")
	}

	p, err := NewProcess(root, 4242, 2, t0)
	if err != nil {
		t.Fatal(err)
	}
	wantNoTimeElapsed(t, "same now", p, t0)
	// The pid is reused by another process.
	stage(t, root, map[string]string{"4242/stat": "proc/replaced/4242/stat"})
	_, err = p.Utilization(t0.Add(time.Second))
	wantErr(t, "replaced", err, filepath.Join(root, "4242", "stat"), "different process")
	// The process exits.
	if err := os.RemoveAll(filepath.Join(root, "4242")); err != nil {
		t.Fatal(err)
	}
	_, err = p.Utilization(t0.Add(2 * time.Second))
	wantErr(t, "exited", err, filepath.Join(root, "4242", "stat"))
	// A corrupt stat file.
	if err := os.MkdirAll(filepath.Join(root, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "4242/stat", "4242 no parentheses\n")
	_, err = p.Utilization(t0.Add(3 * time.Second))
	wantErr(t, "corrupt", err, filepath.Join(root, "4242", "stat"))
}

func TestPidfile(t *testing.T) {
	p, err := NewPidfile("testdata/proc/t0", "testdata/pidfile-4242", 2, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Describe(), "process 4242 (testdata/proc/t0/4242/stat, 2 cpus) from pidfile testdata/pidfile-4242"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}

	_, err = NewPidfile("testdata/proc/t0", "testdata/no-such.pid", 2, t0)
	wantErr(t, "missing pidfile", err, "testdata/no-such.pid")
	_, err = NewPidfile("testdata/proc/t0", "testdata/pidfile-garbage", 2, t0)
	wantErr(t, "garbage pidfile", err, "testdata/pidfile-garbage", `"not-a-pid"`)
	dir := t.TempDir()
	writeFile(t, dir, "dead.pid", "999999\n")
	_, err = NewPidfile("testdata/proc/t0", filepath.Join(dir, "dead.pid"), 2, t0)
	wantErr(t, "dead pid", err, filepath.Join(dir, "dead.pid"), "testdata/proc/t0/999999")
}

// TestProcessReal reads this test process's own /proc/<pid>/stat.
func TestProcessReal(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this machine")
	}
	dir := t.TempDir()
	writeFile(t, dir, "self.pid", strconv.Itoa(os.Getpid())+"\n")
	start := time.Now()
	p, err := NewPidfile("/proc", filepath.Join(dir, "self.pid"), float64(runtime.NumCPU()), start)
	if err != nil {
		t.Fatal(err)
	}
	u, err := p.Utilization(start.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if u < 0 || u > 1 {
		t.Errorf("utilization %v outside [0, 1]", u)
	}
}
