// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/monitor"
)

// flightMeter measures the requests in service: their number now, its
// time-weighted mean and its peak over a collection interval. It is
// lock-free: begin and end are two atomic additions each (plus a
// compare-and-swap for the peak), so the request path shares no lock.
//
// The time integral of the number in service, I(t) = ∫ n, is kept as
//
//	I(t) = Σ_{left} (end − start) + n(t)·t − Σ_{in service} start
//
// with times in microseconds since base; the mean over an interval is
// ΔI/Δt. The three terms are read one after the other, so a request that
// begins or ends during a read can shift one interval's integral by its
// own service time, which the next interval gives back: over a run the
// integral is exact.
type flightMeter struct {
	base     time.Time
	n        atomic.Int64
	sumStart atomic.Int64 // µs since base, of requests in service
	doneAge  atomic.Int64 // µs, of requests that left service
	peak     atomic.Int64

	// collection state, owned by the stage's Step (under Stage.mu).
	lastI, lastT int64
}

func (f *flightMeter) us(t time.Time) int64 { return t.Sub(f.base).Microseconds() }

// begin counts a request entering service at now.
func (f *flightMeter) begin(now time.Time) {
	n := f.n.Add(1)
	f.sumStart.Add(f.us(now))
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// end counts a request that entered service at start and left at now.
func (f *flightMeter) end(start, now time.Time) {
	s := f.us(start)
	f.n.Add(-1)
	f.sumStart.Add(-s)
	f.doneAge.Add(f.us(now) - s)
}

// collect returns the mean and peak number in service since the previous
// collect (or since base) and starts a new interval at now.
func (f *flightMeter) collect(now time.Time) (mean, peak float64) {
	t := f.us(now)
	done := f.doneAge.Load()
	n := f.n.Load()
	i := done + n*t - f.sumStart.Load()
	if dt := t - f.lastT; dt > 0 {
		mean = math.Max(0, float64(i-f.lastI)/float64(dt))
	} else {
		mean = float64(n)
	}
	f.lastI, f.lastT = i, t
	peak = float64(f.peak.Swap(n))
	return mean, max(peak, float64(n))
}

// waitMeter keeps the time admitted requests waited for their slot over a
// collection interval: sum, count and minimum, lock-free.
type waitMeter struct {
	sum, n atomic.Int64 // ns
	min    atomic.Int64 // ns; math.MaxInt64 when empty
}

func (w *waitMeter) reset() { w.min.Store(math.MaxInt64) }

func (w *waitMeter) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	w.sum.Add(int64(d))
	w.n.Add(1)
	for {
		m := w.min.Load()
		if int64(d) >= m || w.min.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// collect returns the mean and minimum wait in seconds (NaN, NaN when no
// request was admitted) and starts a new interval.
func (w *waitMeter) collect() (mean, min float64) {
	n := w.n.Swap(0)
	sum := w.sum.Swap(0)
	m := w.min.Swap(math.MaxInt64)
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	return float64(sum) / float64(n) / 1e9, float64(m) / 1e9
}

// serviceStats summarises a service-time window for Measurements, in
// seconds, NaN when empty.
func serviceStats(st monitor.WindowStats) (mean, p50, p90, p99, lo float64) {
	if st.Count == 0 {
		n := math.NaN()
		return n, n, n, n, n
	}
	return st.Mean.Seconds(), st.P50.Seconds(), st.P90.Seconds(), st.P99.Seconds(), st.Min.Seconds()
}
