// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctltest"
	"github.com/sluicehq/sluice/internal/fielderr"
)

// plant is a service of parallelism w and service time s seen through a
// stage whose queue always holds waiters (saturated): the number in
// service is the limit, the throughput min(n, w)/s and the service time
// s·max(1, n/w) (Little's law above the knee).
type plant struct {
	w float64 // parallelism
	s float64 // service time at or below the knee, seconds
}

func (p plant) step(limit float64, h time.Duration) sluice.Measurements {
	el := h.Seconds()
	x := math.Min(limit, p.w) / p.s
	r := p.s * math.Max(1, limit/p.w)
	done := x * el
	return sluice.Measurements{Elapsed: h, Arrivals: 3 * done, Admitted: done, Rejected: 2 * done, Completed: done,
		InFlight: limit, MaxInFlight: limit, ServiceSamples: done, ServiceMean: r, ServiceP50: r, ServiceP90: 1.5 * r,
		ServiceP99: 2 * r, ServiceMin: r / 4, QueueWaitMean: r, QueueWaitMin: r / 10, Queue: limit}
}

// drive runs a for d of virtual time on p (steps of the controller's
// period, from *now) and returns the last decision.
func drive(a *Auto, p plant, now *time.Time, d time.Duration) sluice.Decision {
	h := a.Period()
	var last sluice.Decision
	for end := now.Add(d); now.Before(end); {
		*now = now.Add(h)
		last = a.Update(*now, p.step(a.Current().New, h))
	}
	return last
}

func newAuto(t *testing.T, edit func(*Config)) *Auto {
	t.Helper()
	cfg := DefaultConfig()
	cfg.SLO = 250 * time.Millisecond
	return ctltest.Build(t, cfg, edit, New)
}

// From its initial limit of 16 on a service of parallelism 4, auto's low
// probes find the knee: L settles where the low probe (L/1.5) is at the
// knee, within [√1.5·W, 1.5·W] give or take a step.
func TestAutoFindsTheKneeFromAbove(t *testing.T) {
	a := newAuto(t, nil)
	now := t0
	drive(a, plant{w: 4, s: 0.010}, &now, 60*time.Second)
	if l := a.Limit(); l < 4 || l > 7 {
		t.Fatalf("limit %.3g after 60 s on W = 4, want within [4, 7]", l)
	}
}

// A service that gains parallelism (4 → 16 at the same cost) is found by
// confirmed high probes with a doubling gain; one that loses it is
// followed down by the low probes. The limit never goes below W·(1/1.5)
// on the way, so the service stays busy.
func TestAutoFollowsParallelism(t *testing.T) {
	a := newAuto(t, nil)
	now := t0
	drive(a, plant{w: 4, s: 0.010}, &now, 30*time.Second)
	start := now
	p := plant{w: 16, s: 0.010}
	for now.Sub(start) < 10*time.Second && a.Limit() < 16 {
		drive(a, p, &now, a.Period())
	}
	if a.Limit() < 16 {
		t.Fatalf("limit %.3g 10 s after the parallelism quadrupled, want ≥ 16", a.Limit())
	}
	t.Logf("grew to %.3g in %v", a.Limit(), now.Sub(start))
	drive(a, p, &now, 60*time.Second)
	if l := a.Limit(); l < 16 || l > 28 {
		t.Fatalf("limit %.3g on W = 16, want within [16, 28]", l)
	}
	drive(a, plant{w: 4, s: 0.010}, &now, 90*time.Second)
	if l := a.Limit(); l > 7 {
		t.Fatalf("limit %.3g 90 s after the parallelism went back to 4, want ≤ 7", l)
	}
}

// capped is plant with the demand's concurrency capped at d: the number
// in service is min(limit, d), as when the offered load no longer fills
// the limit once the service has more parallelism.
type capped struct {
	plant
	d float64
}

func (p capped) step(limit float64, h time.Duration) sluice.Measurements {
	m := p.plant.step(math.Min(limit, p.d), h)
	if limit > p.d {
		m.QueueWaitMin, m.Queue = 0, 0
	}
	return m
}

