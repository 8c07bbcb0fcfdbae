// SPDX-License-Identifier: Apache-2.0

package control

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func p90(class int, p float64) sluice.Measurements {
	return sluice.Measurements{Class: class, Samples: 100, P90RT: p, Completed: 100}
}

// sedaCfg is the paper's AIMD law (no decrease hold-off, no recovery to
// the served rate; track_demand has no effect on measurements without
// admissions), with the default lc_reset and keep_flag_over_target, which
// only matter with several classes (PaperSEDAConfig turns them off too).
func sedaCfg(target time.Duration, initial float64) SEDAConfig {
	c := DefaultSEDAConfig()
	c.Target, c.InitialRate, c.DecreaseHoldoff, c.RecoverToServed = target, initial, false, false
	return c
}

// Target 1 s, α = 0.7, initial rate 100 req/s.
func TestSEDATimeline(t *testing.T) {
	s := build(t, sedaCfg(time.Second, 100), nil, NewSEDA)
	if s.TriggerSamples() != 100 || s.Period() != time.Second {
		t.Fatal("trigger")
	}
	runTimeline(t, s, []step{
		// cur = 2.0 (first sample); err = 1.0 > 0 → 100/1.2 = 83.333333333
		{p90(0, 2.0), 83.333333333, true},
		// cur = 0.7·2 + 0.3·0.2 = 1.46; err 0.46 → 69.444444444
		{p90(0, 0.2), 69.444444444, true},
		// cur = 1.082; err 0.082 → 57.870370370
		{p90(0, 0.2), 57.870370370, true},
		// cur = 0.8174, 0.63218, 0.502526: err in [−0.5, 0] → hold
		{p90(0, 0.2), 57.870370370, true},
		{p90(0, 0.2), 57.870370370, true},
		{p90(0, 0.2), 57.870370370, true},
		// cur = 0.4117682; err = −0.5882318 < −0.5 →
		// + −(−0.5882318 − (−0.1))·2 = +0.9764636 → 58.846833970
		{p90(0, 0.2), 58.846833970, true},
		// no completions: hold
		{sluice.Measurements{}, 58.846833970, false},
	})
}

func TestSEDARateBounds(t *testing.T) {
	s, _ := NewSEDA(sedaCfg(time.Second, 0.06))
	// 0.06/1.2 = 0.05 = rate_min; once more stays at rate_min.
	runTimeline(t, s, []step{{p90(0, 5), 0.05, true}, {p90(0, 5), 0.05, true}})
	s, _ = NewSEDA(sedaCfg(time.Second, 4999.5))
	// cur = 0: err = −1 → +(1 − 0.1)·2 = 1.8 → 5001.3 → clamped to 5000.
	runTimeline(t, s, []step{{p90(0, 0), 5000, true}})
}

// Two classes (0 high, 1 low), target 1 s, initial 100, lc_thresh 3.
func TestSEDAClassesTimeline(t *testing.T) {
	cfg := sedaCfg(time.Second, 100)
	cfg.Classes, cfg.LCThresh = 2, 3
	s := build(t, cfg, nil, NewSEDA)
	check := func(step string, d sluice.Decision, r0, r1 float64) {
		t.Helper()
		if len(d.ClassRates) != 2 {
			t.Fatalf("%s: ClassRates %v", step, d.ClassRates)
		}
		near(t, step+" class 0", d.ClassRates[0], r0)
		near(t, step+" class 1", d.ClassRates[1], r1)
	}
	// High class over target (cur 2 s): low class ÷ adjlo_d 10 → 10; high keeps 100.
	check("1", s.Update(at(1), p90(0, 2)), 100, 10)
	// Low class well under target (err −0.9) but flagged: no increase this run.
	d := s.Update(at(2), p90(1, 0.1))
	check("2", d, 100, 10)
	if d.Class != 1 || d.New != 10 {
		t.Fatalf("decision for class 1: %+v", d)
	}
	// Flag consumed: cur = 0.1, err −0.9 → +(0.9 − 0.1)·2 = 1.6 → 11.6.
	check("3", s.Update(at(3), p90(1, 0.1)), 100, 11.6)
	// High class stays over target (cur 2): low ÷10 → 1.16 → 0.116 → 0.05 (rate_min).
	check("4", s.Update(at(4), p90(0, 2)), 100, 1.16)
	check("5", s.Update(at(5), p90(0, 2)), 100, 0.116)
	check("6", s.Update(at(6), p90(0, 2)), 100, 0.05)
	// All lower classes at rate_min: lc 1, 2 keep the high rate; lc 3 ≥ 3 → 100/1.2.
	check("7", s.Update(at(7), p90(0, 2)), 100, 0.05)
	check("8", s.Update(at(8), p90(0, 2)), 100, 0.05)
	check("9", s.Update(at(9), p90(0, 2)), 83.333333333, 0.05)
	// Still over: lc 4 ≥ 3 → ÷1.2 again.
	check("10", s.Update(at(10), p90(0, 2)), 69.444444444, 0.05)
	// High class back under target (cur = 0.7·2 + 0.3·0 = 1.4 is still over;
	// feed zeros until under): cur 1.4 → ÷1.2; cur 0.98 → within band, lc reset.
	check("11", s.Update(at(11), p90(0, 0)), 57.870370370, 0.05)
	check("12", s.Update(at(12), p90(0, 0)), 57.870370370, 0.05)
	// Over again (cur = 0.686 + 0.3·5 = 2.186): lower at min, lc restarted at 1 → no cut.
	check("13", s.Update(at(13), p90(0, 5)), 57.870370370, 0.05)
}

