// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control/auto"
)

// guardSim is one tenant's Poisson arrivals at rate on a stage under auto
// with cfg, in front of a backend of workers × exponential service of the
// given mean, in virtual time.
func guardSim(t *testing.T, cfg auto.Config, workers int, service time.Duration, rate float64) *tenantSim {
	t.Helper()
	st := newStage(t, Options{Name: "guard", Controller: &cfg}, t0)
	c := &tenantSim{crowdSim: crowdSim{st: st, now: t0, service: service, workers: workers, rng: rand.New(rand.NewPCG(5, 6))},
		tenants: []string{""}, rates: []float64{rate}, ok: make([]int, 1), rej: make([]int, 1), rt: make([][]time.Duration, 1)}
	return c
}

func (c *tenantSim) reset() { c.ok[0], c.rej[0], c.rt[0], c.arrived = 0, 0, nil, 0 }

// measure runs the simulation 5 s to settle, then 10 s counted afresh,
// and returns the stage's state at the end.
func (c *tenantSim) measure() State {
	c.run(c.now.Add(5 * time.Second))
	c.reset()
	c.run(c.now.Add(10 * time.Second))
	return c.st.State(0)
}

func (c *tenantSim) auto() *auto.Auto { return c.st.Controller().Unwrap().(*auto.Auto) }

// min_rate: a small service (1 worker × 30 ms, 33 req/s) offered 50 req/s
// sheds a third of it under auto; with min_rate 100 req/s nothing is shed
// (the admitted requests queue inside the service instead), /state says
// the gate is open, and the metric's estimate is 1.
func TestAutoMinRate(t *testing.T) {
	for _, minRate := range []float64{0, 100} {
		cfg := auto.DefaultConfig()
		cfg.SLO, cfg.MinRate = 250*time.Millisecond, minRate
		c := guardSim(t, cfg, 1, 30*time.Millisecond, 50)
		st := c.measure()
		t.Logf("min_rate %v: %d rejected of %d, state estimates %v", minRate, c.rej[0], c.rej[0]+c.ok[0], st.Estimates)
		if minRate == 0 {
			if c.rej[0] < 50 {
				t.Fatalf("without min_rate only %d rejected: the test does not need the guard", c.rej[0])
			}
			continue
		}
		if c.rej[0] != 0 || st.Estimates["min_rate_open"] != 1 || !st.GateOff {
			t.Errorf("min_rate %v: %d rejected, min_rate_open %v, gate_off %v; want 0, 1, true", minRate, c.rej[0], st.Estimates["min_rate_open"], st.GateOff)
		}
	}
	// Above the minimum, auto sheds as usual.
	cfg := auto.DefaultConfig()
	cfg.SLO, cfg.MinRate = 250*time.Millisecond, 20
	c := guardSim(t, cfg, 1, 30*time.Millisecond, 50)
	c.run(c.now.Add(10 * time.Second))
	if st := c.st.State(0); c.rej[0] == 0 || st.Estimates["min_rate_open"] != 0 {
		t.Errorf("offered 50 req/s above min_rate 20: %d rejected, min_rate_open %v", c.rej[0], st.Estimates["min_rate_open"])
	}
}

// max_reject_fraction: at 3× overload auto rejects about two thirds of
// the arrivals; bounded to 0.2, it rejects at most a fifth of them (each
// step's rejections, at once or from the queue, stay within a fifth of its
// arrivals) and /state counts what it admitted past the limit. The
// service, told nothing, then carries 2.4× its capacity: the bound is a
// fail-open for a controller that misjudges, not for a real overload.
func TestAutoMaxRejectFraction(t *testing.T) {
	for _, f := range []float64{0, 0.2} {
		cfg := auto.DefaultConfig()
		cfg.SLO, cfg.MaxRejectFraction = 250*time.Millisecond, f
		c := guardSim(t, cfg, 8, 10*time.Millisecond, 2400)
		st := c.measure()
		frac := float64(c.rej[0]) / float64(c.arrived)
		t.Logf("max_reject_fraction %v: rejected %.3f of the arrivals, %d admitted past the limit", f, frac, st.MaxRejectAdmitted)
		if f == 0 {
			if frac < 0.5 {
				t.Fatalf("without the bound only %.3f rejected: the test does not need it", frac)
			}
			continue
		}
		if frac > f+0.01 || st.MaxRejectAdmitted == 0 || st.Estimates["max_reject_fraction"] != f {
			t.Errorf("bound %v: rejected %.3f, %d admitted past the limit, estimate %v", f, frac, st.MaxRejectAdmitted, st.Estimates["max_reject_fraction"])
		}
	}
}

