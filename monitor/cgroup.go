// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cgroup measures the CPU utilization of a cgroup (a container, a
// systemd service, a Kubernetes pod's container), v2 or v1, against the
// CPU capacity the group may use:
//
//	utilization = Δusage / (Δwall · capacity)
//
// clamped to [0, 1], where usage is the group's CPU time (v2: usage_usec
// in <dir>/cpu.stat; v1: cpuacct.usage, nanoseconds, in the cpuacct
// directory) and capacity, in CPUs, is the override given to
// NewCgroupAt, else comes from the group's limits, re-read at every call
// so that a changed limit takes effect at once:
//
//   - the quota: v2 <dir>/cpu.max "quota period", v1
//     cpu.cfs_quota_us / cpu.cfs_period_us, gives quota/period CPUs; if
//     the cpuset (v2 <dir>/cpuset.cpus.effective, v1
//     cpuset.effective_cpus or cpuset.cpus) lists fewer CPUs than that,
//     the smaller number is used (a group cannot run on more CPUs than it
//     has);
//   - no quota (v2 cpu.max "max …" or no cpu.max at all, as in the root
//     group; v1 cfs_quota_us -1) means the number of CPUs in the cpuset if
//     it is known and not empty, else runtime.NumCPU().
//
// Readings above 1 (the usage counter and the caller's clock read at
// slightly different instants, or cpu.max.burst letting the group run past
// its quota for a while) are clamped to 1.
//
// The prometheus/procfs module has no reader for cgroup v2 cpu.stat or the
// v1 cpu and cpuacct files, so these small files are parsed here.
//
// Cgroup is safe for concurrent use. The zero value is not usable; create
// one with NewCgroup or NewCgroupAt.
type Cgroup struct {
	paths CgroupPaths
	cpus  float64 // capacity override in CPUs, 0 for the group's limits

	mu    sync.Mutex
	meter cpuMeter // the group's CPU time (usage) at the previous reading
}

// CgroupPaths locates the CPU files of one cgroup.
type CgroupPaths struct {
	// Version is 2 (the unified hierarchy) or 1.
	Version int
	// Dir is, for v2, the group's directory (cpu.stat, cpu.max,
	// cpuset.cpus.effective); for v1, the group's directory in the cpu
	// controller's hierarchy (cpu.cfs_quota_us, cpu.cfs_period_us).
	Dir string
	// CPUAcct is, for v1, the group's directory in the cpuacct hierarchy
	// (cpuacct.usage); often the same directory as Dir ("cpu,cpuacct").
	CPUAcct string
	// CPUSet is, for v1, the group's directory in the cpuset hierarchy, or
	// "" when the cpuset controller is not mounted.
	CPUSet string
}

// String returns "v2 <dir>" or "v1 <dir>" (with the cpuacct directory when
// it differs).
func (p CgroupPaths) String() string {
	if p.Version == 1 {
		if p.CPUAcct != "" && p.CPUAcct != p.Dir {
			return "v1 " + p.Dir + " (cpuacct " + p.CPUAcct + ")"
		}
		return "v1 " + p.Dir
	}
	return "v2 " + p.Dir
}

// NewCgroup returns a source for the cgroup v2 directory dir (for example
// /sys/fs/cgroup/system.slice/app.service) and takes its first reading at
// now. It returns an error naming the file if cpu.stat, cpu.max or
// cpuset.cpus.effective cannot be read or parsed.
func NewCgroup(dir string, now time.Time) (*Cgroup, error) {
	return NewCgroupAt(CgroupPaths{Version: 2, Dir: dir}, 0, now)
}