// Per-class targets: class 1 has target 4 s, so a p90 of 2 s is under
// target for it (err −0.5, within band) but over for class 0 (target 1 s).
func TestSEDAClassTargets(t *testing.T) {
	cfg := sedaCfg(time.Second, 100)
	cfg.ClassTargets = []time.Duration{time.Second, 4 * time.Second}
	s := build(t, cfg, nil, NewSEDA)
	d := s.Update(at(1), p90(1, 2))
	if d.New != 100 {
		t.Fatalf("class 1 at half its target should hold, got %v (%s)", d.New, d.Reason)
	}
	d = s.Update(at(2), p90(0, 2))
	near(t, "class 1 cut", d.ClassRates[1], 10)
}

// Degradation: target 1 s, α = 0 (cur = samp), q_min 0.1, quality ÷1.2 per
// run over target: 1 → 0.8333 → … → 1/1.2^12 = 0.1122 → 0.1 after 13 runs.
func TestDegraderTimeline(t *testing.T) {
	cfg := sedaCfg(time.Second, 100)
	cfg.Alpha = 0
	cfg.Degrade.Enabled = true
	c, err := cfg.New()
	if err != nil {
		t.Fatal(err)
	}
	g := c.(*Degrader)
	if !g.Current().GateOff || g.Current().Quality != 1 {
		t.Fatalf("initial: %+v", g.Current())
	}
	over := sluice.Measurements{Elapsed: time.Second, Samples: 100, P90RT: 2, Completed: 50}
	var d sluice.Decision
	q := 1.0
	for i := 1; i <= 13; i++ {
		d = g.Update(at(i), over)
		q = max(q/1.2, 0.1)
		near(t, "quality run "+d.Reason, d.Quality, q)
		if !d.GateOff {
			t.Fatalf("run %d: gate on before q_min", i)
		}
	}
	near(t, "q_min reached", d.Quality, 0.1)
	// At q_min, still over target: admission on at throughput 50/s ÷ 1.2.
	d = g.Update(at(14), over)
	if d.GateOff {
		t.Fatalf("admission not re-enabled: %s", d.Reason)
	}
	near(t, "rate on", d.New, 41.666666667)
	// Over again: SEDA decrease 41.666666667/1.2 = 34.722222222.
	d = g.Update(at(15), over)
	near(t, "rate cut", d.New, 34.722222222)
	// Well under target but still rejecting: SEDA increase
	// −(−0.8 + 0.1)·2 = +1.4 → 36.122222222; quality stays at q_min.
	d = g.Update(at(16), sluice.Measurements{Elapsed: time.Second, Samples: 100, P90RT: 0.2, Rejected: 5})
	near(t, "rate up", d.New, 36.122222222)
	near(t, "quality held", d.Quality, 0.1)
	// Well under target, nothing rejected: admission off.
	d = g.Update(at(17), sluice.Measurements{Elapsed: time.Second, Samples: 100, P90RT: 0.2})
	if !d.GateOff {
		t.Fatalf("admission should be off: %s", d.Reason)
	}
	// Under target (err −0.5 < 0): quality rises slowly, +0.02.
	d = g.Update(at(18), sluice.Measurements{Elapsed: time.Second, Samples: 100, P90RT: 0.5})
	near(t, "quality up", d.Quality, 0.12)
}

// Degradation alone (admission: false) never turns the gate on.
func TestDegraderAlone(t *testing.T) {
	cfg := sedaCfg(time.Second, 100)
	cfg.Degrade.Enabled, cfg.Degrade.Admission = true, false
	g := build(t, cfg, nil, NewDegrader)
	for i := 1; i <= 40; i++ {
		d := g.Update(at(i), sluice.Measurements{Samples: 100, P90RT: 3, Completed: 10})
		if !d.GateOff {
			t.Fatalf("run %d: gate on with admission disabled", i)
		}
	}
	near(t, "q", g.Quality(), 0.1)
}

