// SPDX-License-Identifier: Apache-2.0

package control

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// History is a ring buffer of the last N decisions of one controller, for
// the admin API, dashboards and reports. It is safe for concurrent use: the
// runner adds while readers copy.
type History struct {
	mu   sync.Mutex
	buf  []sluice.Decision
	next int
	full bool
}

// NewHistory returns a History that keeps the last n decisions (n ≥ 1).
func NewHistory(n int) (*History, error) {
	if n < 1 {
		return nil, badField("history", n, "must be ≥ 1")
	}
	return &History{buf: make([]sluice.Decision, n)}, nil
}

// Add records d, overwriting the oldest decision when full.
func (h *History) Add(d sluice.Decision) {
	h.mu.Lock()
	h.buf[h.next] = d
	h.next++
	if h.next == len(h.buf) {
		h.next, h.full = 0, true
	}
	h.mu.Unlock()
}

// Len returns the number of decisions held.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full {
		return len(h.buf)
	}
	return h.next
}

// Last returns up to n of the most recent decisions, oldest first. The
// result is a copy.
func (h *History) Last(n int) []sluice.Decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	size := h.next
	if h.full {
		size = len(h.buf)
	}
	if n > size {
		n = size
	}
	if n <= 0 {
		return nil
	}
	out := make([]sluice.Decision, n)
	start := h.next - n
	for i := range out {
		j := start + i
		if j < 0 {
			j += len(h.buf)
		}
		out[i] = h.buf[j]
	}
	return out
}

// Logged wraps a controller and records each decision in a History. It is
// itself a controller; like every controller it is driven by one runner.
type Logged struct {
	sluice.Controller
	History *History
}

// WithHistory wraps c so that its last n decisions are kept.
func WithHistory(c sluice.Controller, n int) (*Logged, error) {
	h, err := NewHistory(n)
	if err != nil {
		return nil, err
	}
	return &Logged{Controller: c, History: h}, nil
}

// Update runs the wrapped controller's step and records its decision.
func (l *Logged) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	d := l.Controller.Update(now, m)
	l.History.Add(d)
	return d
}

// TriggerSamples forwards the wrapped controller's sample trigger, or 0 if
// it has none.
func (l *Logged) TriggerSamples() int {
	if t, ok := l.Controller.(sluice.SampleTriggered); ok {
		return t.TriggerSamples()
	}
	return 0
}