// After the service's parallelism quadruples (4 → 16) under a demand
// that holds 12 requests in service, a high probe that the demand does
// not fill but whose throughput grows with the number in service takes
// the limit to that number at once, not back to the base: holding 4
// there turned away two thirds of what the service could serve until
// the next cycle of probes (Pareto service in the adaptive figure's
// phase (d) settled in 3–6 s instead of 1–2).
func TestAutoTakesAnUnfilledProbeThatGrew(t *testing.T) {
	a := newAuto(t, nil)
	now := t0
	drive(a, plant{w: 4, s: 0.010}, &now, 60*time.Second)
	if l := a.Limit(); l > 7 {
		t.Fatalf("limit %.3g on W = 4, want ≤ 7 before the change", l)
	}
	p := capped{plant{w: 16, s: 0.010}, 12}
	start := now
	var took string
	for now.Sub(start) < 5*time.Second && a.Limit() < 12 {
		now = now.Add(a.Period())
		d := a.Update(now, p.step(a.Current().New, a.Period()))
		if strings.Contains(d.Reason, "was not filled") {
			took = d.Reason
		}
	}
	if a.Limit() < 12 || took == "" {
		t.Fatalf("limit %.3g 5 s after the parallelism quadrupled under a demand of 12 in service (%q), want 12 from an unfilled probe", a.Limit(), took)
	}
	t.Logf("%v after the change: %s", now.Sub(start), took)
	// Held at the demand's 12, not pushed past it by unfilled windows.
	for end := now.Add(30 * time.Second); now.Before(end); {
		now = now.Add(a.Period())
		a.Update(now, p.step(a.Current().New, a.Period()))
	}
	if l := a.Limit(); l < 12 || l > 18 {
		t.Fatalf("limit %.3g on W = 16 with 12 in demand, want within [12, 18]", l)
	}

	// max_healthy_latency below the service's p99 holds L there too.
	g := newAuto(t, func(c *Config) { c.MaxHealthyLatency = 5 * time.Millisecond })
	now = t0
	drive(g, plant{w: 4, s: 0.010}, &now, 60*time.Second)
	before := g.Limit()
	for end := now.Add(10 * time.Second); now.Before(end); {
		now = now.Add(g.Period())
		if d := g.Update(now, p.step(g.Current().New, g.Period())); g.Limit() > before {
			t.Fatalf("L %.3g → %.3g under max_healthy_latency: %s", before, g.Limit(), d.Reason)
		}
	}
}

// A service that becomes twice as slow (or fast) at the same parallelism
// needs no new limit: the concurrency limit follows it by itself.
func TestAutoHoldsThroughCapacityChanges(t *testing.T) {
	a := newAuto(t, nil)
	now := t0
	drive(a, plant{w: 4, s: 0.010}, &now, 60*time.Second)
	for _, s := range []float64{0.020, 0.005, 0.010} {
		before := a.Limit()
		drive(a, plant{w: 4, s: s}, &now, 20*time.Second)
		if l := a.Limit(); l < 4 || l > 7 || math.Abs(l-before) > 0.5*before {
			t.Fatalf("service time %v: limit %.3g (was %.3g), want it to stay near the knee", s, l, before)
		}
	}
}

// One high probe that gains is not enough to grow (it may be noise); two
// in a row are, and the step is the measured gain.
func TestAutoGrowthNeedsConfirmation(t *testing.T) {
	a := newAuto(t, func(c *Config) { c.InitialLimit = 8 })
	now := t0
	p := plant{w: 64, s: 0.010}
	var reasons []string
	for i := 0; i < 400 && a.Limit() == 8; i++ {
		d := drive(a, p, &now, a.Period())
		if strings.Contains(d.Reason, "high probe") {
			reasons = append(reasons, d.Reason)
		}
	}
	if len(reasons) < 2 || !strings.Contains(reasons[0], "confirm") || !strings.Contains(reasons[1], "grow") {
		t.Fatalf("high-probe reasons %q: want a confirmation, then growth", reasons)
	}
	// The second probe ran at 12 (8·1.5) and gained 1.5×: L = 12.
	if a.Limit() != 12 {
		t.Fatalf("limit %v after the confirmed probe, want 12", a.Limit())
	}
}

