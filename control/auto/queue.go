// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctl"
	"github.com/sluicehq/sluice/internal/mathx"
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
// the first BurstWindow of an overload (offered rate above L/R̂) a
// standing queue is allowed half the room the tail leaves,
//
//	MaxWait = max((SLO − R̂99)/2, min(R̂, SLO − R̂99))
//
// (the standing wait's bound without the standing wait itself), and is
// trimmed to the standing wait after that. The allowance comes back
// after a BurstWindow without overload; a queue that stands below the
// drain rate (behind a heavy tail's long request, at a load the limit
// serves) does not spend it. It is
// HAProxy's queue timeout and nginx limit_req's burst, sized from the
// objective instead of by hand; half the room keeps the admitted p99
// about R̂99 + (SLO − R̂99)/2, where a wait of the whole room (less
// tailMargin) would leave only tailMargin·R̂99 for the estimate's error,
// which R̂99 exceeds behind a heavy tail. Behind exponential service of
// 10 ms on 4 workers and an SLO of 250 ms, a flash crowd to 10×
// capacity then ends its first second with about 100 ms of queue
// instead of 25 ms, and the answers within the SLO of the requests sent
// in that second went from 0.93–0.95× to 0.99–1.00× those of a static
// limit at the workers with a 100 ms queue timeout (HAProxy's stand-in
// in the simulated adaptive figure; docs/experiments.md).

// queueState is the overload's history, for the burst allowance.
type queueState struct {
	overFrom  time.Time // when the offered rate rose above the drain rate (zero: it is not, or the allowance re-armed)
	calmFrom  time.Time // when it fell back (zero: it has not)
	burstLeft float64   // s of the burst allowance left after the last step
}

// update records whether the offered rate exceeds the drain rate at now
// and sets burstLeft, the burst allowance left, in s (the whole window
// before an overload, 0 once spent, and always 0 with window 0). A queue
// that stands while the offered rate is below the drain rate (behind a
// heavy tail's long request, at a load the limit serves) does not spend
// it: what it is for is the overload's first second.
func (q *queueState) update(now time.Time, over bool, window time.Duration) {
	switch {
	case over:
		if q.overFrom.IsZero() {
			q.overFrom = now
		}
		q.calmFrom = time.Time{}
	case q.calmFrom.IsZero():
		q.calmFrom = now
	case now.Sub(q.calmFrom) >= window:
		q.overFrom = time.Time{}
	}
	q.burstLeft = 0
	if window > 0 {
		q.burstLeft = window.Seconds()
		if !q.overFrom.IsZero() {
			q.burstLeft = math.Max(0, (window - now.Sub(q.overFrom)).Seconds())
		}
	}
}

// queueTail is the service-time p99 a wait is sized from, in s: for a
// standing queue past its burst allowance (trimmed), with TailPool once
// it is known, R̂99ᴾ = the pool's p99 × the median's shift
// (tail.go); R̂99 otherwise. A burst and the burst allowance keep
// R̂99: sized from the pool, a crowd's first second waited most of the
// room the service's tail left before the crowd, and live the crowd
// slows the service itself (the load generator, the proxy and the
// backend share the machine's cores), so that second's p99 read 296 and
// 297 ms at an SLO of 250 ms (docs/experiments.md).
func (a *Auto) queueTail(trimmed bool) float64 {
	if !trimmed || a.cfg.TailPool == 0 || !mathx.Usable(a.est.rPool) {
		return a.est.rP99
	}
	return a.est.rPool * a.est.shift
}

// standingCap is the wait a standing queue past its burst allowance is
// allowed, in s: min(standingWait, halfRoom(T, margin)) with T =
// queueTail(true), and with TailPool the burst's margin tailMargin·T:
// R̂99ᴾ sits on the service's p99, where R̂99, the largest of a few
// steps' p99s, tends to read above it (behind lognormal σ 1.5 service at
// twice its mean, a p99 of 239 ms, the whole room put the admitted p99
// at 250.4 ms and the margin at 249.8 ms in the simulator).
func (a *Auto) standingCap() float64 {
	tail, margin := a.queueTail(true), 0.0
	if a.cfg.TailPool > 0 {
		margin = tailMargin * tail
	}
	return math.Min(a.standingWait(), a.halfRoom(tail, margin))
}

// burstCap is the wait a queue in its burst allowance is allowed, in s:
// halfRoom(R̂99, 0).
func (a *Auto) burstCap() float64 { return a.halfRoom(a.est.rP99, 0) }

// halfRoom is max((SLO − tail)/2, min(R̂, SLO − tail − margin)), in s:
// half the room the tail leaves, but not below one mean service time
// where the room has it (a shorter queue leaves a worker idle between a
// completion and the next arrival). The standing wait while the tail is
// unknown.
func (a *Auto) halfRoom(tail, margin float64) float64 {
	room := a.cfg.SLO.Seconds() - tail
	if !mathx.Usable(room) {
		return a.standingWait()
	}
	keep := room / 2
	if mathx.Usable(a.est.rMean) {
		keep = math.Max(keep, math.Min(a.est.rMean, room-margin))
	}
	return keep
}

// standingWait is the wait allowed in a standing queue, in s (before the
// SLO − R̂99 bound).
func (a *Auto) standingWait() float64 {
	sw := a.cfg.StandingWait.Seconds()
	if sw == 0 {
		sw = a.cfg.SLO.Seconds() / 10
		if mathx.Usable(a.est.rMean) {
			sw = math.Max(a.est.rMean, sw)
		}
	}
	return math.Max(sw, 0.001)
}

// queuePolicy returns the wait allowed to new arrivals, the drain rate for
// predictive rejection, and a phrase for the reason.
func (a *Auto) queuePolicy(now time.Time, m sluice.Measurements, limit float64) (time.Duration, float64, string) {
	slo := a.cfg.SLO.Seconds()
	if !mathx.Usable(a.est.rMean) || a.est.rMean <= 0 {
		w := a.cfg.SLO / 2
		return w, 0, fmt.Sprintf("queue: wait ≤ %v (no service time yet)", w)
	}
	drain := limit / a.est.rMean
	offered := math.NaN()
	if el := m.Elapsed.Seconds(); el > 0 {
		offered = m.Arrivals / el
	}
	standing := mathx.Usable(m.QueueWaitMin) && m.QueueWaitMin > 0 || mathx.Usable(offered) && offered > drain
	a.queue.update(now, mathx.Usable(offered) && offered > drain, a.cfg.BurstWindow)
	tail := a.queueTail(standing && a.queue.burstLeft == 0)
	budget := slo - tail
	if budget <= 0.001 {
		return -1, 0, fmt.Sprintf("queue: none (service p99 %s leaves no room below the SLO %v)", ctl.FmtSec(tail), a.cfg.SLO)
	}
	wait, kind := math.Max(budget-tailMargin*tail, budget/2), "burst"
	switch {
	case standing && a.queue.burstLeft > 0:
		wait, kind = a.burstCap(), fmt.Sprintf("standing, %s of its burst allowance left", ctl.FmtSec(a.queue.burstLeft))
	case standing:
		wait, kind = a.standingCap(), "standing"
	}
	d := time.Duration(wait * float64(time.Second)).Round(time.Microsecond)
	return d, drain, fmt.Sprintf("queue (%s): wait ≤ %v, drain %s (SLO %v, service mean %s p99 %s)",
		kind, d, ctl.FmtRate(drain), a.cfg.SLO, ctl.FmtSec(a.est.rMean), ctl.FmtSec(tail))
}
