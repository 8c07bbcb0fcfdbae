// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestDetectCgroupFixtures detects the group of fake cgroup trees (v2 and
// v1, nested Kubernetes paths, a container without a cgroup namespace,
// split cpu and cpuacct hierarchies), then reads 0.9 CPU-seconds of usage
// over one second against the group's capacity.
func TestDetectCgroupFixtures(t *testing.T) {
	tests := []struct {
		fixture  string
		version  int
		dir      string // relative to the tree's root/
		acct     string // v1
		set      string // v1
		usage    string // file the usage is written to, relative to root/
		limited  bool
		capacity float64
	}{
		{"v2-nested", 2, "kubepods.slice/kubepods-pod1.slice/cri-abc.scope", "", "",
			"kubepods.slice/kubepods-pod1.slice/cri-abc.scope/cpu.stat", true, 0.5},
		{"v2-max", 2, "app", "", "", "app/cpu.stat", runtime.NumCPU() > 2, 2},
		{"v1-nested", 1, "cpu,cpuacct/kubepods/burstable/pod1/ctr", "cpu,cpuacct/kubepods/burstable/pod1/ctr",
			"cpuset/kubepods/burstable/pod1/ctr", "cpu,cpuacct/kubepods/burstable/pod1/ctr/cpuacct.usage", true, 1.5},
		{"v1-host-path", 1, "cpu,cpuacct", "cpu,cpuacct", "cpuset", "cpu,cpuacct/cpuacct.usage", runtime.NumCPU() > 2, 2},
		{"v1-split", 1, "cpu/svc", "cpuacct/svc", "", "cpuacct/svc/cpuacct.usage", true, 2},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			tree := t.TempDir()
			if err := os.CopyFS(tree, os.DirFS(filepath.Join("testdata/cgroup", tc.fixture))); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(tree, "root")
			p, err := DetectCgroup(root, filepath.Join(tree, "self-cgroup"))
			if err != nil {
				t.Fatal(err)
			}
			want := CgroupPaths{Version: tc.version, Dir: filepath.Join(root, tc.dir)}
			if tc.version == 1 {
				want.CPUAcct = filepath.Join(root, tc.acct)
				if tc.set != "" {
					want.CPUSet = filepath.Join(root, tc.set)
				}
			}
			if p != want {
				t.Fatalf("DetectCgroup = %+v, want %+v", p, want)
			}
			c, err := NewCgroupAt(p, 0, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := c.Capacity(); err != nil || got != tc.capacity {
				t.Errorf("Capacity() = %v, %v; want %v", got, err, tc.capacity)
			}
			if got, err := c.Limited(); err != nil || got != tc.limited {
				t.Errorf("Limited() = %v, %v; want %v", got, err, tc.limited)
			}
			// 0.9 CPU-seconds more.
			usage := filepath.Join(root, tc.usage)
			next := "8123456000"
			if tc.version == 1 {
				next = "9023456000"
			}
			if tc.version == 2 {
				next = "usage_usec 9023456\n"
			}
			if err := os.WriteFile(usage, []byte(next), 0o644); err != nil {
				t.Fatal(err)
			}
			wantUtilization(t, "0.9 CPU-seconds later", c, t0.Add(time.Second), min(1, 0.9/tc.capacity))
			// The override replaces the limits.
			o, err := NewCgroupAt(p, 3, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := o.Capacity(); err != nil || got != 3 {
				t.Errorf("override: Capacity() = %v, %v; want 3", got, err)
			}
			if !strings.HasSuffix(o.Describe(), ", 3 CPUs") {
				t.Errorf("override: Describe() = %q", o.Describe())
			}
		})
	}
}

func TestDetectCgroupErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := DetectCgroup(dir, filepath.Join(dir, "nope"))
	wantErr(t, "no self cgroup file", err, filepath.Join(dir, "nope"))

	writeFile(t, dir, "self", "0::/\ngarbage\n")
	_, err = DetectCgroup(dir, filepath.Join(dir, "self"))
	wantErr(t, "garbage line", err, filepath.Join(dir, "self")+":2", `"garbage"`)

	writeFile(t, dir, "self", "5:memory:/x\n")
	_, err = DetectCgroup(dir, filepath.Join(dir, "self"))
	wantErr(t, "no cpu controller", err, "cgroup v1 cpu and cpuacct")

	writeFile(t, dir, "cgroup.controllers", "cpu\n")
	_, err = DetectCgroup(dir, filepath.Join(dir, "self"))
	wantErr(t, "v2 without 0:: line", err, "0::/path")

	// v1: cfs quota set but period broken.
	tree := t.TempDir()
	if err := os.CopyFS(tree, os.DirFS("testdata/cgroup/v1-split")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tree, "root/cpu/svc"), "cpu.cfs_period_us", "x")
	p, err := DetectCgroup(filepath.Join(tree, "root"), filepath.Join(tree, "self-cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewCgroupAt(p, 0, t0)
	wantErr(t, "bad period", err, "cpu.cfs_period_us", `"x"`)
	_, err = NewCgroupAt(p, -1, t0)
	wantErr(t, "negative override", err, "capacity -1 CPUs")
}

// TestCgroupReal reads the group this test runs in, on this machine's
// cgroup v2 or v1 hierarchy, while it burns CPU for 50 ms.
func TestCgroupReal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux only")
	}
	p, err := DetectCgroup(DefaultCgroupRoot, "/proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no cgroup hierarchy here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []int{2, 1} {
		t.Run(map[int]string{2: "v2", 1: "v1"}[version], func(t *testing.T) {
			if p.Version != version {
				t.Skipf("%s is cgroup v%d, not v%d", DefaultCgroupRoot, p.Version, version)
			}
			start := time.Now()
			c, err := NewCgroupAt(p, 0, start)
			if err != nil {
				t.Fatal(err)
			}
			capacity, err := c.Capacity()
			if err != nil || capacity <= 0 {
				t.Fatalf("Capacity() = %v, %v", capacity, err)
			}
			for x := 0; time.Since(start) < 50*time.Millisecond; x++ {
				_ = x * x
			}
			u, err := c.Utilization(time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if !(u > 0 && u <= 1) {
				t.Errorf("%s: utilization %v while this test burnt CPU, want in (0, 1]", c.Describe(), u)
			}
			t.Logf("%s: capacity %g CPUs, utilization %.3f", c.Describe(), capacity, u)
		})
	}
}