// A limit whose service time alone eats more than a quarter of the SLO is
// cut in proportion at the next base window (Little's law).
// On a host shared with other work the throughput of a window is noisy.
// Here every step's throughput is scaled by an independent factor within
// ±30 % (a fixed pseudo-random sequence) on a service of parallelism 64:
// auto starts at 16, below the knee, and the noise must not outvote the
// probes' real signal (a low probe loses a third, a high probe gains a
// half): the limit may grow, and never falls a shrink step below its
// start.
func TestAutoNoiseDoesNotRatchetTheLimitDown(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		a := newAuto(t, nil)
		p := plant{w: 64, s: 0.005}
		now := time.Unix(0, 0)
		rng := seed * 0x9E3779B97F4A7C15
		h := a.Period()
		low := math.Inf(1)
		for i := 0; i < 1200; i++ { // 120 s
			now = now.Add(h)
			m := p.step(a.Current().New, h)
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			f := 0.7 + 0.6*float64(rng%1000)/1000
			m.Completed *= f
			m.Admitted *= f
			m.ServiceSamples *= f
			a.Update(now, m)
			if i > 100 {
				low = math.Min(low, a.Limit())
			}
		}
		if low < 16/math.Sqrt(1.5)-1e-9 {
			t.Errorf("seed %d: the limit sank to %.3g under noise alone (parallelism 64, start 16)", seed, low)
		}
	}
}

func TestAutoCutsServiceTimeOverSLO(t *testing.T) {
	a := newAuto(t, func(c *Config) { c.InitialLimit = 64 })
	now := t0
	// W = 4, s = 10 ms: at 64 in service R = 160 ms > SLO/4 = 62.5 ms.
	d := drive(a, plant{w: 4, s: 0.010}, &now, 3*time.Second)
	if a.Limit() >= 64 {
		t.Fatalf("limit %v with service time 160 ms, want a cut (last: %s)", a.Limit(), d.Reason)
	}
}

// Without completions, or while demand does not fill the limit, auto
// holds: it never drifts to its floor for lack of samples.
func TestAutoHoldsWithoutEvidence(t *testing.T) {
	a := newAuto(t, nil)
	now := t0
	for i := 0; i < 300; i++ {
		now = now.Add(a.Period())
		d := a.Update(now, sluice.Measurements{Elapsed: a.Period(), ServiceMean: math.NaN(), InFlight: 16, MaxInFlight: 16})
		if d.New != 16 {
			t.Fatalf("step %d: limit %v without completions, want 16 (%s)", i, d.New, d.Reason)
		}
	}
	// App-limited: 2 in service under a limit of 16.
	for i := 0; i < 300; i++ {
		now = now.Add(a.Period())
		m := plant{w: 4, s: 0.010}.step(2, a.Period())
		d := a.Update(now, m)
		if d.New < 16 && d.New != 11 { // the low probe (16/1.5) may run, L stays
			t.Fatalf("step %d: limit %v while app-limited (%s)", i, d.New, d.Reason)
		}
	}
	if a.Limit() != 16 {
		t.Fatalf("L %v after app-limited windows, want 16", a.Limit())
	}
}

