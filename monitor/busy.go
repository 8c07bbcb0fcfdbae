// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Busy measures the busy-time fraction of capacity in-process servers
// (worker goroutines, concurrency slots): the request path calls Begin when
// a server starts on a request and End when it finishes, and
//
//	utilization = ∫ busy(t) dt / (capacity · interval)
//
// over the interval since the previous Utilization call (or construction),
// where busy(t) is the number of servers busy at time t. More than
// capacity busy servers saturate the reading at 1.
//
// Callers read the clock before taking Busy's lock, so concurrent calls may
// arrive with timestamps slightly out of order; a timestamp earlier than
// the latest one seen counts as the latest one (the integral never runs
// backwards).
//
// Busy is safe for concurrent use. The zero value is not usable; create one
// with NewBusy.
type Busy struct {
	capacity int

	mu       sync.Mutex
	busy     int       // servers busy now
	last     time.Time // latest timestamp seen; integral runs up to it
	start    time.Time // start of the current interval
	integral float64   // Σ busy · Δt since start, in server-nanoseconds
}

// NewBusy returns a source for capacity servers, all idle, whose first
// interval starts at now. It returns an error if capacity is not positive.
func NewBusy(capacity int, now time.Time) (*Busy, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("monitor: busy capacity %d is not positive", capacity)
	}
	return &Busy{capacity: capacity, last: now, start: now}, nil
}

// advance extends the integral to now. The caller holds b.mu.
func (b *Busy) advance(now time.Time) {
	if now.After(b.last) {
		b.integral += float64(b.busy) * float64(now.Sub(b.last))
		b.last = now
	}
}

// Begin marks one server busy from now on.
func (b *Busy) Begin(now time.Time) {
	b.mu.Lock()
	b.advance(now)
	b.busy++
	b.mu.Unlock()
}

// End marks one server idle from now on. An End without a matching Begin
// is ignored (the busy count never goes negative).
func (b *Busy) End(now time.Time) {
	b.mu.Lock()
	b.advance(now)
	if b.busy > 0 {
		b.busy--
	}
	b.mu.Unlock()
}

// InFlight returns the number of servers busy now.
func (b *Busy) InFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy
}

// Utilization returns the busy fraction since the previous call (or
// construction), clamped to [0, 1], and starts a new interval. It returns
// an error wrapping ErrNoTimeElapsed if the interval is empty.
func (b *Busy) Utilization(now time.Time) (float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	interval := b.last.Sub(b.start)
	if interval <= 0 {
		return 0, fmt.Errorf("monitor: busy time: %w", ErrNoTimeElapsed)
	}
	u := b.integral / (float64(b.capacity) * float64(interval))
	b.integral, b.start = 0, b.last
	return clamp01(u), nil
}

// Describe returns "busy time of <capacity> servers".
func (b *Busy) Describe() string { return fmt.Sprintf("busy time of %d servers", b.capacity) }

// Reported is a utilization the backend reports itself, for example in a
// response header, as a fraction in [0, 1]. Utilization returns the mean of
// the values reported since the previous call, or the last value if none
// arrived in between.
//
// Reported is safe for concurrent use. The zero value is not usable;
// create one with NewReported.
type Reported struct {
	name string

	mu   sync.Mutex
	sum  float64 // of the reports since the previous Utilization
	n    int
	last float64
	seen bool
}

// NewReported returns a source for values reported by the backend called
// name (used in messages and Describe).
func NewReported(name string) *Reported { return &Reported{name: name} }

// Report records one value. It returns an error, and records nothing, if v
// is NaN or outside [0, 1].
func (r *Reported) Report(v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return fmt.Errorf("monitor: utilization %v reported by %s is outside [0, 1]", v, r.name)
	}
	r.mu.Lock()
	r.sum += v
	r.n++
	r.last, r.seen = v, true
	r.mu.Unlock()
	return nil
}

// Utilization returns the mean of the values reported since the previous
// call, or the last value if none arrived in between; now is not used. It
// returns the error "no value reported yet by <name>" until the first
// report.
func (r *Reported) Utilization(now time.Time) (float64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen {
		return 0, fmt.Errorf("monitor: no value reported yet by %s", r.name)
	}
	if r.n == 0 {
		return r.last, nil
	}
	u := r.sum / float64(r.n)
	r.sum, r.n = 0, 0
	return clamp01(u), nil
}

// Describe returns "reported by <name>".
func (r *Reported) Describe() string { return "reported by " + r.name }
