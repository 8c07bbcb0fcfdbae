// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
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