// NewCgroupAt returns a source for the group at p (from DetectCgroup, or
// written out) and takes its first reading at now. cpus, when positive,
// is the capacity in CPUs the usage is divided by, in place of the
// group's quota and cpuset (an operator who knows better: a quota set
// above the group, a burst allowance); 0 reads the limits. It returns an
// error naming the file if a usage or limit file cannot be read or
// parsed, and an error if cpus is negative, NaN or infinite.
func NewCgroupAt(p CgroupPaths, cpus float64, now time.Time) (*Cgroup, error) {
	if p.Version != 1 && p.Version != 2 {
		return nil, fmt.Errorf("monitor: cgroup: version %d is not 1 or 2", p.Version)
	}
	if p.Version == 1 && p.CPUAcct == "" {
		p.CPUAcct = p.Dir
	}
	if cpus < 0 || math.IsNaN(cpus) || math.IsInf(cpus, 0) {
		return nil, fmt.Errorf("monitor: cgroup: capacity %v CPUs is invalid: must be > 0, or 0 for the group's limits", cpus)
	}
	c := &Cgroup{paths: p, cpus: cpus}
	usage, err := c.usage()
	if err != nil {
		return nil, err
	}
	if _, err := c.Capacity(); err != nil {
		return nil, err
	}
	c.meter = cpuMeter{used: time.Duration(usage), at: now}
	return c, nil
}

// Paths returns where the group's files are.
func (c *Cgroup) Paths() CgroupPaths { return c.paths }

// usage returns the group's CPU time in nanoseconds.
func (c *Cgroup) usage() (int64, error) {
	if c.paths.Version == 1 {
		path := filepath.Join(c.paths.CPUAcct, "cpuacct.usage")
		v, err := readInt(path)
		if err != nil {
			return 0, err
		}
		if v < 0 {
			return 0, fmt.Errorf("monitor: cgroup: %s: %d is not a count of nanoseconds", path, v)
		}
		return v, nil
	}
	path := filepath.Join(c.paths.Dir, "cpu.stat")
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("monitor: cgroup: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || key != "usage_usec" {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil || v < 0 || v > math.MaxInt64/1000 {
			return 0, fmt.Errorf("monitor: cgroup: %s:%d: usage_usec %q is not a count of microseconds", path, line, val)
		}
		return v * 1000, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("monitor: cgroup: read %s: %w", path, err)
	}
	return 0, fmt.Errorf("monitor: cgroup: %s has no usage_usec line (is %s a cgroup v2 directory with the cpu controller?)", path, c.paths.Dir)
}

// readInt reads a file holding one decimal integer (v1 cgroup files).
func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("monitor: cgroup: %w", err)
	}
	s := strings.TrimSpace(string(data))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("monitor: cgroup: %s: %q is not an integer", path, s)
	}
	return v, nil
}

// Capacity returns the number of CPUs the group may use now, as described
// on Cgroup. It returns an error naming the file if a limit file exists
// but cannot be read or parsed.
func (c *Cgroup) Capacity() (float64, error) {
	if c.cpus > 0 {
		return c.cpus, nil
	}
	quota, hasQuota, err := c.quota()
	if err != nil {
		return 0, err
	}
	set, hasSet, err := c.cpuset()
	if err != nil {
		return 0, err
	}
	switch {
	case hasQuota && hasSet:
		return min(quota, float64(set)), nil
	case hasQuota:
		return quota, nil
	case hasSet:
		return float64(set), nil
	}
	return float64(runtime.NumCPU()), nil
}

// Limited reports whether the group's CPU is limited below this host's:
// a quota, or a cpuset with fewer CPUs than runtime.NumCPU(). The
// capacity override does not count.
func (c *Cgroup) Limited() (bool, error) {
	_, hasQuota, err := c.quota()
	if err != nil || hasQuota {
		return hasQuota, err
	}
	set, hasSet, err := c.cpuset()
	return hasSet && set < runtime.NumCPU(), err
}

