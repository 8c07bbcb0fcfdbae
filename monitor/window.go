// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// MaxWindowSize is the largest window NewWindow accepts. A window holds two
// time.Duration values per slot (the ring and the scratch buffer used by
// Stats), so the maximum costs 256 MiB.
const MaxWindowSize = 1 << 24

// WindowStats summarises the samples a Window held at one moment. All
// durations are response times (time.Duration, nanosecond resolution).
// When Count is 0 every field is zero: the caller decides what an empty
// window means (sluice's Recorder reports NaN to its controllers).
type WindowStats struct {
	// Count is the number of samples the statistics are computed from:
	// the samples recorded since the last reset, at most the window size.
	Count int
	// Recorded is the number of samples recorded since the last reset,
	// including those the ring has already overwritten (Recorded ≥ Count).
	Recorded int64
	// Mean is the arithmetic mean of the samples, rounded to the nearest
	// nanosecond.
	Mean time.Duration
	// P50, P90 and P99 are exact nearest-rank percentiles: the k-th
	// smallest sample with k = ceil(p·Count). For 100 samples P90 is the
	// 90th smallest; for 10 samples it is the 9th smallest.
	P50, P90, P99 time.Duration
	// Min and Max are the smallest and the largest sample.
	Min, Max time.Duration
}

// Window keeps the last n response times recorded since the last reset,
// the way a SEDA stage keeps the samples its controller runs on. It is a
// ring buffer: once n samples are held, each new one overwrites the oldest.
//
// Record is safe for concurrent use, takes a short mutex (no allocation)
// and is meant for the request path. Stats sorts a copy of the samples in a
// scratch buffer allocated once at construction, so it does not allocate
// either; concurrent Stats calls are serialised and do not block Record
// while they sort.
//
// The zero value is not usable; create windows with NewWindow.
type Window struct {
	mu       sync.Mutex // guards buf, pos and count
	buf      []time.Duration
	pos      int   // index the next sample is written to
	count    int   // samples held since the last reset, at most len(buf)
	recorded int64 // samples recorded since the last reset

	statsMu sync.Mutex // guards scratch; serialises Stats
	scratch []time.Duration
}

// NewWindow returns an empty window that holds at most n samples. It
// returns an error if n is not in [1, MaxWindowSize].
func NewWindow(n int) (*Window, error) {
	if n < 1 || n > MaxWindowSize {
		return nil, fmt.Errorf("monitor: window size %d out of range [1, %d]", n, MaxWindowSize)
	}
	return &Window{
		buf:     make([]time.Duration, n),
		scratch: make([]time.Duration, n),
	}, nil
}

// Size returns n, the number of samples the window can hold.
func (w *Window) Size() int { return len(w.buf) }

// Record adds one response time. A negative rt (a clock step between the
// two time readings of the caller) is recorded as 0. Record is safe for
// concurrent use and does not allocate.
func (w *Window) Record(rt time.Duration) {
	if rt < 0 {
		rt = 0
	}
	w.mu.Lock()
	w.buf[w.pos] = rt
	w.pos++
	if w.pos == len(w.buf) {
		w.pos = 0
	}
	if w.count < len(w.buf) {
		w.count++
	}
	w.recorded++
	w.mu.Unlock()
}

// Len returns the number of samples recorded since the last reset, capped
// at the window size. It is safe for concurrent use.
func (w *Window) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// Recorded returns the number of samples recorded since the last reset,
// including those already overwritten. It is safe for concurrent use.
func (w *Window) Recorded() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recorded
}

// Stats returns the statistics of the samples held now. If reset is true
// the window is emptied in the same critical section, so every sample
// recorded concurrently lands either in these statistics or in the next
// ones. Stats is safe for concurrent use and does not allocate.
func (w *Window) Stats(reset bool) WindowStats {
	w.statsMu.Lock()
	defer w.statsMu.Unlock()

	w.mu.Lock()
	c := w.count
	// The held samples are the c slots before pos (wrapping around).
	start := w.pos - c
	if start >= 0 {
		copy(w.scratch, w.buf[start:w.pos])
	} else {
		k := copy(w.scratch, w.buf[len(w.buf)+start:])
		copy(w.scratch[k:], w.buf[:w.pos])
	}
	recorded := w.recorded
	if reset {
		w.count, w.recorded = 0, 0
	}
	w.mu.Unlock()

	st := summarize(w.scratch[:c])
	st.Recorded = recorded
	return st
}

// summarize sorts s in place and returns its statistics.
func summarize(s []time.Duration) WindowStats {
	c := len(s)
	if c == 0 {
		return WindowStats{}
	}
	slices.Sort(s)
	// A float64 sum of at most 2^24 durations is exact enough for a mean
	// and cannot overflow the way an int64 sum of nanoseconds could.
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	return WindowStats{
		Count: c,
		Mean:  time.Duration(sum/float64(c) + 0.5),
		P50:   s[Rank(0.5, c)-1],
		P90:   s[Rank(0.9, c)-1],
		P99:   s[Rank(0.99, c)-1],
		Min:   s[0],
		Max:   s[c-1],
	}
}
