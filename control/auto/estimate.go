// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// estimates are auto's running estimates of the service time, in s:
//
//	R̂   = EWMA(step's mean service time), weight 0.3 per step
//	R̂99 = EWMA(T), weight 0.3, T the step's tail estimate: the largest
//	      per-step p99 over the latest steps that hold at least
//	      tailSamples samples (tailRing.add); with TailGuard a rise is
//	      taken at once, R̂99 = max(T, EWMA)
//
// and with TailPool the pooled p99 and the median's shift whose product
// is R̂99ᴾ (tail.go). A step without service-time samples (no traffic, or
// every request failed or timed out) leaves them as they were:
// rejections, failures and timeouts are never samples.
type estimates struct {
	rMean   float64  // R̂, s (NaN until known)
	rP99    float64  // R̂99, s (NaN until known)
	ring    tailRing // the latest periods' service p99s and medians, for T and R̂99ᴾ
	tailNow float64  // T, the latest step's tail estimate, s (the deck's and the uncut's; 0 before any)
	rPool   float64  // the pool's p99 with TailPool, s (NaN until known, or off)
	shift   float64  // the median's shift: R̂99ᴾ = rPool·shift (1: none)
}

// newEstimates returns the estimates before any sample: unknown (NaN),
// the median's shift 1.
func newEstimates() estimates {
	return estimates{rMean: math.NaN(), rP99: math.NaN(), rPool: math.NaN(), shift: 1}
}

// observe folds one step's service times into the estimates.
func (e *estimates) observe(m sluice.Measurements, tailGuard bool, tailPool int) {
	n := m.ServiceSamples
	if !(n > 0 && mathx.Usable(m.ServiceMean) && mathx.Usable(m.ServiceP99)) {
		return
	}
	e.rMean = ewma(e.rMean, m.ServiceMean, 0.3)
	// R̂99 from every completion where the stage measures it: the
	// window's fences drop the long requests that straddle them. The
	// tail guard (a named option) reads the window's samples as it
	// was designed on: it cuts L while the tail is over its room,
	// and every completion's tail, the service's own included, would
	// hold it below the service's parallelism.
	p99 := m.ServiceP99
	if !tailGuard && m.ServiceTailSamples > 0 && mathx.Usable(m.ServiceTailP99) {
		p99, n = m.ServiceTailP99, m.ServiceTailSamples
	}
	// With the tail guard a rising tail is taken at once, a falling
	// one smoothed: the wait allowed must not trail a service that
	// just got slower.
	est := e.ring.add(p99, n)
	e.ring.addMedian(m.ServiceP50, m.ServiceSamples)
	e.tailNow = est
	if tailPool > 0 {
		e.rPool, e.shift = e.ring.pooledTail(tailPool)
	}
	e.rP99 = ewma(e.rP99, est, 0.3)
	if tailGuard {
		e.rP99 = math.Max(est, e.rP99)
	}
}

// ewma returns a·x + (1−a)·prev, or x when prev is NaN.
func ewma(prev, x, a float64) float64 {
	if math.IsNaN(prev) {
		return x
	}
	return a*x + (1-a)*prev
}
