// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// overtakeSteps runs a saturated service of 4 workers (10 ms, 400 req/s)
// whose completions overtake at most 3 earlier requests (Parallel 4),
// with a heavy tail (p99 15 × the median) or none (p99 = the median), the
// backend's share of the time in service share (0: not measured), and
// returns the controller after steps steps.
func overtakeSteps(t *testing.T, knee string, tail, share float64, steps int) *Auto {
	t.Helper()
	cfg := DefaultConfig()
	cfg.SLO, cfg.Knee = 250*time.Millisecond, knee
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inBackend := share // of the l in service
	if share == 0 {
		inBackend = 1
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range steps {
		now = now.Add(cfg.Period)
		l := a.Current().New
		a.Update(now, sluice.Measurements{Elapsed: cfg.Period, Arrivals: 120, Completed: 40,
			InFlight: l, MaxInFlight: l, ServiceSamples: 40, ServiceMean: l / 400,
			ServiceP50: 0.005, ServiceP99: 0.005 * tail, Parallel: math.Min(l*inBackend, 4), BackendShare: share})
	}
	return a
}

// Where the requests spend half their time in service outside the
// backend (BackendShare 0.5: the proxy's own time and the network's),
// the 4 workers are full at 8 in service, and the knee and the limit are
// read there.
func TestAutoKneeFromOvertakesBackendShare(t *testing.T) {
	a := overtakeSteps(t, KneeOvertakes, 15, 0.5, 30)
	if a.Limit() != 8 || a.Estimates()["knee"] != 8 || a.Estimates()["backend_share"] != 0.5 {
		t.Fatalf("L %v, knee %v, share %v; want 8, 8 and 0.5", a.Limit(), a.Estimates()["knee"], a.Estimates()["backend_share"])
	}
}

// A window whose completions overtook at most 3 earlier requests, at a
// limit of 16 and a heavy-tailed service, puts the knee at 4 and the
// limit there; with equal service times (no spread) or knee "probes" the
// overtakes are not read.
func TestAutoKneeFromOvertakes(t *testing.T) {
	a := overtakeSteps(t, KneeOvertakes, 15, 0, 30)
	if a.Limit() != 4 || a.Estimates()["knee"] != 4 {
		t.Fatalf("L %v, knee %v; want 4 and 4", a.Limit(), a.Estimates()["knee"])
	}
	// The limit holds at the knee: the low probe below it is skipped, and
	// the high probe goes no further than the knee + 1.
	now := a.cur.At
	for range 100 {
		l := a.Current().New
		if l > 5 || l < 4 {
			t.Fatalf("window limit %v with the knee at 4", l)
		}
		now = now.Add(a.cfg.Period)
		a.Update(now, sluice.Measurements{Elapsed: a.cfg.Period, Arrivals: 120, Completed: 40,
			InFlight: l, MaxInFlight: l, ServiceSamples: 40, ServiceMean: l / 400,
			ServiceP50: 0.005, ServiceP99: 0.075, Parallel: math.Min(l, 4)})
	}
	if a.Limit() != 4 {
		t.Errorf("L %v after 100 more steps, want 4", a.Limit())
	}
	for _, c := range []struct {
		knee string
		tail float64
	}{{KneeOvertakes, 1}, {KneeProbes, 15}} {
		b := overtakeSteps(t, c.knee, c.tail, 0, 30)
		if b.Limit() < 8 {
			t.Errorf("knee %s, p99 %g × the median: L %v, want the overtakes unread (L ≥ 8)", c.knee, c.tail, b.Limit())
		}
		if _, ok := b.Estimates()["knee"]; ok != (c.knee == KneeOvertakes) {
			t.Errorf("knee %s: estimate knee present %v", c.knee, ok)
		}
	}
}

// A knee read in slots, k/s with the backend's share s a little below 1,
// is fractional (4/0.99 ≈ 4.04): the high probe is held to the rounded
// workers + 1 (5), not ⌈1.25 × 4.04⌉ = 6.
func TestAutoHighProbeFractionalKnee(t *testing.T) {
	a := &Auto{knee: kneeState{w: 4 / 0.99}}
	if hi := a.highProbe(100); hi != 5 {
		t.Errorf("knee %.3f: high probe %v, want 5", a.knee.w, hi)
	}
	a.knee.w = 16
	if hi := a.highProbe(100); hi != 20 {
		t.Errorf("knee 16: high probe %v, want 20 (⌈1.25 × 16⌉)", hi)
	}
	a.knee.w = 0
	if hi := a.highProbe(24); hi != 24 {
		t.Errorf("no knee: high probe %v, want 24", hi)
	}
}

// A window that misses the rare overtake of W − 1 (it read 3 behind 4
// workers) does not put the knee one low: the knee is the largest k of the
// latest three windows; windows that all read 3 do.
func TestAutoKneeMemory(t *testing.T) {
	a := overtakeSteps(t, KneeOvertakes, 15, 0, 30)
	if a.Limit() != 4 {
		t.Fatalf("L %v, want 4", a.Limit())
	}
	now := a.cur.At
	run := func(par float64, steps int) {
		for range steps {
			l := a.Current().New
			now = now.Add(a.cfg.Period)
			a.Update(now, sluice.Measurements{Elapsed: a.cfg.Period, Arrivals: 120, Completed: 40,
				InFlight: l, MaxInFlight: l, ServiceSamples: 40, ServiceMean: l / 400,
				ServiceP50: 0.005, ServiceP99: 0.075, Parallel: math.Min(l, par)})
		}
	}
	// One window's worth of steps (200 completions at 40 a step, after
	// settling) that read 3.
	run(3, 7)
	if a.Limit() != 4 || a.Estimates()["knee"] != 4 {
		t.Fatalf("after one window of 3: L %v knee %v, want 4 and 4", a.Limit(), a.Estimates()["knee"])
	}
	run(3, 60)
	if a.Limit() != 3 || a.Estimates()["knee"] != 3 {
		t.Fatalf("after many windows of 3: L %v knee %v, want 3 and 3", a.Limit(), a.Estimates()["knee"])
	}
}

// At the knee, with a tail that leaves half the SLO (p99 75 ms of 250),
// auto keeps one request on deck inside the service: the decision's limit
// is Ŵ + 1 while L stays Ŵ, and its windows still settle with Ŵ + 1 in
// service. A step whose tail reaches past half the SLO takes the deck
// away at once, before R̂99 (a running mean) gets there; with the knee
// from the probes there is no deck.
func TestAutoOvertakeDeck(t *testing.T) {
	a := overtakeSteps(t, KneeOvertakes, 15, 0, 30)
	now := a.cur.At
	step := func(p99 float64) {
		l := a.Current().New
		now = now.Add(a.cfg.Period)
		a.Update(now, sluice.Measurements{Elapsed: a.cfg.Period, Arrivals: 120, Completed: 40,
			InFlight: l, MaxInFlight: l, ServiceSamples: 40, ServiceMean: l / 400,
			ServiceP50: 0.005, ServiceP99: p99, Parallel: math.Min(l, 4)})
	}
	settled := 0
	for range 40 {
		step(0.075)
		if a.Limit() != 4 {
			t.Fatalf("L %v, want 4", a.Limit())
		}
		if strings.Contains(a.Current().Reason, "settled; measuring") {
			settled++
		}
	}
	if settled < 3 {
		t.Errorf("%d windows settled in 40 steps with one on deck, want ≥ 3", settled)
	}
	for i := 0; a.win.limit != 4; i++ { // a base window, not the high probe at 5
		if i == 20 {
			t.Fatalf("no window at the knee in 20 steps")
		}
		step(0.075)
	}
	if got := a.Current().New; got != 5 || a.Estimates()["deck"] != 1 {
		t.Fatalf("at the knee 4 with p99 75 ms: decision limit %v, deck %v; want 5 and 1", got, a.Estimates()["deck"])
	}
	step(0.2)
	if a.est.rP99 >= 0.125 {
		t.Fatalf("R̂99 %v after one step of 200 ms: the test needs it below half the SLO", a.est.rP99)
	}
	if got := a.Current().New; got > 4 || a.Estimates()["deck"] != 0 {
		t.Errorf("a step's p99 of 200 ms (R̂99 %.3f): decision limit %v, deck %v; want ≤ 4 and 0", a.est.rP99, got, a.Estimates()["deck"])
	}
	b := overtakeSteps(t, KneeProbes, 15, 0, 30)
	if _, ok := b.Estimates()["deck"]; ok || b.Current().New > 1.5*b.Limit() {
		t.Errorf("knee probes: deck estimate present %v, decision %v for L %v", ok, b.Current().New, b.Limit())
	}
}
