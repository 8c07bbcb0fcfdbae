package control

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// Auto's wait queue: how long a new arrival may wait (MaxWait) and the
// drain rate the stage predicts a wait from (see Auto for the law).
//
// A queue stands when the offered rate exceeds the drain rate L/R̂ or it
// did not empty in the last step. A standing queue is trimmed to the
// standing wait, because a queue that stands adds latency and no
// throughput (CoDel's lesson). But every standing queue began as a burst,
// and a burst that ends within a second or two is served by a deeper
// queue, not turned away: the requests it holds are served once the
// burst has passed, where a short queue had rejected them. So with
// BurstWindow (a named option, off by default; 1 s in the figures), for
// the first BurstWindow of a standing queue auto allows it half the room
// the tail leaves,
//
//	MaxWait = max((SLO − R̂99)/2, min(R̂, SLO − R̂99))
//
// (the standing wait's bound without the standing wait itself), and
// trims it to the standing wait after that. The allowance comes back
// once the queue has not stood for a BurstWindow. It is HAProxy's queue
// timeout and nginx limit_req's burst, sized from the objective instead
// of by hand; half the room keeps the admitted p99 about R̂99 +
// (SLO − R̂99)/2, half the room below the SLO, where a burst wait of the
// whole room (less tailMargin) would leave only tailMargin·R̂99 for the
// estimate's error. Behind exponential service of 10 ms on 4 workers
// and an SLO of 250 ms, a flash crowd to 10× capacity then ends its first
// second with about 100 ms of queue instead of 25 ms, and the answers
// within the SLO of the requests sent in that second went from
// 0.93–0.95× to 0.99–1.00× those of a static limit at the workers with a
// 100 ms queue timeout (HAProxy's stand-in in the simulated adaptive
// figure; docs/experiments.md).

// queueState is the standing queue's history, for the burst allowance.
type queueState struct {
	standFrom time.Time // when the queue began to stand (zero: it does not, or the allowance re-armed)
	calmFrom  time.Time // when it stopped standing (zero: it stands)
	burstLeft float64   // s of the burst allowance left after the last step
}

// update records whether the queue stands at now and sets burstLeft, the
// burst allowance left, in s (0 once spent, or with window 0).
func (q *queueState) update(now time.Time, standing bool, window time.Duration) {
	switch {
	case standing:
		if q.standFrom.IsZero() {
			q.standFrom = now
		}
		q.calmFrom = time.Time{}
	case q.calmFrom.IsZero():
		q.calmFrom = now
	case now.Sub(q.calmFrom) >= window:
		q.standFrom = time.Time{}
	}
	q.burstLeft = 0
	if standing && window > 0 {
		q.burstLeft = math.Max(0, (window - now.Sub(q.standFrom)).Seconds())
	}
}

// standingCap is the wait a standing queue is allowed, in s:
// min(standingWait, halfRoom).
func (a *Auto) standingCap() float64 { return math.Min(a.standingWait(), a.halfRoom()) }

// halfRoom is max((SLO − R̂99)/2, min(R̂, SLO − R̂99)), in s: half the
// room the tail leaves, but not below one mean service time where the
// room has it (a shorter queue leaves a worker idle between a completion
// and the next arrival). It bounds a standing queue (standingCap) and is
// the whole of the burst allowance. The standing wait while R̂99 is
// unknown.
func (a *Auto) halfRoom() float64 {
	room := a.cfg.SLO.Seconds() - a.rP99
	if !usable(room) {
		return a.standingWait()
	}
	keep := room / 2
	if usable(a.rMean) {
		keep = math.Max(keep, math.Min(a.rMean, room))
	}
	return keep
}

// standingWait is the wait allowed in a standing queue, in s (before the
// SLO − R̂99 bound).
func (a *Auto) standingWait() float64 {
	sw := a.cfg.StandingWait.Seconds()
	if sw == 0 {
		sw = a.cfg.SLO.Seconds() / 10
		if usable(a.rMean) {
			sw = math.Max(a.rMean, sw)
		}
	}
	return math.Max(sw, 0.001)
}

// queuePolicy returns the wait allowed to new arrivals, the drain rate for
// predictive rejection, and a phrase for the reason.
func (a *Auto) queuePolicy(now time.Time, m sluice.Measurements, limit float64) (time.Duration, float64, string) {
	slo := a.cfg.SLO.Seconds()
	if !usable(a.rMean) || a.rMean <= 0 {
		w := a.cfg.SLO / 2
		return w, 0, fmt.Sprintf("queue: wait ≤ %v (no service time yet)", w)
	}
	drain := limit / a.rMean
	offered := math.NaN()
	if el := m.Elapsed.Seconds(); el > 0 {
		offered = m.Arrivals / el
	}
	standing := usable(m.QueueWaitMin) && m.QueueWaitMin > 0 || usable(offered) && offered > drain
	a.queue.update(now, standing, a.cfg.BurstWindow)
	budget := slo - a.rP99
	if budget <= 0.001 {
		return -1, 0, fmt.Sprintf("queue: none (service p99 %s leaves no room below the SLO %v)", fmtSec(a.rP99), a.cfg.SLO)
	}
	wait, kind := math.Max(budget-tailMargin*a.rP99, budget/2), "burst"
	switch {
	case standing && a.queue.burstLeft > 0:
		wait, kind = a.halfRoom(), fmt.Sprintf("standing, %s of its burst allowance left", fmtSec(a.queue.burstLeft))
	case standing:
		wait, kind = a.standingCap(), "standing"
	}
	d := time.Duration(wait * float64(time.Second)).Round(time.Microsecond)
	return d, drain, fmt.Sprintf("queue (%s): wait ≤ %v, drain %s (SLO %v, service mean %s p99 %s)",
		kind, d, fmtRate(drain), a.cfg.SLO, fmtSec(a.rMean), fmtSec(a.rP99))
}
