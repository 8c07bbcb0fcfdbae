// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The pooled p99 from per-period p99s: a period of fewer than 100
// samples stands for its one largest sample, a larger one for its top
// 1 % and one; the pool's p99 is where those reach 1 % of its samples.
func TestTailRingPooled(t *testing.T) {
	var r tailRing
	if got := r.pooled(2000); !math.IsNaN(got) {
		t.Errorf("empty ring: %v, want NaN", got)
	}
	for i := 1; i <= 10; i++ { // ten periods of 20 samples, largest i ms
		r.add(float64(i)/1000, 20)
	}
	// 200 samples: the p99 is the second largest, 9 ms.
	if got := r.pooled(2000); got != 0.009 {
		t.Errorf("ten periods of 20: %v, want 0.009", got)
	}
	// Only the latest periods that reach minN: the latest two (10 and
	// 9 ms) hold 40 samples, whose p99 is their largest.
	if got := r.pooled(40); got != 0.010 {
		t.Errorf("the latest 40 samples: %v, want 0.010", got)
	}
	// A period of 200 samples holds 200 − 198 + 1 = 3 at or above its
	// p99: on its own it is the pool's p99.
	r.add(0.005, 200)
	if got := r.pooled(200); got != 0.005 {
		t.Errorf("one period of 200: %v, want its own 0.005", got)
	}
	// With the ten small periods, 400 samples want 4 at or above the
	// p99: the periods of 10, 9, 8 and 7 ms count one each (the 5 ms
	// period's three come below them).
	if got := r.pooled(4000); got != 0.007 {
		t.Errorf("400 samples: %v, want 0.007", got)
	}
}

// lognormalSteps draws steps of n lognormal samples (median m, σ 1.5)
// and feeds them to the ring as the stage would: each step's nearest-rank
// p99 and median. It returns the step estimate R̂99 (running mean) and the
// pool's p99 and median shift after each step.
func lognormalSteps(r *tailRing, rng *rand.Rand, steps, n int, m float64, rP99 *float64, f func(step int, est, pool, shift float64)) {
	xs := make([]float64, n)
	for i := range steps {
		for j := range xs {
			xs[j] = m * math.Exp(1.5*rng.NormFloat64())
		}
		slices.Sort(xs)
		est := r.add(xs[int(math.Ceil(0.99*float64(n)))-1], float64(n))
		r.addMedian(xs[n/2], float64(n))
		*rP99 = ewma(*rP99, est, 0.3)
		pool, shift := r.pooledTail(2000)
		f(i, *rP99, pool, shift)
	}
}

// Behind lognormal σ 1.5 service at 200 req/s (20 samples a step), the
// running mean of the steps' p99 swings by half around the service's
// p99 (from 0.6 to 2.7 times it, 5th to 95th percentile); the pooled p99
// of 2000 samples stays within a quarter of it (0.76–1.17).
func TestTailPoolSteadier(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const m = 0.00325                    // the median of a 10 ms-mean lognormal σ 1.5
	truth := m * math.Exp(1.5*2.3263479) // its p99, 106 ms
	var r tailRing
	rP99 := math.NaN()
	var old, pooled []float64
	lognormalSteps(&r, rng, 3000, 20, m, &rP99, func(i int, est, pool, shift float64) {
		if i >= 200 {
			old, pooled = append(old, est/truth), append(pooled, pool*shift/truth)
		}
	})
	q := func(xs []float64, p float64) float64 {
		ys := slices.Clone(xs)
		slices.Sort(ys)
		return ys[int(p*float64(len(ys)-1))]
	}
	t.Logf("R̂99/p99 5–95 %%: %.2f–%.2f; R̂99ᴾ/p99: %.2f–%.2f", q(old, 0.05), q(old, 0.95), q(pooled, 0.05), q(pooled, 0.95))
	if q(old, 0.95)-q(old, 0.05) < 0.5 {
		t.Errorf("R̂99 spans %.2f–%.2f of the p99: the test does not test", q(old, 0.05), q(old, 0.95))
	}
	if lo, hi := q(pooled, 0.05), q(pooled, 0.95); lo < 0.7 || hi > 1.3 || hi-lo > (q(old, 0.95)-q(old, 0.05))/4 {
		t.Errorf("R̂99ᴾ spans %.2f–%.2f of the p99, want within 0.7–1.3 and a quarter of R̂99's span", lo, hi)
	}
}

// A service that gets twice as slow: the pool's p99 trails it for
// seconds, and the median's shift makes up for it within about a second.
func TestTailPoolShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const m = 0.00325
	truth := m * math.Exp(1.5*2.3263479)
	var r tailRing
	rP99 := math.NaN()
	lognormalSteps(&r, rng, 200, 20, m, &rP99, func(int, float64, float64, float64) {})
	var at = -1
	var unscaled float64
	lognormalSteps(&r, rng, 30, 20, 2*m, &rP99, func(i int, _, pool, shift float64) {
		if i == 14 {
			unscaled = pool
		}
		if at < 0 && pool*shift >= 0.85*2*truth {
			at = i
		}
	})
	t.Logf("R̂99ᴾ reached 0.85 × the new p99 after %d steps; the pool alone read %.0f ms after 15 (new p99 %.0f ms)", at+1, unscaled*1e3, 2*truth*1e3)
	if at < 0 || at >= 15 {
		t.Errorf("R̂99ᴾ took %d steps to reach 0.85 × the new p99, want < 15", at+1)
	}
	if unscaled >= 0.85*2*truth {
		t.Errorf("the pool alone read %.0f ms after 15 steps: the test does not test the shift", unscaled*1e3)
	}
}

// tail_pool shows its estimates, and only with it on; a standing queue
// past its burst allowance reads the pool's p99 scaled by the median's
// shift, a burst and the allowance R̂99.
func TestAutoTailPoolEstimates(t *testing.T) {
	for _, pool := range []int{0, 2000} {
		a := newAuto(t, func(c *Config) { c.TailPool = pool })
		m := sluice.Measurements{Elapsed: 100 * time.Millisecond, Arrivals: 10, Completed: 10, ServiceSamples: 10,
			ServiceMean: 0.010, ServiceP50: 0.008, ServiceP99: 0.030, InFlight: 1, MaxInFlight: 2}
		a.Update(t0.Add(100*time.Millisecond), m)
		e := a.Estimates()
		_, ok := e["service_p99_pooled_s"]
		_, ok2 := e["service_median_shift"]
		if ok != (pool > 0) || ok2 != (pool > 0) {
			t.Errorf("tail_pool %d: pooled estimates shown %v %v", pool, ok, ok2)
		}
		if pool > 0 && (e["service_p99_pooled_s"] != 0.030 || e["service_median_shift"] != 1) {
			t.Errorf("tail_pool %d: %v", pool, e)
		}
	}
	a := newAuto(t, func(c *Config) { c.TailPool = 2000 })
	a.est.rP99, a.est.rPool, a.est.shift = 0.030, 0.100, 2
	if got := a.queueTail(true); got != 0.200 {
		t.Errorf("a trimmed standing queue: tail %v, want the pool × the shift 0.2", got)
	}
	if got := a.queueTail(false); got != 0.030 {
		t.Errorf("a burst or its allowance: tail %v, want R̂99 0.03", got)
	}
	a.est.rPool = math.NaN()
	if got := a.queueTail(true); got != 0.030 {
		t.Errorf("pool unknown: tail %v, want R̂99 0.03", got)
	}
}
