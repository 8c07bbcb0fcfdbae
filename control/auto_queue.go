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
// the first BurstWindow of an overload (offered rate above L/R̂) a
// standing queue is allowed half the room the tail leaves,
//
//	MaxWait = max((SLO − T)/2, min(R̂, SLO − T))
//
// (the standing wait's bound without the standing wait itself; T the
// queue's tail, queueTail), and is trimmed to the standing wait after
// that. The allowance comes back after a BurstWindow without overload; a
// queue that stands below the drain rate (behind a heavy tail's long
// request, at a load the limit serves) does not spend it. It is
// HAProxy's queue timeout and nginx limit_req's burst, sized from the
// objective instead of by hand; half the room keeps the admitted p99
// about T + (SLO − T)/2, where a wait of the whole room (less
// tailMargin) would leave only tailMargin·T for the estimate's error,
// which R̂99 exceeds behind a heavy tail. Behind exponential service of
// 10 ms on 4 workers and an SLO of 250 ms, a flash crowd to 10×
// capacity then ends its first second with about 100 ms of queue
// instead of 25 ms, and the answers within the SLO of the requests sent
// in that second went from 0.93–0.95× to 0.99–1.00× those of a static
// limit at the workers with a 100 ms queue timeout (HAProxy's stand-in
// in the simulated adaptive figure; docs/experiments.md). With TailPool,
// whose estimate is precise enough for it, the allowance is the burst's
// own wait, leaving at least burstFloor of the SLO (burstCap).

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

// queueTail is the service-time p99 the wait queue is sized from, in s:
// with TailPool once it is known, R̂99ᴾ = the pool's p99 × the median's
// shift (auto_tail.go); R̂99 otherwise.
func (a *Auto) queueTail() float64 {
	if a.cfg.TailPool == 0 || !usable(a.rPool) {
		return a.rP99
	}
	return a.rPool * a.shift
}

// burstWait is the wait a burst is allowed, in s: max(SLO − T −
// margin, (SLO − T)/2) (T = queueTail), where the margin is tailMargin·T
// for the estimate's error, and with TailPool at least burstFloor of the
// SLO.
func (a *Auto) burstWait() float64 {
	tail, slo := a.queueTail(), a.cfg.SLO.Seconds()
	margin := tailMargin * tail
	if a.cfg.TailPool > 0 {
		margin = math.Max(margin, burstFloor*slo)
	}
	return math.Max(slo-tail-margin, (slo-tail)/2)
}

// burstFloor is the least share of the SLO a burst's wait leaves with
// TailPool: most of a crowd's first second waits about that long, so
// that second's p99 is about the wait plus the service's p99, and it is
// the p99 of a few hundred answers; live the proxy's and the clients'
// own time come on top. Behind exponential service of 10 ms (p99 46 ms),
// 10 % of the p99 left 4.6 ms, and that second's p99 read 244 ms live at
// an SLO of 250 ms; 5 % of the SLO left a simulated lognormal seed's at
// 250.1 ms; 10 % put them at 158–234 ms in the simulator (seeds 1–6,
// exponential, lognormal and Pareto).
const burstFloor = 0.1

// standingCap is the wait a standing queue is allowed, in s:
// min(standingWait, halfRoom).
func (a *Auto) standingCap() float64 { return math.Min(a.standingWait(), a.halfRoom()) }

// burstCap is the wait a queue in its burst allowance is allowed, in s:
// with TailPool a burst's own wait (burstWait); without it halfRoom,
// because R̂99 is not precise enough for the whole room (a crowd's
// first-second p99 reached 224–272 ms at an SLO of 250 ms in the
// simulator with it).
func (a *Auto) burstCap() float64 {
	if a.cfg.TailPool > 0 && usable(a.queueTail()) {
		return a.burstWait()
	}
	return a.halfRoom()
}

// halfRoom is max((SLO − T)/2, min(R̂, SLO − T − margin)), in s (T the
// queue's tail, queueTail): half the room the tail leaves, but not below
// one mean service time where the room has it (a shorter queue leaves a
// worker idle between a completion and the next arrival). With TailPool
// the margin is the burst's, tailMargin·T: R̂99ᴾ sits on the service's
// p99, where R̂99, the largest of a few steps' p99s, tends to read above
// it (behind lognormal σ 1.5 service at twice its mean, a p99 of
// 239 ms, the whole room put the admitted p99 at 250.4 ms and the
// margin at 249.8 ms in the simulator); without it, none. The standing
// wait while T is unknown.
func (a *Auto) halfRoom() float64 {
	tail := a.queueTail()
	room := a.cfg.SLO.Seconds() - tail
	if !usable(room) {
		return a.standingWait()
	}
	margin := 0.0
	if a.cfg.TailPool > 0 {
		margin = tailMargin * tail
	}
	keep := room / 2
	if usable(a.rMean) {
		keep = math.Max(keep, math.Min(a.rMean, room-margin))
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
	a.queue.update(now, usable(offered) && offered > drain, a.cfg.BurstWindow)
	tail := a.queueTail()
	budget := slo - tail
	if budget <= 0.001 {
		return -1, 0, fmt.Sprintf("queue: none (service p99 %s leaves no room below the SLO %v)", fmtSec(tail), a.cfg.SLO)
	}
	wait, kind := a.burstWait(), "burst"
	switch {
	case standing && a.queue.burstLeft > 0:
		wait, kind = a.burstCap(), fmt.Sprintf("standing, %s of its burst allowance left", fmtSec(a.queue.burstLeft))
	case standing:
		wait, kind = a.standingCap(), "standing"
	}
	d := time.Duration(wait * float64(time.Second)).Round(time.Microsecond)
	return d, drain, fmt.Sprintf("queue (%s): wait ≤ %v, drain %s (SLO %v, service mean %s p99 %s)",
		kind, d, fmtRate(drain), a.cfg.SLO, fmtSec(a.rMean), fmtSec(tail))
}