// warmup: a service of 128 workers × 20 ms (6,400 req/s) offered 5,000
// req/s from the start. From initial_limit 16, auto confirms each gain
// before it grows; with a warm-up of 10 s it takes each gain at once with
// a 4× probe, and rejects less than half as many requests in the first 5
// s. /state shows the warm-up left.
func TestAutoWarmup(t *testing.T) {
	var rej [2]int
	for i, w := range []time.Duration{0, 10 * time.Second} {
		cfg := auto.DefaultConfig()
		cfg.SLO, cfg.Warmup = 250*time.Millisecond, w
		// The probes alone: the overtakes read the workers' count at once
		// and leave the warm-up nothing to speed up.
		cfg.Knee = auto.KneeProbes
		c := guardSim(t, cfg, 128, 20*time.Millisecond, 5000)
		c.run(c.now.Add(5 * time.Second))
		st := c.st.State(0)
		rej[i] = c.rej[0]
		t.Logf("warmup %v: %d rejected in the first 5 s, limit %v, warmup_left_s %v", w, c.rej[0], c.auto().Limit(), st.Estimates["warmup_left_s"])
		if w > 0 {
			if left := st.Estimates["warmup_left_s"]; left < 4.5 || left > 5.2 {
				t.Errorf("warmup_left_s %v after 5 s of a 10 s warm-up", left)
			}
			c.run(c.now.Add(6 * time.Second))
			if left := c.st.State(0).Estimates["warmup_left_s"]; left != 0 {
				t.Errorf("warmup_left_s %v after the warm-up", left)
			}
		}
	}
	if 2*rej[1] > rej[0] {
		t.Errorf("rejections in the first 5 s: %d with the warm-up, %d without; want less than half", rej[1], rej[0])
	}
}

// max_healthy_latency: a service of 64 workers × 20 ms (p99 ≈ 92 ms)
// offered more than it serves. auto grows its limit from 16 to the
// service's parallelism; told that 50 ms is the largest healthy p99, it
// never raises it, and /state's latency_guard says why.
func TestAutoMaxHealthyLatency(t *testing.T) {
	for _, lat := range []time.Duration{0, 50 * time.Millisecond} {
		cfg := auto.DefaultConfig()
		cfg.SLO, cfg.MaxHealthyLatency = 500*time.Millisecond, lat
		c := guardSim(t, cfg, 64, 20*time.Millisecond, 4000)
		most := 0.0
		for range 120 {
			c.run(c.now.Add(100 * time.Millisecond))
			most = max(most, c.auto().Limit())
		}
		st := c.st.State(0)
		t.Logf("max_healthy_latency %v: largest limit %v, latency_guard %v", lat, most, st.Estimates["latency_guard"])
		if lat == 0 {
			if most < 32 {
				t.Fatalf("without the guard the limit only reached %v: the test does not need it", most)
			}
			continue
		}
		if most > cfg.InitialLimit || st.Estimates["latency_guard"] != 1 {
			t.Errorf("guard %v: the limit reached %v (initial %v), latency_guard %v", lat, most, cfg.InitialLimit, st.Estimates["latency_guard"])
		}
	}
}

// The tail guard, in virtual time: 4 workers with lognormal service of
// σ 1.5 and mean 20 ms (200 req/s; the service's own p99 is 213 ms)
// offered 3× that, SLO 250 ms, from an initial limit of 16 (4× the
// workers). The queue inside the service behind long requests puts the
// measured p99 over SLO − standing wait; auto cuts its limit towards the
// workers and the admitted p99 of the last 20 s stays within the SLO.
func TestAutoTailGuard(t *testing.T) {
	cfg := auto.DefaultConfig()
	cfg.SLO = 250 * time.Millisecond
	cfg.TailGuard = true
	cfg.Knee = auto.KneeProbes // the guard alone, on the probes' limit
	c := guardSim(t, cfg, 4, 20*time.Millisecond, 600)
	const sigma = 1.5
	c.draw = func(r *rand.Rand) float64 { return math.Exp(sigma*r.NormFloat64() - sigma*sigma/2) }
	c.run(c.now.Add(10 * time.Second))
	c.reset()
	c.run(c.now.Add(20 * time.Second))
	rt := slices.Clone(c.rt[0])
	slices.Sort(rt)
	p99 := rt[len(rt)*99/100]
	cuts := 0
	for _, d := range c.st.State(1000).Decisions {
		if strings.Contains(d.Reason, "over SLO − standing wait") {
			cuts++
		}
	}
	t.Logf("served %.1f req/s, admitted p99 %v, limit %v, %d tail cuts", float64(c.ok[0])/20, p99, c.auto().Limit(), cuts)
	if cuts == 0 {
		t.Errorf("no tail cut: the test does not test the guard")
	}
	if p99 > cfg.SLO || float64(c.ok[0])/20 < 150 {
		t.Errorf("admitted p99 %v (want ≤ %v), %.1f req/s served (want ≥ 150 of 200)", p99, cfg.SLO, float64(c.ok[0])/20)
	}
}
