// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Between testdata/cgroup/cpu.stat.t0 and cpu.stat.t1 usage_usec grows by
// 900000 µs (0.9 CPU-seconds).
func TestCgroupFixtures(t *testing.T) {
	ncpu := float64(runtime.NumCPU())
	tests := []struct {
		name     string
		fixture  string // testdata/cgroup/<fixture>/ limit files; "" for none
		files    []string
		wall     time.Duration
		capacity float64
		want     float64
	}{
		{"quota 1.5 CPUs", "quota", []string{"cpu.max"}, time.Second, 1.5, 0.9 / 1.5},
		{"no quota, cpuset 0-1,4", "unlimited-cpuset", []string{"cpu.max", "cpuset.cpus.effective"}, time.Second, 3, 0.3},
		{"no quota, no cpuset", "unlimited", []string{"cpu.max"}, time.Second, ncpu, min(1, 0.9/ncpu)},
		{"quota 4 but cpuset 2-3", "quota-cpuset", []string{"cpu.max", "cpuset.cpus.effective"}, time.Second, 2, 0.45},
		{"no cpu.max (root group)", "", nil, 2 * time.Second, ncpu, min(1, 0.45/ncpu)},
		{"quota over 0.5 s clamps to 1", "quota", []string{"cpu.max"}, 500 * time.Millisecond, 1.5, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"cpu.stat": "cgroup/cpu.stat.t0"}
			for _, f := range tc.files {
				files[f] = filepath.Join("cgroup", tc.fixture, f)
			}
			stage(t, dir, files)
			c, err := NewCgroup(dir, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := c.Capacity(); err != nil || got != tc.capacity {
				t.Errorf("Capacity() = %v, %v; want %v", got, err, tc.capacity)
			}
			if got, want := c.Describe(), "cgroup "+dir; got != want {
				t.Errorf("Describe() = %q, want %q", got, want)
			}
			stage(t, dir, map[string]string{"cpu.stat": "cgroup/cpu.stat.t1"})
			wantUtilization(t, "t1", c, t0.Add(tc.wall), tc.want)
			wantUtilization(t, "idle second", c, t0.Add(tc.wall+time.Second), 0)
		})
	}
}

func TestCgroupErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	_, err := NewCgroup(missing, t0)
	wantErr(t, "missing dir", err, filepath.Join(missing, "cpu.stat"))

	_, err = NewCgroup("testdata/cgroup/no-usage", t0)
	wantErr(t, "no usage_usec", err, "testdata/cgroup/no-usage/cpu.stat", "usage_usec")

	_, err = NewCgroup("testdata/cgroup/bad-max", t0)
	wantErr(t, "bad cpu.max", err, "testdata/cgroup/bad-max/cpu.max", `"150000"`)

	dir := t.TempDir()
	writeFile(t, dir, "cpu.stat", "usage_usec 12x\n")
	_, err = NewCgroup(dir, t0)
	wantErr(t, "bad usage", err, filepath.Join(dir, "cpu.stat")+":1", `"12x"`)

	for _, bad := range []string{"0 100000", "-5 100000", "100000 0", "a b", "1 2 3"} {
		dir := t.TempDir()
		stage(t, dir, map[string]string{"cpu.stat": "cgroup/cpu.stat.t0"})
		writeFile(t, dir, "cpu.max", bad)
		_, err = NewCgroup(dir, t0)
		wantErr(t, "cpu.max "+bad, err, filepath.Join(dir, "cpu.max"))
	}

	dir = t.TempDir()
	stage(t, dir, map[string]string{"cpu.stat": "cgroup/cpu.stat.t0"})
	writeFile(t, dir, "cpuset.cpus.effective", "0-x\n")
	_, err = NewCgroup(dir, t0)
	wantErr(t, "bad cpuset", err, filepath.Join(dir, "cpuset.cpus.effective"), `"0-x"`)

	// An empty cpuset file means "no cpuset controller", not an error.
	writeFile(t, dir, "cpuset.cpus.effective", "\n")
	if _, err := NewCgroup(dir, t0); err != nil {
		t.Errorf("empty cpuset.cpus.effective: %v", err)
	}
}

func TestCgroupTimeAndCounterErrors(t *testing.T) {
	dir := t.TempDir()
	stage(t, dir, map[string]string{"cpu.stat": "cgroup/cpu.stat.t1", "cpu.max": "cgroup/quota/cpu.max"})
	c, err := NewCgroup(dir, t0)
	if err != nil {
		t.Fatal(err)
	}
	wantNoTimeElapsed(t, "same now", c, t0)
	// The group is re-created: usage_usec restarts lower.
	stage(t, dir, map[string]string{"cpu.stat": "cgroup/cpu.stat.t0"})
	_, err = c.Utilization(t0.Add(time.Second))
	wantErr(t, "usage backwards", err, filepath.Join(dir, "cpu.stat"), "backwards")
	// The lower value is the new baseline.
	stage(t, dir, map[string]string{"cpu.stat": "cgroup/cpu.stat.t1"})
	wantUtilization(t, "after re-baseline", c, t0.Add(2*time.Second), 0.6)
	// A limit file that breaks later is reported too.
	writeFile(t, dir, "cpu.max", "garbage")
	_, err = c.Utilization(t0.Add(3 * time.Second))
	wantErr(t, "cpu.max broken later", err, filepath.Join(dir, "cpu.max"))
}
