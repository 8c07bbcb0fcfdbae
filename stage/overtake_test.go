package stage

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
)

// The meter counts, at each completion, the requests still in service
// that entered it earlier, and reports the largest count per interval.
func TestOvertakeMeter(t *testing.T) {
	o := newOvertakeMeter()
	if v := o.collect(); v != 0 {
		t.Fatalf("no completion: %v, want 0", v)
	}
	a, b, c, d := o.begin(), o.begin(), o.begin(), o.begin()
	o.end(a) // in order: overtakes none
	if v := o.collect(); v != 1 {
		t.Fatalf("first in, first out: %v, want 1", v)
	}
	o.end(d) // overtakes b and c
	o.end(c) // overtakes b
	if v := o.collect(); v != 3 {
		t.Fatalf("the last in left before two earlier ones: %v, want 3", v)
	}
	o.end(b)
	o.end(b) // twice: ignored
	if v := o.collect(); v != 1 || len(o.live) != 0 {
		t.Fatalf("last one: %v with %d in service, want 1 and 0", v, len(o.live))
	}
}

// Only a controller that reads Parallel costs the stage its meter.
func TestOvertakeMeterOnlyWhenNeeded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		cfg  control.Config
		want bool
	}{
		{&control.AutoConfig{SLO: time.Second, Period: 100 * time.Millisecond, InitialLimit: 4, MinLimit: 1, MaxLimit: 100,
			HighProbe: 1.5, LowProbe: 1.5, MinCompletions: 10, MaxWindow: time.Second, Knee: control.KneeOvertakes}, true},
		{&control.AutoConfig{SLO: time.Second, Period: 100 * time.Millisecond, InitialLimit: 4, MinLimit: 1, MaxLimit: 100,
			HighProbe: 1.5, LowProbe: 1.5, MinCompletions: 10, MaxWindow: time.Second}, false},
		{&control.AutoConfig{SLO: time.Second, Period: 100 * time.Millisecond, InitialLimit: 4, MinLimit: 1, MaxLimit: 100,
			HighProbe: 1.5, LowProbe: 1.5, MinCompletions: 10, MaxWindow: time.Second, Knee: control.KneeProbes}, false},
		{&control.StaticConcurrencyConfig{Limit: 4, Period: time.Second}, false},
	} {
		st, err := New(Options{Name: "s", Controller: tc.cfg}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.otk != nil; got != tc.want {
			t.Errorf("%T %+v: meter %v, want %v", tc.cfg, tc.cfg, got, tc.want)
		}
	}
}

// The knee from overtakes, in virtual time: 4 workers serving their
// queue in order, lognormal service of σ 1.5 and mean 20 ms (200 req/s;
// the service's own p99 213 ms, its median 6.5 ms) offered 3× that, SLO
// 250 ms, from an initial limit of 16, seeds 1–4, measured over 20 s
// after 10 s. With the throughput probes alone (knee "probes") the
// limit stays above the workers and queues requests inside the service;
// with the overtakes it is read in a window and held at the workers: a
// lower admitted p99 in every seed at no cost in throughput.
func TestAutoOvertakeKnee(t *testing.T) {
	const workers = 4
	var served [2]int
	for seed := uint64(1); seed <= 4; seed++ {
		var p99s [2]time.Duration
		var lims [2]float64
		for i, knee := range []string{control.KneeProbes, control.KneeOvertakes} {
			cfg := control.DefaultAutoConfig()
			cfg.SLO, cfg.Knee = 250*time.Millisecond, knee
			c := lognormalSim(t, cfg, seed, 7)
			for range 20 {
				c.run(c.now.Add(time.Second))
				lims[i] += c.auto().Limit() / 20
			}
			rt := slices.Clone(c.rt[0])
			slices.Sort(rt)
			p99s[i] = rt[len(rt)*99/100]
			served[i] += c.ok[0]
			t.Logf("seed %d, knee %s: %.1f req/s, admitted p99 %v, mean limit %.2f", seed, knee, float64(c.ok[0])/20, p99s[i], lims[i])
		}
		if lims[1] > 1.15*workers || lims[1] < 0.9*workers {
			t.Errorf("seed %d: mean limit %.2f with the overtakes, want within [0.9, 1.15] × %d workers", seed, lims[1], workers)
		}
		if p99s[1] >= p99s[0] {
			t.Errorf("seed %d: admitted p99 %v with the overtakes, not below %v with the probes alone", seed, p99s[1], p99s[0])
		}
	}
	if float64(served[1]) < 0.97*float64(served[0]) {
		t.Errorf("%d answers with the overtakes, want ≥ 0.97 × %d with the probes alone", served[1], served[0])
	}
}

// lognormalSim is guardSim behind 4 workers serving their queue in order,
// with lognormal service of σ 1.5 and mean 20 ms (200 req/s) offered 600
// req/s, its draws from the PCG of seed and stream, after 10 s of it and
// a reset of the counts.
func lognormalSim(t *testing.T, cfg control.AutoConfig, seed, stream uint64) *tenantSim {
	t.Helper()
	c := guardSim(t, cfg, 4, 20*time.Millisecond, 600)
	c.rng = rand.New(rand.NewPCG(seed, stream))
	const sigma = 1.5
	c.draw = func(r *rand.Rand) float64 { return math.Exp(sigma*r.NormFloat64() - sigma*sigma/2) }
	c.run(c.now.Add(10 * time.Second))
	c.reset()
	return c
}