func admittedP90(class int, p float64, admitted float64) sluice.Measurements {
	return sluice.Measurements{Class: class, Elapsed: time.Second, Samples: 100, P90RT: p, Completed: 100, Admitted: admitted}
}

// track_demand (default): a cut starts from the admitted rate when the
// bucket was not binding; the paper's exact law (track_demand: false)
// divides the idle rate instead.
func TestSEDATrackDemandCut(t *testing.T) {
	// Initial 5000 req/s, 60 admitted in 1 s, p90 2 s over a 1 s target:
	// 60/1.2 = 50; paper-exact: 5000/1.2 = 4166.666666667.
	s, _ := NewSEDA(sedaCfg(time.Second, 5000))
	runTimeline(t, s, []step{{admittedP90(0, 2, 60), 50, true}})
	cfg := sedaCfg(time.Second, 5000)
	cfg.TrackDemand = false
	p, _ := NewSEDA(cfg)
	runTimeline(t, p, []step{{admittedP90(0, 2, 60), 4166.666666667, true}})
	// A binding bucket (admitted ≥ rate) is cut from the rate as the paper says.
	s, _ = NewSEDA(sedaCfg(time.Second, 100))
	runTimeline(t, s, []step{{admittedP90(0, 2, 120), 83.333333333, true}})
}

// track_demand: no increase while admissions stay below 90% of the rate.
func TestSEDATrackDemandIncreaseGuard(t *testing.T) {
	s, _ := NewSEDA(sedaCfg(time.Second, 100))
	runTimeline(t, s, []step{
		// cur = 0.1: err −0.9 < err_i, but 50 < 90 admitted: kept
		{admittedP90(0, 0.1, 50), 100, true},
		// 95 ≥ 90: cur 0.1, +(0.9 − 0.1)·2 = 1.6 → 101.6
		{admittedP90(0, 0.1, 95), 101.6, true},
	})
}

// Lower classes are cut from their own last admitted rate: class 1 admitted
// 40/s at a rate of 100, so the high class's overload sets it to 40/10 = 4.
func TestSEDATrackDemandClasses(t *testing.T) {
	cfg := sedaCfg(time.Second, 100)
	cfg.Classes = 2
	s, _ := NewSEDA(cfg)
	s.Update(at(1), admittedP90(1, 0.5, 40)) // within band: hold, demand 40
	d := s.Update(at(2), admittedP90(0, 2, 100))
	near(t, "class 1", d.ClassRates[1], 4)
	near(t, "class 0", d.ClassRates[0], 100)
}

// decrease_holdoff (default): within cur seconds of a cut, a class over
// target holds while its p90 sample is below the one of the cut. Target 1 s,
// initial 100:
// t=1: samp 3, cur 3 → 100/1.2 = 83.333;
// t=1.5: samp 2.5 < 3 (falling), cur 0.7·3 + 0.3·2.5 = 2.85, 0.5 s < 2.85 s → hold;
// t=1.8: samp 3.2 ≥ 3 (not falling) → cut: 83.333/1.2 = 69.444;
// t=2.0: samp 3.1 < 3.2, within cur → hold;
// t=6: 4 s after the cut, beyond cur ≈ 3.1 s → cut even though falling: 57.870.
func TestSEDADecreaseHoldoff(t *testing.T) {
	cfg := sedaCfg(time.Second, 100)
	cfg.DecreaseHoldoff = true
	s, _ := NewSEDA(cfg)
	ms := func(d time.Duration) time.Time { return at(1).Add(d) }
	d := s.Update(ms(0), p90(0, 3))
	near(t, "first cut", d.New, 83.333333333)
	d = s.Update(ms(500*time.Millisecond), p90(0, 2.5))
	near(t, "held", d.New, 83.333333333)
	if !d.Acted || d.Reason == "" {
		t.Fatalf("hold should be a run with a reason: %+v", d)
	}
	d = s.Update(ms(800*time.Millisecond), p90(0, 3.2))
	near(t, "not falling: cut", d.New, 69.444444444)
	d = s.Update(ms(time.Second), p90(0, 3.1))
	near(t, "falling: held", d.New, 69.444444444)
	d = s.Update(ms(5*time.Second), p90(0, 3.0))
	near(t, "beyond cur: cut", d.New, 57.870370370)
	// Increases are not held: from cur 2.99895, zero samples give cur
	// 2.0993, 1.4695, 1.0286 (over, falling: hold), 0.7200, 0.5040 (band),
	// 0.35282 (err −0.64718 < err_i) → +(0.64718 − 0.1)·2 = +1.09436 →
	// 58.964734, all 10 ms apart, well within cur of the last cut.
	for i := 0; i < 6; i++ {
		d = s.Update(ms(5*time.Second+time.Duration(i+1)*10*time.Millisecond), p90(0, 0))
	}
	near(t, "increase", d.New, 58.964734)

	// A run whose own p90 is within target does not cut, however high the
	// smoothed value: cur 0.7·3 + 0.3·0.5 = 2.25 > 1 s, samp 0.5 s ≤ 1 s.
	s2, _ := NewSEDA(cfg)
	s2.Update(ms(0), p90(0, 3))
	d = s2.Update(ms(10*time.Second), p90(0, 0.5))
	near(t, "lagging cur, no cut", d.New, 83.333333333)
}