// The queue policy: the SLO budget for bursts, about one service time
// while the queue stands, none when the service alone misses the SLO; the
// drain rate is L/R̂.
func TestAutoQueuePolicy(t *testing.T) {
	a := newAuto(t, func(c *Config) { c.BurstWindow = time.Second })
	if d := a.Current(); d.MaxWait != 125*time.Millisecond || d.Drain != 0 {
		t.Fatalf("initial wait %v drain %v, want SLO/2 and none", d.MaxWait, d.Drain)
	}
	now := t0.Add(100 * time.Millisecond)
	// A quiet step: mean 10 ms, p99 30 ms; the queue emptied.
	m := sluice.Measurements{Elapsed: 100 * time.Millisecond, Arrivals: 10, Completed: 10, ServiceSamples: 10,
		ServiceMean: 0.010, ServiceP99: 0.030, InFlight: 1, MaxInFlight: 2, QueueWaitMin: 0}
	d := a.Update(now, m)
	if d.MaxWait != 217*time.Millisecond || math.Abs(d.Drain-1600) > 1e-6 {
		t.Fatalf("burst: wait %v drain %v, want 217ms (250 − 1.1 × 30) and 16/0.010 = 1600", d.MaxWait, d.Drain)
	}
	// Offered 5000/s, above the drain rate: a standing queue, in its
	// first second half the room the tail leaves (the burst allowance),
	// then trimmed.
	m.Arrivals = 500
	d = a.Update(now.Add(100*time.Millisecond), m)
	if d.MaxWait != 110*time.Millisecond || a.Estimates()["burst_left_s"] != 1 {
		t.Fatalf("standing, burst allowance: wait %v (%v s left), want (250 − 30)/2 = 110ms and 1 s", d.MaxWait, a.Estimates()["burst_left_s"])
	}
	d = a.Update(now.Add(1100*time.Millisecond), m)
	if d.MaxWait != 25*time.Millisecond || a.Estimates()["burst_left_s"] != 0 {
		t.Fatalf("standing: wait %v, want max(one service time, SLO/10) = 25ms", d.MaxWait)
	}
	// A tail near the SLO: a standing queue gets half the room it leaves,
	// (250 − 210)/2 = 20 ms, not 25 (the estimate's running mean is
	// settled first).
	m.ServiceP99 = 0.210
	for i := range 30 {
		d = a.Update(now.Add(time.Duration(i+12)*100*time.Millisecond), m)
	}
	if math.Abs(d.MaxWait.Seconds()-0.020) > 1e-4 {
		t.Fatalf("standing behind a p99 of 210 ms: wait %v, want 20ms", d.MaxWait)
	}
	// R̂99 comes from every completion where the stage measures it
	// (ServiceTailP99), not from the fenced samples.
	m.ServiceTailSamples, m.ServiceTailP99 = 10, 0.230
	for i := range 30 {
		d = a.Update(now.Add(time.Duration(i+40)*100*time.Millisecond), m)
	}
	if math.Abs(d.MaxWait.Seconds()-0.010) > 1e-4 || math.Abs(a.Estimates()["service_p99_s"]-0.230) > 1e-4 {
		t.Fatalf("tail p99 230 ms: wait %v, R̂99 %v; want 10ms and 230ms", d.MaxWait, a.Estimates()["service_p99_s"])
	}
	m.ServiceTailSamples, m.ServiceTailP99 = 0, 0
	// A service whose p99 alone is over the SLO leaves no room to wait.
	m.ServiceP99, m.ServiceMean = 5, 3
	for i := 0; i < 20; i++ {
		d = a.Update(now.Add(time.Duration(i+2)*100*time.Millisecond), m)
	}
	if d.MaxWait >= 0 {
		t.Fatalf("service p99 over the SLO: wait %v, want none (< 0)", d.MaxWait)
	}
}