// quota returns the group's quota in CPUs. It reports ok = false when
// there is no quota or no quota file.
func (c *Cgroup) quota() (cpus float64, ok bool, err error) {
	if c.paths.Version == 1 {
		qPath := filepath.Join(c.paths.Dir, "cpu.cfs_quota_us")
		if _, err := os.Stat(qPath); errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		q, err := readInt(qPath)
		if err != nil {
			return 0, false, err
		}
		if q < 0 {
			return 0, false, nil // -1: no quota
		}
		pPath := filepath.Join(c.paths.Dir, "cpu.cfs_period_us")
		p, err := readInt(pPath)
		if err != nil {
			return 0, false, err
		}
		if q == 0 || p <= 0 {
			return 0, false, fmt.Errorf("monitor: cgroup: %s / %s: %d/%d is not a quota over a period in microseconds", qPath, pPath, q, p)
		}
		return float64(q) / float64(p), true, nil
	}
	path := filepath.Join(c.paths.Dir, "cpu.max")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("monitor: cgroup: %w", err)
	}
	content := strings.TrimSpace(string(data))
	f := strings.Fields(content)
	if len(f) >= 1 && len(f) <= 2 && f[0] == "max" {
		return 0, false, nil
	}
	if len(f) != 2 {
		return 0, false, fmt.Errorf("monitor: cgroup: %s: %q is not \"quota period\" or \"max period\"", path, content)
	}
	q, errQ := strconv.ParseInt(f[0], 10, 64)
	p, errP := strconv.ParseInt(f[1], 10, 64)
	if errQ != nil || errP != nil || q <= 0 || p <= 0 {
		return 0, false, fmt.Errorf("monitor: cgroup: %s: %q is not \"quota period\" with positive microsecond counts", path, content)
	}
	return float64(q) / float64(p), true, nil
}

// cpuset counts the CPUs of the group's cpuset. It reports ok = false
// when the file does not exist or is empty (no cpuset controller).
func (c *Cgroup) cpuset() (n int, ok bool, err error) {
	var paths []string
	switch {
	case c.paths.Version == 2:
		paths = []string{filepath.Join(c.paths.Dir, "cpuset.cpus.effective")}
	case c.paths.CPUSet != "":
		paths = []string{filepath.Join(c.paths.CPUSet, "cpuset.effective_cpus"), filepath.Join(c.paths.CPUSet, "cpuset.cpus")}
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("monitor: cgroup: %w", err)
		}
		if strings.TrimSpace(string(data)) == "" {
			return 0, false, nil
		}
		cpus, err := ParseCPUList(string(data))
		if err != nil {
			return 0, false, fmt.Errorf("monitor: cgroup: %s: %w", path, err)
		}
		return len(cpus), true, nil
	}
	return 0, false, nil
}

// Utilization returns the group's CPU usage since the previous reading as
// a fraction of its capacity, clamped to [0, 1]. It returns an error
// wrapping ErrNoTimeElapsed if now is not after the previous reading (the
// previous reading is kept), and an error naming the file if a file cannot
// be read or usage_usec went backwards (the group was re-created; the new
// reading becomes the baseline).
func (c *Cgroup) Utilization(now time.Time) (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	usage, err := c.usage()
	if err != nil {
		return 0, err
	}
	capacity, err := c.Capacity()
	if err != nil {
		return 0, err
	}
	prev := c.meter.used
	u, back, err := c.meter.next(time.Duration(usage), now, capacity)
	switch {
	case err != nil:
		return 0, fmt.Errorf("monitor: cgroup %s: %w", c.paths.Dir, err)
	case back:
		return 0, fmt.Errorf("monitor: cgroup: %s: the CPU usage went backwards (%d ns → %d ns); taking a new baseline", c.usagePath(), int64(prev), usage)
	}
	return u, nil
}

// usagePath is the file the usage is read from.
func (c *Cgroup) usagePath() string {
	if c.paths.Version == 1 {
		return filepath.Join(c.paths.CPUAcct, "cpuacct.usage")
	}
	return filepath.Join(c.paths.Dir, "cpu.stat")
}

// Describe returns "cgroup <dir>" for a v2 group, "cgroup v1 <dir>" for a
// v1 group, followed by ", N CPUs" when the capacity is overridden.
func (c *Cgroup) Describe() string {
	d := "cgroup " + c.paths.Dir
	if c.paths.Version == 1 {
		d = "cgroup " + c.paths.String()
	}
	if c.cpus > 0 {
		d += fmt.Sprintf(", %g CPUs", c.cpus)
	}
	return d
}
