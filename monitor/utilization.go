// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
	"fmt"
	"time"
)

// UtilizationSource measures the busy fraction of a resource.
//
// Utilization returns the busy fraction in [0, 1] over the interval since
// the previous call; the constructor takes the first reading, so the first
// call already covers [construction, now]. A source that cannot be read
// returns an error naming what it tried to read (a path, a process, a
// backend) and never a silent 0; a runner then reports NaN for the period.
// After an error the next successful call covers the interval since the
// last successful reading (or since the re-baselining the error describes).
//
// Describe returns a short human-readable description for logs and the
// admin API, such as "cpu /proc/stat (cpus 0,2-3)".
//
// Implementations in this package are safe for concurrent use.
type UtilizationSource interface {
	Utilization(now time.Time) (float64, error)
	Describe() string
}

// ErrNoTimeElapsed is returned (wrapped) by a utilization source asked for
// a reading over an empty interval: now is not after the previous reading,
// or the kernel counters have not advanced yet. The previous reading is
// kept, so the next call covers the longer interval. A runner treats it
// like any other unavailable reading.
var ErrNoTimeElapsed = errors.New("no time elapsed since the previous reading")

// Compile-time checks that every source implements UtilizationSource.
var (
	_ UtilizationSource = (*ProcStat)(nil)
	_ UtilizationSource = (*Cgroup)(nil)
	_ UtilizationSource = (*Process)(nil)
	_ UtilizationSource = (*Busy)(nil)
	_ UtilizationSource = (*Reported)(nil)
)

// clamp01 limits a measured fraction to [0, 1]. Counters sampled at
// slightly different instants (or iowait, which the kernel may decrease)
// can push a ratio a little outside the range.
func clamp01(x float64) float64 {
	switch {
	case x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

// cpuMeter holds the previous reading of a cumulative CPU-time counter and
// turns the next one into the utilization over the wall-clock time between
// the two:
//
//	utilization = Δused / (Δwall · capacity)
//
// clamped to [0, 1], where used is CPU time and capacity is in CPUs. Cgroup
// and Process measure with one. (ProcStat does not: there the kernel's
// counters measure the interval themselves.) The owner sets the first
// reading when it is created, so its first Utilization call covers
// [creation, now].
//
// A cpuMeter is not safe for concurrent use: its owner holds one lock
// around reading the counter and calling next, so that the readings reach
// next in the order they were taken.
type cpuMeter struct {
	used time.Duration // the counter at at
	at   time.Time
}

// next returns the utilization from the previous reading to used at now on
// capacity CPUs, and makes (used, now) the previous reading. If now is not
// after the previous reading, it returns an error wrapping ErrNoTimeElapsed
// that gives both instants, and keeps the previous reading. If used is below
// the previous reading (the counter restarted), it returns 0 and back =
// true, and (used, now) becomes the new baseline.
func (m *cpuMeter) next(used time.Duration, now time.Time, capacity float64) (u float64, back bool, err error) {
	wall := now.Sub(m.at)
	if wall <= 0 {
		return 0, false, fmt.Errorf("%w (now %v, previous %v)", ErrNoTimeElapsed, now, m.at)
	}
	d := used - m.used
	m.used, m.at = used, now
	if d < 0 {
		return 0, true, nil
	}
	return clamp01(float64(d) / (float64(wall) * capacity)), false, nil
}
