// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// ProcStat measures host CPU utilization from the kernel's per-CPU time
// counters in <procRoot>/stat, read with github.com/prometheus/procfs:
//
//	busy = 1 − Δ(idle + iowait) / Δtotal
//
// where total = user + nice + system + idle + iowait + irq + softirq +
// steal (guest and guest_nice are already inside user and nice and are not
// counted twice; steal, time the hypervisor gave to someone else, counts
// as busy). The deltas are summed over all CPUs (the "cpu" line) or over
// the selected CPUs only. The kernel counts in clock ticks (10 ms), so
// readings closer together than a tick may return ErrNoTimeElapsed.
//
// ProcStat is safe for concurrent use. The zero value is not usable;
// create one with NewProcStat.
type ProcStat struct {
	fs   procfs.FS
	path string // <procRoot>/stat, for messages
	cpus []int  // nil: all CPUs

	mu   sync.Mutex
	prev cpuTimes
}

// cpuTimes is one reading: total and idle (idle + iowait) CPU seconds.
type cpuTimes struct{ total, idle float64 }

// NewProcStat returns a source reading <procRoot>/stat (procRoot is usually
// "/proc") and takes its first reading. cpus selects the CPUs to watch, as
// returned by ParseCPUList (order and duplicates do not matter); nil
// watches all of them, an empty non-nil slice is an error. It returns an error
// naming the path if the file cannot be read or parsed, or naming the CPU
// if a selected CPU is not listed in it (offline or absent).
func NewProcStat(procRoot string, cpus []int) (*ProcStat, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("monitor: proc root %s: %w", procRoot, err)
	}
	if cpus != nil && len(cpus) == 0 {
		return nil, fmt.Errorf("monitor: %s: empty CPU selection (pass nil to watch all CPUs)", filepath.Join(procRoot, "stat"))
	}
	for _, c := range cpus {
		if c < 0 {
			return nil, fmt.Errorf("monitor: CPU %d: CPU numbers are not negative", c)
		}
	}
	p := &ProcStat{fs: fs, path: filepath.Join(procRoot, "stat")}
	if cpus != nil {
		p.cpus = slices.Compact(slices.Sorted(slices.Values(cpus)))
	}
	if p.prev, err = p.read(); err != nil {
		return nil, err
	}
	return p, nil
}

// read takes one reading of the watched CPUs.
func (p *ProcStat) read() (cpuTimes, error) {
	st, err := p.fs.Stat()
	if err != nil {
		return cpuTimes{}, fmt.Errorf("monitor: read %s: %w", p.path, err)
	}
	if p.cpus == nil {
		return timesOf(st.CPUTotal), nil
	}
	var t cpuTimes
	for _, c := range p.cpus {
		cs, ok := st.CPU[int64(c)]
		if !ok {
			return cpuTimes{}, fmt.Errorf("monitor: %s has no line for CPU %d (offline or absent)", p.path, c)
		}
		ct := timesOf(cs)
		t.total += ct.total
		t.idle += ct.idle
	}
	return t, nil
}

func timesOf(c procfs.CPUStat) cpuTimes {
	idle := c.Idle + c.Iowait
	return cpuTimes{
		total: c.User + c.Nice + c.System + idle + c.IRQ + c.SoftIRQ + c.Steal,
		idle:  idle,
	}
}

// Utilization returns the busy fraction of the watched CPUs since the
// previous reading, clamped to [0, 1]. now is not used: the interval is the
// one the kernel counters measured. It returns an error wrapping
// ErrNoTimeElapsed if the counters have not advanced (the previous
// reading is kept), and an error naming the path if the file cannot be
// read or its counters went backwards (the new reading becomes the
// baseline).
func (p *ProcStat) Utilization(now time.Time) (float64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, err := p.read()
	if err != nil {
		return 0, err
	}
	dTotal := cur.total - p.prev.total
	dIdle := cur.idle - p.prev.idle
	switch {
	case dTotal < 0:
		err := fmt.Errorf("monitor: %s: CPU time counters went backwards (total %.2fs → %.2fs); taking a new baseline", p.path, p.prev.total, cur.total)
		p.prev = cur
		return 0, err
	case dTotal == 0:
		return 0, fmt.Errorf("monitor: %s: %w", p.path, ErrNoTimeElapsed)
	}
	p.prev = cur
	return clamp01(1 - dIdle/dTotal), nil
}

// Describe returns "cpu <path>" followed by the selected CPUs, if any.
func (p *ProcStat) Describe() string {
	if p.cpus == nil {
		return "cpu " + p.path + " (all cpus)"
	}
	return "cpu " + p.path + " (cpus " + formatCPUList(p.cpus) + ")"
}