// recover_to_served (default): the first increase after a cut of the
// class's own rate goes to 0.9 × the samples per second served since the
// cut. Target 1 s, α 0.7, initial 100 req/s:
// t=1: samp 3 → cut to 83.333 (servedFor starts at 0);
// t=2, t=3: the backlog drains at the capacity, 150 samples per 1 s at
// p90 2.0, 1.5 (falling: held), served 300 over 2 s;
// t=3.25: 25 samples in 0.25 s at p90 0.05: cur 0.7·(0.7·(0.7·3 + 0.3·2) +
// 0.3·1.5) + 0.3·0.05 = 1.6530 (over, but this run's p90 is within
// target: no cut); served 325 over 2.25 s;
// then runs of 10 samples per 0.1 s at p90 0.05 until cur < 0.5 (err <
// −0.5): served grows by 100/s, so at that run the increase is
// 0.9 × served/servedFor rather than the additive ≈ +1.2; once.
func TestSEDARecoverToServed(t *testing.T) {
	for _, on := range []bool{true, false} {
		s, m := recoverSEDA(t, on), completions
		now := at(1)
		d := s.Update(now, m(100, 3, time.Second))
		near(t, "cut", d.New, 83.333333333)
		served, span := 0.0, 0.0
		for _, r := range []struct {
			n, p float64
			el   time.Duration
		}{{150, 2.0, time.Second}, {150, 1.5, time.Second}, {25, 0.05, 250 * time.Millisecond}} {
			now = now.Add(r.el)
			served, span = served+r.n, span+r.el.Seconds()
			d = s.Update(now, m(r.n, r.p, r.el))
			near(t, "held", d.New, 83.333333333)
		}
		var inc sluice.Decision
		for i := 0; i < 20; i++ {
			now = now.Add(100 * time.Millisecond)
			served, span = served+10, span+0.1
			inc = s.Update(now, m(10, 0.05, 100*time.Millisecond))
			if inc.New != inc.Old {
				break
			}
		}
		if on {
			near(t, "recovered", inc.New, 0.9*served/span)
			if inc.New < 0.9*100 {
				t.Fatalf("recovered to %v, want about 0.9 × %v", inc.New, served/span)
			}
		} else if inc.New-inc.Old > 2 {
			t.Fatalf("paper's law: +%v, want an additive step ≤ adj_i·(1 − c_i)", inc.New-inc.Old)
		}
		// Only the first increase after a cut jumps.
		now = now.Add(100 * time.Millisecond)
		next := s.Update(now, m(10, 0.05, 100*time.Millisecond))
		if next.New-next.Old > 2 {
			t.Fatalf("second increase +%v, want additive", next.New-next.Old)
		}
	}
}

// recoverSEDA returns a SEDA controller at target 1 s starting at 100
// req/s, with decrease_holdoff on and recover_to_served on or off.
func recoverSEDA(t *testing.T, recoverToServed bool) *SEDA {
	t.Helper()
	cfg := sedaCfg(time.Second, 100)
	cfg.DecreaseHoldoff, cfg.RecoverToServed = true, recoverToServed
	s := build(t, cfg, nil, NewSEDA)
	return s
}

// completions is a step of n successful completions, all sampled, with
// p90 p seconds, over el.
func completions(n, p float64, el time.Duration) sluice.Measurements {
	return sluice.Measurements{Samples: n, Completed: n, P90RT: p, Elapsed: el}
}

