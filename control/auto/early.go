// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"cmp"
	"fmt"
	"math"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctl"
	"github.com/sluicehq/sluice/internal/mathx"
)

// The early cut: Little's law on the latest completions, not only on a
// judged window.
//
// The Little's-law cut (judge.go) reads a base window's mean service
// time, and a window needs MinCompletions completions or MaxWindow: at a
// service that slows down at once (a backend whose capacity drops to a
// third) it waits up to a second, and the service times it reads are
// those of requests that entered before the queue inside the service
// grew, so they lag it. Meanwhile a limit that demand never filled
// (auto holds L without evidence, so a stage that never saw overload
// keeps InitialLimit) lets that many requests queue inside the service.
// In virtual time, in graph-hotel's capacity drop, the shared backend
// (one worker) kept L = 16 for the drop's first second, its worker queue
// grew to 16 calls of 48 ms, and the calls admitted in that second waited
// up to 286 ms there: the run's admitted p99 was 299 ms against an SLO of
// 250 ms (lab/NOTEBOOK.md, graph-hotel).
//
// Little's law needs no service time to have completed: the time a
// request spends in service is R = n̄/X, the mean number in service over
// the rate of completions, and n̄ rises with the queue inside the service
// at once. So auto sums, step by step, ∫n dt and the successful
// completions, and every time it holds at least earlyCompletions
// completions it computes R = ∫n dt / completions and starts the sum
// again. It cuts when, with the limit above 2·MinLimit,
//
//   - R exceeds SLO/4, the window cut's threshold;
//   - R exceeds twice the running mean service time R̂ and the running
//     p99 R̂99: the completions lag a queue that is growing (in a steady
//     state Little's law and the completions agree, and the window's cut
//     decides: where a backend is slow without queueing, its own service
//     time near SLO/4, cutting on each sum took the graph-recover
//     chain's backend below its parallelism during the drop, 132 → 77
//     req/s; and behind a heavy tail one long request in service makes
//     a sum of ten completions read a long R, which the p99 covers: in
//     stage's TestAutoMedianProbe, lognormal σ 1.5 on 4 workers, such
//     cuts took two seeds of four to 175 req/s of 200);
//   - R̂ exceeds SLO/8: the completions confirm a slowdown. Requests
//     held in service while the completions stay fast are stuck (behind
//     a costly call downstream: graph-hotel's cost-50 at its entry), and
//     cutting would leave the few slots to them;
//
// and then
//
//	L ← max(MinLimit, X·SLO/4, n̄/2)
//
// (at most L itself): the concurrency at which the service, at the
// throughput it shows, keeps R at SLO/4, but not below half of what is in
// service, against a sum of a few completions' noise. The cut starts the
// cycle again and is a Little's-law cut for the uncut (uncut.go): the
// limit it cut from comes back when the service is fast again. While the
// latest sum's R exceeds SLO/4 the uncut waits (the completions' tail
// lags the queue that Little's law sees). Estimate little_r_s (the latest
// R; NaN before the first sum).

// earlyCompletions is the number of successful completions a sum of the
// early cut holds before it is read: ten, so that one long completion
// does not make a step's R.
const earlyCompletions = 10

// earlySum is the early cut's running sum since it was last read.
type earlySum struct {
	inFlight float64 // ∫ n dt, request·s
	done     float64 // successful completions
	elapsed  float64 // s
	r        float64 // the latest sum's R = ∫n dt / done, s (NaN: none yet)
}

// earlyCut adds the step to the sum and, once it holds earlyCompletions
// completions, cuts L when Little's law puts the time in service above
// SLO/4 (see above); it reports the reason and whether it cut.
func (a *Auto) earlyCut(m sluice.Measurements, el float64) (string, bool) {
	s := &a.early
	ok := m.Completed - math.Max(m.Failed, 0)
	if !(el > 0) || !mathx.Usable(m.InFlight) || !mathx.Usable(ok) {
		return "", false
	}
	s.inFlight += m.InFlight * el
	s.done += ok
	s.elapsed += el
	if s.done < earlyCompletions {
		if s.elapsed >= a.cfg.MaxWindow.Seconds() {
			// Too slow a service for the sum: the window's cut judges it.
			s.inFlight, s.done, s.elapsed = 0, 0, 0
		}
		return "", false
	}
	r, x, n := s.inFlight/s.done, s.done/s.elapsed, s.inFlight/s.elapsed
	s.inFlight, s.done, s.elapsed, s.r = 0, 0, 0, r
	quarter := a.cfg.SLO.Seconds() / 4
	if r <= quarter || a.limit <= 2*a.cfg.MinLimit || !(a.est.rMean > quarter/2) || !(r > math.Max(2*a.est.rMean, a.est.rP99)) {
		return "", false
	}
	to := math.Max(math.Max(a.cfg.MinLimit, x*quarter), n/2)
	if to >= a.limit {
		return "", false
	}
	old := a.limit
	a.limit = to
	a.cutFrom = cmp.Or(a.cutFrom, old)
	a.restart()
	a.win = window{limit: a.windowLimit()}
	return fmt.Sprintf("L %.4g → %.4g: %.3g in service at %s completions: time in service %s (Little's law) is over SLO/4",
		old, a.limit, n, ctl.FmtRate(x), ctl.FmtSec(r)), true
}

// earlyHolds reports whether the latest sum of the early cut put the
// time in service above SLO/4 (the uncut then waits).
func (a *Auto) earlyHolds() bool {
	return mathx.Usable(a.early.r) && a.early.r > a.cfg.SLO.Seconds()/4
}
