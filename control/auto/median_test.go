// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// biased is a plant whose throughput windows lie the way a heavy tail's
// noise can: a window whose limit is below L (a low probe) measures bias
// times the throughput, one above L (a high probe) 1/bias times, while
// the median service time tells the truth: m0 + the wait behind the
// n − w requests queued inside, (n − w)/X.
type biased struct {
	plant
	m0   float64 // median service time at or below the knee, s
	bias float64
}

func (p biased) step(a *Auto, h time.Duration) sluice.Measurements {
	n := a.Current().New
	m := p.plant.step(n, h)
	x := math.Min(n, p.w) / p.s
	m.ServiceP50 = p.m0 + math.Max(0, n-p.w)/x
	switch {
	case n < math.Round(a.Limit()):
		m.Completed *= p.bias
	case n > math.Round(a.Limit()):
		m.Completed /= p.bias
	}
	return m
}

// Behind a service of parallelism 4 (20 ms, median 6.5 ms; SLO 500 ms, so
// that the Little's-law cut at SLO/4 stays out of it) whose low
// probes measure 0.78× their throughput and high probes 1/0.78× (noise
// within about one coefficient of variation of a window of lognormal
// σ 1.5 service times): without the median test the low probe's ratio
// 0.78 neither keeps ≥ 0.917 nor loses < 0.75 of the throughput, and the
// high probe's 1.28× is a gain, confirmed twice: L grows past 16. With
// it each low
// probe's median falls (16 → 11: 6.5 + 12·5 ms → 6.5 + 7·5 ms, ×0.62 at
// ×0.69 the concurrency, below the threshold 0.84) and cuts L by √1.5
// until the base is at the knee (a base of 5 still queues one request
// inside: 11.5 ms against 6.5 at 3, ×0.57, cuts to 3.87; a base of 4
// against 3 moves no median, and that low probe's lost throughput steps
// L back to 4.74): L stays within [W/√1.5, W·√1.5]. The high probes'
// medians rise with their queue inside and never raise L.
func TestAutoMedianProbeCutsTowardsTheKnee(t *testing.T) {
	for _, on := range []bool{false, true} {
		a := newAuto(t, func(c *Config) { c.SLO, c.MedianProbe = 500*time.Millisecond, on })
		p := biased{plant: plant{w: 4, s: 0.020}, m0: 0.0065, bias: 0.78}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		most := 0.0
		for range 600 { // 60 s
			now = now.Add(a.Period())
			a.Update(now, p.step(a, a.Period()))
			most = math.Max(most, a.Limit())
		}
		t.Logf("median_probe %v: L %.3g (largest %.3g)", on, a.Limit(), most)
		if !on {
			if most <= 16 {
				t.Fatalf("without the median test L stayed at or below 16 (%v): the plant does not need the test", most)
			}
			continue
		}
		if lo, hi := 4/math.Sqrt(1.5), 4*math.Sqrt(1.5); a.Limit() < lo || a.Limit() > hi+1e-9 || most > 16 {
			t.Errorf("with the median test L = %v (largest %v), want within [%.3g, %.3g] and never above 16", a.Limit(), most, lo, hi)
		}
	}
}
