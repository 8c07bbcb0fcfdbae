// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// paddedCounter is an atomic counter alone on its cache line, so that
// goroutines bumping different counters do not slow each other down.
type paddedCounter struct {
	atomic.Int64
	_ [56]byte
}

// Recorder counts what happens to requests during one control period and
// keeps their response times in a Window; Collect turns a period into a
// sluice.Measurements and starts the next one.
//
// The request path calls Arrive when a request is offered to the gate, then
// Admit or Reject, and Complete when an admitted request finishes. These
// methods are safe for concurrent use, lock-free except for the window's
// short mutex, and do not allocate.
//
// Counters are taken and reset with atomic swaps (the window's sample
// count under its mutex), so an event recorded while Collect runs is
// counted in exactly one period; none is lost. The counters are swapped one
// after the other, so such an event may appear in a period whose other
// counters do not include its sibling events yet (an Arrive in period k
// whose Admit is in period k+1); over a run the sums are exact.
//
// The zero value is not usable; create recorders with NewRecorder.
type Recorder struct {
	arrivals  paddedCounter
	admitted  paddedCounter
	rejected  paddedCounter
	unsampled paddedCounter // completions that are not samples
	failed    paddedCounter // completions that failed (also counted above)

	// window holds the sampled completions; its Recorded count is the
	// number of sampled completions, so a sampled Complete costs one
	// short critical section and no extra atomic counter.
	window *Window

	mu   sync.Mutex // serialises Collect and guards last
	last time.Time
}

// NewRecorder returns a recorder whose first period starts at now and whose
// response-time window holds the last windowSize samples of a period. Make
// windowSize at least the number of samples a period is expected to
// produce (SEDA's nreq, or rate × period) if MeanRT and P90RT should cover
// the whole period rather than its end. It returns an error if windowSize
// is not in [1, MaxWindowSize].
func NewRecorder(windowSize int, now time.Time) (*Recorder, error) {
	w, err := NewWindow(windowSize)
	if err != nil {
		return nil, err
	}
	return &Recorder{window: w, last: now}, nil
}

// Arrive counts one request offered to the gate (before the gate decides).
func (r *Recorder) Arrive() { r.arrivals.Add(1) }

// Admit counts one request the gate let through.
func (r *Recorder) Admit() { r.admitted.Add(1) }

// Reject counts one request the gate refused. A rejected request never
// completes and is never a response-time sample.
func (r *Recorder) Reject() { r.rejected.Add(1) }

// Complete counts one admitted request that finished (any status) after
// response time rt. If sample is true, rt also enters the response-time
// window. Pass sample = false for requests whose duration says nothing
// about the service's speed: timeouts, errors the caller excludes, and
// long-lived streams or WebSockets (see FIELD-NOTES, "Timeouts and
// rejections counted as fast samples").
func (r *Recorder) Complete(rt time.Duration, sample bool) {
	if sample {
		r.window.Record(rt)
	} else {
		r.unsampled.Add(1)
	}
}

// Fail counts one completion as failed (an error, a timeout, a client
// that gave up), in addition to its Complete call. Safe for concurrent
// use; it does not allocate.
func (r *Recorder) Fail() { r.failed.Add(1) }

// Arrivals returns the number of Arrive calls since the previous Collect
// (or construction), without ending the period.
func (r *Recorder) Arrivals() int64 { return r.arrivals.Load() }

// Admitted returns the number of Admit calls since the previous Collect
// (or construction), without ending the period.
func (r *Recorder) Admitted() int64 { return r.admitted.Load() }

// Completed returns the number of completions since the previous Collect
// (or construction). A runner compares it with SEDA's nreq to decide when
// to run the controller early.
func (r *Recorder) Completed() int64 { return r.unsampled.Load() + r.window.Recorded() }

// Samples returns the number of response-time samples held since the
// previous Collect, capped at the window size.
func (r *Recorder) Samples() int { return r.window.Len() }

// Collect ends the current period at now and returns its measurements:
//
//   - Elapsed = now − the previous Collect's now (or the construction time);
//     zero if now is not after it;
//   - Arrivals, Admitted, Rejected, Completed and Failed: the counts of the
//     period;
//   - Samples: the number of response times in the window (at most the
//     window size), and MeanRT and P90RT (exact nearest rank): their mean
//     and 90th percentile in seconds, NaN when Samples is 0 so that a
//     controller holds instead of mistaking "no data" for "fast";
//   - Utilization = NaN and Queue = 0: a runner fills them from its
//     sensors.
//
// The next period starts at now. Collect is safe for concurrent use with
// the hot-path methods and with itself (calls are serialised).
func (r *Recorder) Collect(now time.Time) sluice.Measurements {
	m, _ := r.CollectStats(now)
	return m
}

// CollectStats is Collect that also returns the window statistics of the
// period (p50, p99, min, max) for metrics and the admin API.
func (r *Recorder) CollectStats(now time.Time) (sluice.Measurements, WindowStats) {
	r.mu.Lock()
	defer r.mu.Unlock()

	elapsed := max(now.Sub(r.last), 0)
	r.last = now

	m := sluice.Measurements{
		Elapsed:     elapsed,
		Arrivals:    float64(r.arrivals.Swap(0)),
		Admitted:    float64(r.admitted.Swap(0)),
		Rejected:    float64(r.rejected.Swap(0)),
		Utilization: math.NaN(),
	}
	// The window takes its count and resets in one critical section, and
	// the swap takes the other completions: none is lost or counted twice.
	st := r.window.Stats(true)
	m.Completed = float64(st.Recorded + r.unsampled.Swap(0))
	m.Failed = float64(r.failed.Swap(0))
	m.Samples = float64(st.Count)
	if st.Count > 0 {
		m.MeanRT = st.Mean.Seconds()
		m.P90RT = st.P90.Seconds()
	} else {
		m.MeanRT = math.NaN()
		m.P90RT = math.NaN()
	}
	return m, st
}