func TestAutoConfigValidate(t *testing.T) {
	ctltest.CheckFieldErrors(t, DefaultConfig, []ctltest.FieldCase[Config]{
		{Field: "slo", Edit: func(c *Config) { c.SLO = 0 }},
		{Field: "period", Edit: func(c *Config) { c.Period = 0 }},
		{Field: "min_limit", Edit: func(c *Config) { c.MinLimit = 0.5 }},
		{Field: "max_limit", Edit: func(c *Config) { c.MaxLimit = 0 }},
		{Field: "initial_limit", Edit: func(c *Config) { c.InitialLimit = 1e9 }},
		{Field: "high_probe", Edit: func(c *Config) { c.HighProbe = 1 }},
		{Field: "low_probe", Edit: func(c *Config) { c.LowProbe = math.NaN() }},
		{Field: "min_completions", Edit: func(c *Config) { c.MinCompletions = 0 }},
		{Field: "max_window", Edit: func(c *Config) { c.MaxWindow = time.Millisecond }},
		{Field: "standing_wait", Edit: func(c *Config) { c.StandingWait = time.Second }},
		{Field: "burst_window", Edit: func(c *Config) { c.BurstWindow = -time.Second }},
		{Field: "burst_window", Edit: func(c *Config) { c.BurstWindow = time.Hour }},
		{Field: "tail_pool", Edit: func(c *Config) { c.TailPool = 50 }},
		{Field: "tail_pool", Edit: func(c *Config) { c.TailPool = -1 }},
		{Field: "tail_pool", Edit: func(c *Config) { c.TailPool = 2000000 }},
		{Field: "min_rate", Edit: func(c *Config) { c.MinRate = -1 }},
		{Field: "min_rate", Edit: func(c *Config) { c.MinRate = math.Inf(1) }},
		{Field: "max_reject_fraction", Edit: func(c *Config) { c.MaxRejectFraction = 1.5 }},
		{Field: "max_reject_fraction", Edit: func(c *Config) { c.MaxRejectFraction = -0.1 }},
		{Field: "warmup", Edit: func(c *Config) { c.Warmup = -time.Second }},
		{Field: "max_healthy_latency", Edit: func(c *Config) { c.MaxHealthyLatency = -time.Millisecond }},
		{Field: "knee", Edit: func(c *Config) { c.Knee = "overtake" }},
		{Field: "knee_tolerance", Edit: func(c *Config) { c.KneeTolerance = -time.Millisecond }},
		{Field: "knee_tolerance", Edit: func(c *Config) { c.KneeTolerance = c.SLO }},
	})
	a := newAuto(t, nil)
	if err := a.SetTarget(-time.Second); fielderr.Path(err) != "slo" {
		t.Errorf("SetTarget(-1s) = %v", err)
	}
	if err := a.SetTarget(time.Second); err != nil || a.Target() != time.Second {
		t.Errorf("SetTarget(1s) = %v, target %v", err, a.Target())
	}
}

// R̂99 from steps of 30 samples: the nearest-rank p99 of 30 samples is
// their largest, near the p97, and a running mean of those underestimates
// the service's p99; over the latest steps holding ≥ 56 samples it does
// not.
func TestAutoServiceP99FromStepsOfFewSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const mean, n = 0.010, 30       // exponential service of 10 ms, 30 per step
	truth := -mean * math.Log(0.01) // 46.1 ms
	var ring tailRing
	naive, fixed := math.NaN(), math.NaN()
	var sumNaive, sumFixed float64
	steps := 0
	for i := range 2000 {
		xs := make([]float64, n)
		for j := range xs {
			xs[j] = rng.ExpFloat64() * mean
		}
		slices.Sort(xs)
		p99 := xs[int(math.Ceil(0.99*n))-1]
		naive = ewma(naive, p99, 0.3)
		fixed = ewma(fixed, ring.add(p99, n), 0.3)
		if i >= 100 {
			sumNaive += naive
			sumFixed += fixed
			steps++
		}
	}
	gotNaive, gotFixed := sumNaive/float64(steps), sumFixed/float64(steps)
	t.Logf("true p99 %.1f ms; running mean of per-step p99s %.1f ms; over ≥ 56 samples %.1f ms", truth*1e3, gotNaive*1e3, gotFixed*1e3)
	if gotNaive > 0.9*truth {
		t.Errorf("the per-step estimate %.1f ms is not biased low: the test does not test", gotNaive*1e3)
	}
	if math.Abs(gotFixed-truth) > 0.08*truth {
		t.Errorf("R̂99 averages %.1f ms, want within 8 %% of the true p99 %.1f ms", gotFixed*1e3, truth*1e3)
	}

	// A step with ≥ 56 samples is its own estimate; small steps give the
	// largest p99 of the latest ones that reach 56 samples together.
	var r tailRing
	for _, s := range []struct {
		p99, n, want float64
		why          string
	}{
		{0.05, 200, 0.05, "one step of 200 samples: its own p99"},
		{0.09, 40, 0.09, "a step of 40 after one of 200: the largest of the two"},
		{0.02, 40, 0.09, "two steps of 40: 80 samples"},
		{0.03, 40, 0.03, "the 0.09 step has slid out: the latest two, 80 samples"},
		{0.04, 150, 0.04, "a new step of 150 samples: its own"},
	} {
		if got := r.add(s.p99, s.n); got != s.want {
			t.Errorf("%s: %v, want %v", s.why, got, s.want)
		}
	}
}