// recover_to_served counts from the first cut of an overload, not the
// last: a second cut while the backlog drains does not restart the count.
// Target 1 s, initial 100: cut at t=1 (83.333, counting starts), cut
// again at t=1.5 after 300 samples in 0.5 s (69.444), then 150 samples
// per 0.5 s at p90 0.05 until cur < 0.5 s (six runs): served 1200 over
// 3.5 s, so the increase goes to 0.9 × 342.857 = 308.571 (counting from
// the second cut would give 0.9 × 300 = 270).
func TestSEDARecoverFromFirstCut(t *testing.T) {
	s, m := recoverSEDA(t, true), completions
	now := at(1)
	near(t, "first cut", s.Update(now, m(100, 3, time.Second)).New, 83.333333333)
	now = now.Add(500 * time.Millisecond)
	near(t, "second cut", s.Update(now, m(300, 3, 500*time.Millisecond)).New, 69.444444444)
	var d sluice.Decision
	for i := 0; i < 6; i++ {
		now = now.Add(500 * time.Millisecond)
		d = s.Update(now, m(150, 0.05, 500*time.Millisecond))
	}
	near(t, "recovered", d.New, 0.9*1200/3.5)
}

// recover_factor: a rate cut to the floor by a stall climbs back
// multiplicatively while the p90 is far below target and the rate binds;
// 0 keeps the paper's additive law.
func TestSEDARecoverFactor(t *testing.T) {
	for _, f := range []float64{0, 1, 2} {
		start := 5.0
		if f == 2 { // the quick start's: from the floor
			start = DefaultSEDAConfig().RateMin
		}
		cfg := DefaultSEDAConfig()
		cfg.Target, cfg.InitialRate, cfg.RateMax = time.Second, start, 1e6
		cfg.DecreaseHoldoff, cfg.RecoverToServed, cfg.RecoverFactor = false, false, f
		s := build(t, cfg, nil, NewSEDA)
		rate := start
		for i := 1; i <= 10; i++ {
			// p90 0.1 s against 1 s (err −0.9 after smoothing settles),
			// the gate binding: everything the rate allows is admitted.
			d := s.Update(at(i), sluice.Measurements{Elapsed: time.Second, Samples: 100, P90RT: 0.1,
				Arrivals: 10 * rate, Admitted: rate, Rejected: 9 * rate, Completed: rate})
			rate = d.New
		}
		if f == 0 && rate > 5+10*1.8+1e-9 {
			t.Errorf("additive law: rate %v after 10 runs, want ≤ 5 + 10 × 1.8", rate)
		}
		if f == 1 && rate < 300 {
			t.Errorf("recover_factor 1: rate %v after 10 runs from 5, want ≥ 300 (×1.5–1.8 per run)", rate)
		}
		if f == 2 && rate < 300 {
			t.Errorf("recover_factor 2: rate %v after 10 runs from rate_min %v, want ≥ 300 (×2–2.6 per run)", rate, start)
		}
	}
	bad := DefaultSEDAConfig()
	bad.Target, bad.RecoverFactor = time.Second, -1
	if FieldOf(bad.Validate()) != "recover_factor" {
		t.Error("negative recover_factor accepted")
	}
}

// drained_reset: after a stall's backlog of 10 s answers, the first run
// whose own p90 is back under err_i increases at once, instead of waiting
// runs for the smoothed p90 to forget the backlog.
func TestSEDADrainedReset(t *testing.T) {
	firstIncrease := func(reset bool) int {
		cfg := DefaultSEDAConfig()
		cfg.Target, cfg.InitialRate, cfg.RateMax = 200*time.Millisecond, 300, 1e6
		cfg.DrainedReset = reset
		s := build(t, cfg, nil, NewSEDA)
		run := func(i int, p90 float64) sluice.Decision {
			return s.Update(at(i), sluice.Measurements{Elapsed: time.Second, Samples: 100, P90RT: p90,
				Arrivals: 300, Admitted: 300, Completed: 100})
		}
		var cut float64
		for i := 1; i <= 3; i++ { // the stall: answers after 10 s, cuts
			cut = run(i, 10).New
		}
		for i := 4; i <= 20; i++ { // the backend is back: 12 ms answers
			if d := run(i, 0.012); d.New > cut {
				if reset && !strings.Contains(d.Reason, "smoothing restarted") {
					t.Errorf("reason %q does not say the smoothing restarted", d.Reason)
				}
				return i - 3
			}
		}
		return -1
	}
	if n := firstIncrease(true); n != 1 {
		t.Errorf("drained_reset: first increase %d runs after the backend's return, want 1", n)
	}
	if n := firstIncrease(false); n < 4 {
		t.Errorf("without drained_reset: first increase %d runs after the return, want ≥ 4 (the paper's smoothing, α 0.7)", n)
	}
}
