// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
)

// The meter counts, at each completion, the requests still in service
// that entered it earlier, and reports the largest count per interval.
func TestOvertakeMeter(t *testing.T) {
	o := newOvertakeMeter(0)
	if v, _ := o.collect(t0); v != 0 {
		t.Fatalf("no completion: %v, want 0", v)
	}
	a, b, c, d := o.begin(t0), o.begin(t0), o.begin(t0), o.begin(t0)
	o.end(a, t0) // in order: overtakes none
	if v, _ := o.collect(t0); v != 1 {
		t.Fatalf("first in, first out: %v, want 1", v)
	}
	o.end(d, t0) // overtakes b and c
	o.end(c, t0) // overtakes b
	if v, _ := o.collect(t0); v != 3 {
		t.Fatalf("the last in left before two earlier ones: %v, want 3", v)
	}
	o.end(b, t0)
	o.end(b, t0) // twice: ignored
	if v, _ := o.collect(t0); v != 1 || len(o.live) != 0 {
		t.Fatalf("last one: %v with %d in service, want 1 and 0", v, len(o.live))
	}
}

// A request takes its place in the order when it is handed to the
// service (Ticket.Sent), not when it was admitted.
func TestOvertakeMeterSent(t *testing.T) {
	o := newOvertakeMeter(0)
	a, b := o.begin(t0), o.begin(t0)
	o.sent(b, t0.Add(time.Millisecond), 0) // b reaches the service first
	o.sent(a, t0.Add(2*time.Millisecond), 0)
	o.end(b, t0.Add(3*time.Millisecond)) // first in, first out
	if v, _ := o.collect(t0.Add(3 * time.Millisecond)); v != 1 {
		t.Fatalf("b sent first, left first: %v, want 1 (no overtake)", v)
	}
	o.sent(b, t0.Add(4*time.Millisecond), 0) // left already: nothing
	o.end(a, t0.Add(5*time.Millisecond))
	if v, _ := o.collect(t0.Add(5 * time.Millisecond)); v != 1 || len(o.live) != 0 {
		t.Fatalf("a: %v with %d in service, want 1 and 0", v, len(o.live))
	}
}

// Requests are counted among those sent to the same server: one sent to
// a fast server overtakes a slow one's whatever their workers, and the
// reading is the sum over the servers of their largest count plus one.
func TestOvertakeMeterServers(t *testing.T) {
	ms := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }
	o := newOvertakeMeter(0)
	// Server 1 is slow: a and b, sent first, are still in service when
	// server 0's c, d and e leave, in order.
	a, b, c, d, e := o.begin(ms(0)), o.begin(ms(0)), o.begin(ms(0)), o.begin(ms(0)), o.begin(ms(0))
	o.sent(a, ms(1), 1)
	o.sent(b, ms(2), 1)
	o.sent(c, ms(3), 0)
	o.sent(d, ms(4), 0)
	o.sent(e, ms(5), 0)
	o.end(c, ms(6))
	o.end(e, ms(7)) // overtakes d, not a or b
	if v, _ := o.collect(ms(7)); v != 2 {
		t.Fatalf("server 0 alone: %v, want 2 (e overtook d only)", v)
	}
	o.end(d, ms(8))
	o.end(b, ms(9)) // overtakes a: server 1's count 1
	if v, _ := o.collect(ms(9)); v != 1+2 {
		t.Fatalf("servers 0 and 1: %v, want 1 + 2", v)
	}
	o.end(a, ms(10))
	o.sent(o.begin(ms(11)), ms(11), -3) // below 0: server 0
	if o.live[0].server != 0 {
		t.Fatalf("server -3 kept as %d, want 0", o.live[0].server)
	}
	if v, _ := o.collect(ms(12)); v != 1 {
		t.Fatalf("a alone: %v, want 1", v)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		f := o.begin(ms(20))
		o.sent(f, ms(20), 1)
		o.end(f, ms(21))
	}); allocs != 0 {
		t.Fatalf("%v allocations per request, want 0", allocs)
	}
}

// The backend's share of the time in service: from the write to the
// answer's first byte, over admission to completion, for the requests
// that reported both.
func TestOvertakeMeterBackendShare(t *testing.T) {
	ms := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }
	o := newOvertakeMeter(0)
	a, b, c := o.begin(ms(0)), o.begin(ms(0)), o.begin(ms(0))
	o.sent(a, ms(1), 0)
	o.answered(a, ms(5)) // 4 ms in the backend of 10 in service
	o.end(a, ms(10))
	o.sent(b, ms(2), 0)
	o.answered(b, ms(8)) // 6 of 10
	o.answered(b, ms(9)) // the first byte counts
	o.end(b, ms(10))
	o.answered(c, ms(3)) // never sent: no sample
	o.end(c, ms(10))
	if _, s := o.collect(ms(10)); math.Abs(s-0.5) > 1e-9 {
		t.Fatalf("share %v, want (4+6)/(10+10) = 0.5", s)
	}
	if _, s := o.collect(ms(20)); s != 0 {
		t.Fatalf("no completion: share %v, want 0 (unknown)", s)
	}
}

