// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// RetryState returns what the stage knows at now about when a request of
// class that it rejects could be admitted on retry (sluice.RetryState):
// the controller's next step, the class's token wait at a rate gate, the
// concurrency queue and limit and the last period's mean service time.
// It does not block on the stage's step and does not allocate.
func (s *Stage) RetryState(now time.Time, class int) sluice.RetryState {
	input := 0
	if s.classAware {
		input = clampClass(class, len(s.lastStep))
	}
	rs := sluice.RetryState{
		NextStep:  time.Unix(0, s.lastStep[input].Load()).Add(s.period),
		TokenWait: s.gates.TokenWait(now, class),
	}
	if s.conc != nil {
		rs.Queue, rs.Limit = s.QueueLen(), s.gates.Limit()
		rs.ServiceMean = time.Duration(s.svcMean.Load())
	}
	return rs
}

// RetryAfter returns how long a request of class rejected at now should
// wait before its retry, from the controller's state: the controller's
// own answer when it is a sluice.RetryAdvisor, else the default for the
// stage's gate — the time to the class's next token (rate), the
// predicted drain time of the queue ahead (concurrency), the time to the
// controller's next step (drop probability). It is ≥ 0; the caller
// bounds it (policy: reject.retry_after and retry_after_max).
func (s *Stage) RetryAfter(now time.Time, class int) time.Duration {
	rs := s.RetryState(now, class)
	var d time.Duration
	if a, ok := s.ctrl.Unwrap().(sluice.RetryAdvisor); ok {
		d = a.RetryAfter(now, rs)
	} else {
		switch s.gates.Kind() {
		case sluice.KindRate:
			d = rs.TokenWait
		case sluice.KindConcurrency:
			d = rs.Drain()
		default:
			d = rs.NextStep.Sub(now)
		}
	}
	return max(d, 0)
}

// Quota is a rate stage's token bucket at an instant, as the IETF
// RateLimit header fields advertise it.
type Quota struct {
	// Rate is the refill rate in requests per second, Burst the bucket's
	// size and Tokens what it holds now, in [0, Burst].
	Rate   float64
	Burst  int
	Tokens float64
}

// Quota returns the stage's token bucket at now, and false for a stage
// whose gate is not a single finite-rate bucket (per-class buckets, a
// dropper, a concurrency limit, no gate, or an infinite rate).
func (s *Stage) Quota(now time.Time) (Quota, bool) {
	b := s.gates.bucket
	if b == nil || s.gates.Off() {
		return Quota{}, false
	}
	r := b.Rate()
	if math.IsInf(r, 1) {
		return Quota{}, false
	}
	return Quota{Rate: r, Burst: b.Burst(), Tokens: b.TokensAt(now)}, true
}
