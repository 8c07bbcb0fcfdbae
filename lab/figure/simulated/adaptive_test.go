// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"math"
	"testing"
)

// Two work-conserving rows behind the same overloaded backend serve the
// same sequence of service times (the draw is made at the backend, as
// the live testbed's queue makes it), so their goodput in a phase of 3×
// overload differs by their control only. With the draw made at the
// client, each row served a different subset of a lognormal σ 1.5
// service's draws: on seed 3 auto's goodput after the halving was 0.885×
// static-concurrency's with the limit of both fixed at the 4 workers.
func TestAdaptiveRowsServeTheSameDraws(t *testing.T) {
	for _, seed := range []uint64{1, 3} {
		s := run(t, "adaptive", seed, "service=lognormal", "rows=static-concurrency,auto", "phases=b")
		a, c := s.Metric("goodput_rps_auto_b"), s.Metric("goodput_rps_static_concurrency_b")
		if r := a / c; !(math.Abs(r-1) <= 0.02) {
			t.Errorf("seed %d: auto's goodput %v is %.3f× static-concurrency's %v, want within 2 %%", seed, a, r, c)
		}
	}
}

// Phase e runs two backends of half the workers each behind the
// least-in-flight pool, the second becoming 3× slower: HAProxy's 4 slots
// (2 per backend) serve what the two deliver together, 2/10 ms + 2/30
// ms = 267 req/s in exponential service, not the 400 of one backend, and
// not the 133 of the slow one alone.
func TestAdaptivePhaseESlowBackend(t *testing.T) {
	s := run(t, "adaptive", 1, "rows=static-concurrency", "phases=e")
	if g := s.Metric("goodput_rps_static_concurrency_e"); !(g >= 0.9*800.0/3 && g <= 1.05*800.0/3) {
		t.Errorf("static-concurrency's goodput in phase e = %v req/s, want about 267", g)
	}
}