// With a tolerance τ, a request is not overtaken by one that entered
// service less than τ/2 after it, nor by one that left less than τ
// before it; a count is final τ after its request left; and τ is at most
// half the mean time between completions.
func TestOvertakeMeterTolerance(t *testing.T) {
	ms := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }
	o := newOvertakeMeter(2 * time.Millisecond)
	a := o.begin(ms(0))
	b := o.begin(ms(0.5)) // less than τ/2 after a: their order is not known
	c := o.begin(ms(5))
	o.end(b, ms(6)) // a entered 0.5 ms before b: not overtaken
	o.end(c, ms(7)) // overtakes a (b left): 1, unless a leaves by 9 ms
	if v, _ := o.collect(ms(7)); v != 0 {
		t.Fatalf("before any count is final (b's at 8 ms): %v, want 0", v)
	}
	o.end(a, ms(8.5)) // within τ after c: c did not overtake it
	if v, _ := o.collect(ms(20)); v != 1 {
		t.Fatalf("a left 1.5 ms after c: %v, want 1 (no overtake)", v)
	}
	d, e := o.begin(ms(20)), o.begin(ms(30))
	o.end(e, ms(31)) // overtakes d, which stays 4 ms more
	o.end(d, ms(35))
	if v, _ := o.collect(ms(40)); v != 2 {
		t.Fatalf("d left 4 ms after e: %v, want 2", v)
	}
	// 1,000 completions a second: τ = min(2 ms, 0.5 ms) from the next
	// interval on.
	o = newOvertakeMeter(2 * time.Millisecond)
	o.collect(ms(0))
	for i := range 100 {
		o.end(o.begin(ms(float64(i))), ms(float64(i)+0.5))
	}
	o.collect(ms(100))
	if o.tol != 500*time.Microsecond {
		t.Fatalf("τ at 1,000 completions/s: %v, want 500µs", o.tol)
	}
	f := o.begin(ms(200))
	g := o.begin(ms(201)) // 1 ms > τ/2 after f
	o.end(g, ms(202))
	o.end(f, ms(203)) // 1 ms > τ after g
	if v, _ := o.collect(ms(210)); v != 2 {
		t.Fatalf("with τ 0.5 ms: %v, want 2 (g overtook f)", v)
	}
}

// Only a controller that reads Parallel costs the stage its meter.
func TestOvertakeMeterOnlyWhenNeeded(t *testing.T) {
	for _, tc := range []struct {
		cfg  control.Config
		want bool
	}{
		{&auto.Config{SLO: time.Second, Period: 100 * time.Millisecond, InitialLimit: 4, MinLimit: 1, MaxLimit: 100,
			HighProbe: 1.5, LowProbe: 1.5, MinCompletions: 10, MaxWindow: time.Second, Knee: auto.KneeOvertakes, KneeTolerance: 3 * time.Millisecond}, true},
		{&auto.Config{SLO: time.Second, Period: 100 * time.Millisecond, InitialLimit: 4, MinLimit: 1, MaxLimit: 100,
			HighProbe: 1.5, LowProbe: 1.5, MinCompletions: 10, MaxWindow: time.Second}, false},
		{&auto.Config{SLO: time.Second, Period: 100 * time.Millisecond, InitialLimit: 4, MinLimit: 1, MaxLimit: 100,
			HighProbe: 1.5, LowProbe: 1.5, MinCompletions: 10, MaxWindow: time.Second, Knee: auto.KneeProbes}, false},
		{&control.StaticConcurrencyConfig{Limit: 4, Period: time.Second}, false},
	} {
		st := newStage(t, Options{Name: "s", Controller: tc.cfg}, t0)
		if got := st.otk != nil; got != tc.want {
			t.Errorf("%T %+v: meter %v, want %v", tc.cfg, tc.cfg, got, tc.want)
		}
		if ac, ok := tc.cfg.(*auto.Config); ok && st.otk != nil && st.otk.tolMax != ac.KneeTolerance {
			t.Errorf("meter tolerance %v, want knee_tolerance %v", st.otk.tolMax, ac.KneeTolerance)
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
		for i, knee := range []string{auto.KneeProbes, auto.KneeOvertakes} {
			cfg := auto.DefaultConfig()
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
func lognormalSim(t *testing.T, cfg auto.Config, seed, stream uint64) *tenantSim {
	t.Helper()
	c := guardSim(t, cfg, 4, 20*time.Millisecond, 600)
	c.rng = rand.New(rand.NewPCG(seed, stream))
	const sigma = 1.5
	c.draw = func(r *rand.Rand) float64 { return math.Exp(sigma*r.NormFloat64() - sigma*sigma/2) }
	c.run(c.now.Add(10 * time.Second))
	c.reset()
	return c
}
