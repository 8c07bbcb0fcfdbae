package monitor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cgroup measures the CPU utilization of a cgroup v2 group (a container,
// a systemd service) against the CPU capacity the group may use:
//
//	utilization = Δusage / (Δwall · capacity)
//
// clamped to [0, 1], where usage is usage_usec from <dir>/cpu.stat and
// capacity, in CPUs, comes from the group's limits, re-read at every call
// so that a changed limit takes effect at once:
//
//   - <dir>/cpu.max "quota period" gives quota/period CPUs; if
//     <dir>/cpuset.cpus.effective lists fewer CPUs than that, the smaller
//     number is used (a group cannot run on more CPUs than it has);
//   - cpu.max "max …", or no cpu.max at all (the root group has none),
//     means no quota: the number of CPUs in cpuset.cpus.effective if the
//     file exists and is not empty, else runtime.NumCPU().
//
// Readings above 1 (the usage counter and the caller's clock read at
// slightly different instants, or cpu.max.burst letting the group run past
// its quota for a while) are clamped to 1.
//
// The prometheus/procfs module has no reader for cgroup v2 cpu.stat, so
// this small key/value file is parsed here.
//
// Cgroup is safe for concurrent use. The zero value is not usable; create
// one with NewCgroup.
type Cgroup struct {
	dir string

	mu        sync.Mutex
	prevUsage int64 // usage_usec at prevAt
	prevAt    time.Time
}

// NewCgroup returns a source for the cgroup v2 directory dir (for example
// /sys/fs/cgroup/system.slice/app.service) and takes its first reading at
// now. It returns an error naming the file if cpu.stat, cpu.max or
// cpuset.cpus.effective cannot be read or parsed.
func NewCgroup(dir string, now time.Time) (*Cgroup, error) {
	c := &Cgroup{dir: dir}
	usage, err := c.usage()
	if err != nil {
		return nil, err
	}
	if _, err := c.Capacity(); err != nil {
		return nil, err
	}
	c.prevUsage, c.prevAt = usage, now
	return c, nil
}

// usage returns usage_usec from cpu.stat, in microseconds.
func (c *Cgroup) usage() (int64, error) {
	path := filepath.Join(c.dir, "cpu.stat")
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
		if err != nil || v < 0 {
			return 0, fmt.Errorf("monitor: cgroup: %s:%d: usage_usec %q is not a count of microseconds", path, line, val)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("monitor: cgroup: read %s: %w", path, err)
	}
	return 0, fmt.Errorf("monitor: cgroup: %s has no usage_usec line (is %s a cgroup v2 directory with the cpu controller?)", path, c.dir)
}

// Capacity returns the number of CPUs the group may use now, as described
// on Cgroup. It returns an error naming the file if a limit file exists
// but cannot be read or parsed.
func (c *Cgroup) Capacity() (float64, error) {
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

// quota parses cpu.max: "max [period]" or "quota period" (microseconds).
// It reports ok = false when there is no quota or no cpu.max file.
func (c *Cgroup) quota() (cpus float64, ok bool, err error) {
	path := filepath.Join(c.dir, "cpu.max")
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

// cpuset counts the CPUs in cpuset.cpus.effective. It reports ok = false
// when the file does not exist or is empty (no cpuset controller).
func (c *Cgroup) cpuset() (n int, ok bool, err error) {
	path := filepath.Join(c.dir, "cpuset.cpus.effective")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
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
	wall := now.Sub(c.prevAt)
	if wall <= 0 {
		return 0, fmt.Errorf("monitor: cgroup %s: %w (now %v, previous %v)", c.dir, ErrNoTimeElapsed, now, c.prevAt)
	}
	dUsage := usage - c.prevUsage
	if dUsage < 0 {
		err := fmt.Errorf("monitor: cgroup: %s: usage_usec went backwards (%d → %d); taking a new baseline", filepath.Join(c.dir, "cpu.stat"), c.prevUsage, usage)
		c.prevUsage, c.prevAt = usage, now
		return 0, err
	}
	c.prevUsage, c.prevAt = usage, now
	wallUsec := float64(wall) / float64(time.Microsecond)
	return clamp01(float64(dUsage) / (wallUsec * capacity)), nil
}

// Describe returns "cgroup <dir>".
func (c *Cgroup) Describe() string { return "cgroup " + c.dir }
