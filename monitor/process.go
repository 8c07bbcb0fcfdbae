// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// Process measures the CPU utilization of one process (a backend server on
// the same host) from the user and system time in <procRoot>/<pid>/stat,
// read with github.com/prometheus/procfs:
//
//	utilization = Δ(utime + stime) / (Δwall · cpus)
//
// clamped to [0, 1]. cpus is the number of CPUs the process can keep busy
// at once, which the caller states: its CPU affinity, cgroup quota or
// GOMAXPROCS-style worker limit, whichever is smallest. It must be at least
// the number of CPUs the process may actually use, or the measured time
// exceeds the capacity and the reading saturates at 1. The kernel counts
// in clock ticks (10 ms), so short intervals give coarse readings.
//
// Process notices when the pid now belongs to another process (its start
// time changed) and reports an error instead of a reading.
//
// Process is safe for concurrent use. The zero value is not usable; create
// one with NewProcess or NewPidfile.
type Process struct {
	proc    procfs.Proc
	pid     int
	path    string // <procRoot>/<pid>/stat, for messages
	pidfile string // "" unless created by NewPidfile
	cpus    float64
	started uint64 // start time in clock ticks after boot
	mu      sync.Mutex
	meter   cpuMeter // utime+stime at the previous reading
}

// NewProcess returns a source for process pid under procRoot (usually
// "/proc") on cpus CPUs and takes its first reading at now. It returns an
// error if pid is not positive, cpus is not a positive finite number, or
// the process's stat file cannot be read (the error names the path).
func NewProcess(procRoot string, pid int, cpus float64, now time.Time) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("monitor: process pid %d is not positive", pid)
	}
	if !(cpus > 0) || math.IsInf(cpus, 0) {
		return nil, fmt.Errorf("monitor: process %d: cpus %v is not a positive number", pid, cpus)
	}
	path := filepath.Join(procRoot, strconv.Itoa(pid), "stat")
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("monitor: process %d: proc root %s: %w", pid, procRoot, err)
	}
	proc, err := fs.Proc(pid)
	if err != nil {
		return nil, fmt.Errorf("monitor: process %d: %w", pid, err)
	}
	p := &Process{proc: proc, pid: pid, path: path, cpus: cpus}
	st, err := p.read()
	if err != nil {
		return nil, err
	}
	p.started, p.meter = st.Starttime, cpuMeter{used: cpuTime(st), at: now}
	return p, nil
}

// NewPidfile is NewProcess for the pid written in the file at path (a
// decimal number, surrounding white space ignored), as daemons write to
// /run/<name>.pid. The file is read once; if the daemon restarts under a
// new pid, Utilization reports an error and the caller creates a new
// source. It returns an error naming path if the file is missing or does
// not hold a positive pid.
func NewPidfile(procRoot, path string, cpus float64, now time.Time) (*Process, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("monitor: pidfile: %w", err)
	}
	s := strings.TrimSpace(string(data))
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return nil, fmt.Errorf("monitor: pidfile %s: %q is not a positive process id", path, s)
	}
	p, err := NewProcess(procRoot, pid, cpus, now)
	if err != nil {
		return nil, fmt.Errorf("monitor: pidfile %s: %w", path, err)
	}
	p.pidfile = path
	return p, nil
}

func (p *Process) read() (procfs.ProcStat, error) {
	st, err := p.proc.Stat()
	if err != nil {
		return procfs.ProcStat{}, fmt.Errorf("monitor: process %d: read %s: %w", p.pid, p.path, err)
	}
	return st, nil
}

// Utilization returns the process's CPU time since the previous reading as
// a fraction of cpus · wall time, clamped to [0, 1]. It returns an error
// wrapping ErrNoTimeElapsed if now is not after the previous reading (the
// previous reading is kept), and an error naming the path if the stat file
// cannot be read (the process exited) or the pid now belongs to a
// different process.
func (p *Process) Utilization(now time.Time) (float64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.read()
	if err != nil {
		return 0, err
	}
	if st.Starttime != p.started {
		return 0, fmt.Errorf("monitor: process %d: %s belongs to a different process now (start time %d, expected %d)", p.pid, p.path, st.Starttime, p.started)
	}
	// The kernel never lets a process's utime+stime go backwards, so a
	// counter that went back is not reported: it reads 0 and becomes the
	// new baseline.
	u, _, err := p.meter.next(cpuTime(st), now, p.cpus)
	if err != nil {
		return 0, fmt.Errorf("monitor: process %d: %w", p.pid, err)
	}
	return u, nil
}

// cpuTime returns the process's utime+stime, which procfs gives in
// seconds (whole clock ticks), to the nanosecond.
func cpuTime(st procfs.ProcStat) time.Duration {
	return time.Duration(math.Round(st.CPUTime() * float64(time.Second)))
}

// Describe returns "process <pid> (<path>)", with the pidfile if any.
func (p *Process) Describe() string {
	d := fmt.Sprintf("process %d (%s, %g cpus)", p.pid, p.path, p.cpus)
	if p.pidfile != "" {
		d += " from pidfile " + p.pidfile
	}
	return d
}
