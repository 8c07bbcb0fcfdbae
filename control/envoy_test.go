// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// samp is a step with n service-time samples whose p50 is p50 seconds (p90
// and p99 are 2× and 3× it, so a test can tell which one was read).
func samp(n, p50 float64) sluice.Measurements {
	return sluice.Measurements{Elapsed: 100 * time.Millisecond, ServiceSamples: n, ServiceMean: p50,
		ServiceP50: p50, ServiceP90: 2 * p50, ServiceP99: 3 * p50, ServiceMin: p50 / 2}
}

// envoyStep is one Update of an Envoy timeline: the measurements, then the
// limit, Acted and Fence expected.
type envoyStep struct {
	m            sluice.Measurements
	want         float64
	acted, fence bool
}

// runEnvoy feeds steps 100 ms apart from start and checks each decision.
func runEnvoy(t *testing.T, e *EnvoyGradient, start time.Time, steps []envoyStep) time.Time {
	t.Helper()
	now := start
	for i, s := range steps {
		now = now.Add(100 * time.Millisecond)
		d := e.Update(now, s.m)
		if d.New != s.want || d.Acted != s.acted || d.Fence != s.fence {
			t.Fatalf("step %d: got limit %v acted %v fence %v, want %v %v %v (%s)",
				i+1, d.New, d.Acted, d.Fence, s.want, s.acted, s.fence, d.Reason)
		}
		if d.MaxWait != -1 || d.Kind != sluice.KindConcurrency || d.Old != e.cur.Old {
			t.Fatalf("step %d: decision %+v", i+1, d)
		}
	}
	return now
}

func newEnvoy(t *testing.T, edit func(*EnvoyGradientConfig)) *EnvoyGradient {
	t.Helper()
	return build(t, DefaultEnvoyGradientConfig(), edit, NewEnvoyGradient)
}

// The controller starts inside a minRTT window pinned at probe_concurrency
// with Fence set, waits for request_count samples (asking the runner for
// the rest through TriggerSamples), takes their percentile as minRTT, then
// follows limit = ⌊L′ + √L′⌋ with L′ = limit·clamp(1.25·minRTT/sampleRTT,
// 0.5, 2), clamped to [3, 1000]. Five more intervals at the floor after
// reaching it open a fresh window.
func TestEnvoyTimeline(t *testing.T) {
	e := newEnvoy(t, nil)
	if d := e.Current(); d.New != 3 || !d.Fence || !e.InWindow() || e.TriggerSamples() != 50 {
		t.Fatalf("initial %+v, trigger %d", d, e.TriggerSamples())
	}
	now := runEnvoy(t, e, t0, []envoyStep{
		{samp(20, 0.010), 3, false, false},
	})
	if got := e.TriggerSamples(); got != 30 {
		t.Fatalf("TriggerSamples = %d in the window after 20 samples, want 30", got)
	}
	now = runEnvoy(t, e, now, []envoyStep{
		// 50 samples: minRTT = (20·0.010 + 30·0.020)/50 = 0.016; limit back to 3.
		{samp(30, 0.020), 3, true, false},
	})
	near(t, "minRTT", e.MinRTT(), 0.016)
	if e.InWindow() || e.TriggerSamples() != 0 {
		t.Fatal("window still open")
	}
	now = runEnvoy(t, e, now, []envoyStep{
		{samp(40, 0.016), 5, true, false},  // g 1.25: L′ 3.75, ⌊3.75+1.94⌋ = 5
		{samp(40, 0.016), 8, true, false},  // L′ 6.25 → ⌊8.75⌋
		{samp(40, 0.016), 13, true, false}, // L′ 10 → ⌊13.16⌋
		{samp(40, 0.020), 16, true, false}, // g 1: ⌊13+3.61⌋
		{samp(40, 0.100), 10, true, false}, // g 0.2 → 0.5: L′ 8 → ⌊10.83⌋
		{samp(40, 0.004), 24, true, false}, // g 5 → 2: L′ 20 → ⌊24.47⌋
		{samp(0, nan()), 24, false, false}, // no samples: hold
		// Overload (g 0.5): 15, 10, 7, 5, 4, then 3 = the floor.
		{samp(40, 1), 15, true, false},
		{samp(40, 1), 10, true, false},
		{samp(40, 1), 7, true, false},
		{samp(40, 1), 5, true, false},
		{samp(40, 1), 4, true, false},
		{samp(40, 1), 3, true, false},
		// Kept at the floor: the 5th such interval opens a window.
		{samp(40, 1), 3, true, false},
		{samp(40, 1), 3, true, false},
		{samp(40, 1), 3, true, false},
		{samp(40, 1), 3, true, false},
		{samp(40, 1), 3, true, true},
	})
	if !e.InWindow() || e.TriggerSamples() != 50 {
		t.Fatal("five intervals at the floor did not open a minRTT window")
	}
	runEnvoy(t, e, now, []envoyStep{{samp(50, 0.05), 3, true, false}})
	near(t, "new minRTT", e.MinRTT(), 0.05)
}

// max_concurrency caps ⌊L′ + √L′⌋.
func TestEnvoyMaxClamp(t *testing.T) {
	e := newEnvoy(t, func(c *EnvoyGradientConfig) { c.MaxConcurrency = 20 })
	runEnvoy(t, e, t0, []envoyStep{
		{samp(50, 0.016), 3, true, false},
		{samp(40, 0.016), 5, true, false},
		{samp(40, 0.016), 8, true, false},
		{samp(40, 0.016), 13, true, false},
		{samp(40, 0.016), 20, true, false}, // ⌊16.25 + 4.03⌋ = 20
		{samp(40, 0.008), 20, true, false}, // ⌊26 + 5.1⌋ = 31 → 20
	})
}

// The floor (min_concurrency) and the probe limit are separate: with
// floor 5 and probe 2, the calculated limit never goes below 5, yet a
// window pins 2, and closing it restores the saved limit.
func TestEnvoyFloorIsNotProbe(t *testing.T) {
	e := newEnvoy(t, func(c *EnvoyGradientConfig) { c.MinConcurrency, c.ProbeConcurrency = 5, 2 })
	if e.Current().New != 2 {
		t.Fatalf("first window pinned at %v, want probe 2", e.Current().New)
	}
	runEnvoy(t, e, t0, []envoyStep{
		{samp(50, 0.01), 2, true, false}, // closes: back to the saved 2
		{samp(40, 0.01), 5, true, false}, // ⌊2.5+1.58⌋ = 4 → floor 5
		{samp(40, 1), 5, true, false},    // at the floor: 1
		{samp(40, 1), 5, true, false},    // 2
		{samp(40, 1), 5, true, false},    // 3
		{samp(40, 1), 5, true, false},    // 4
		{samp(40, 1), 2, true, true},     // 5: window, pinned at min(5, 2)
		{samp(50, 0.01), 5, true, false}, // closes: back to 5
	})
}

// A window pins min(limit, probe_concurrency): it never raises the limit
// (Envoy PR 46602). Here floor 1, probe 10, limit 4 when the interval
// elapses; that step's samples predate the fence and are dropped.
func TestEnvoyWindowNeverRaisesLimit(t *testing.T) {
	e := newEnvoy(t, func(c *EnvoyGradientConfig) { c.MinConcurrency, c.ProbeConcurrency = 1, 10 })
	runEnvoy(t, e, t0, []envoyStep{
		{samp(50, 0.01), 10, true, false},
		{samp(40, 1), 7, true, false},
		{samp(40, 1), 5, true, false},
		{samp(40, 1), 4, true, false},
	})
	next := e.NextWindow()
	if d := e.Update(next.Add(-time.Nanosecond), samp(40, 0.0125)); d.Fence || d.New != 6 { // g 1: ⌊4+2⌋
		t.Fatalf("before the interval: %+v", d)
	}
	d := e.Update(next, samp(100, 0.01))
	if !d.Fence || !d.Acted || d.New != 6 || !e.InWindow() || e.TriggerSamples() != 50 {
		t.Fatalf("at the interval: %+v, trigger %d", d, e.TriggerSamples())
	}
}

// The next window starts min_rtt_calc_interval plus a jitter in
// [0, 15 % of it) after a window closes, drawn from the seeded source:
// the same seed gives the same schedule, different seeds spread it.
func TestEnvoyJitterSeeded(t *testing.T) {
	schedule := func(seed uint64) []time.Duration {
		e := newEnvoy(t, func(c *EnvoyGradientConfig) { c.Seed = seed })
		now := t0
		var out []time.Duration
		for i := 0; i < 5; i++ {
			now = now.Add(100 * time.Millisecond)
			e.Update(now, samp(50, 0.01)) // closes the window
			out = append(out, e.NextWindow().Sub(now))
			now = e.NextWindow()
			e.Update(now, samp(0, nan())) // opens the next
		}
		return out
	}
	distinct := map[time.Duration]bool{}
	for seed := uint64(0); seed < 20; seed++ {
		a, b := schedule(seed), schedule(seed)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("seed %d: schedules differ: %v vs %v", seed, a, b)
		}
		for _, d := range a {
			if d < 60*time.Second || d >= 69*time.Second {
				t.Fatalf("seed %d: next window after %s, want within [60s, 69s)", seed, d)
			}
			distinct[d] = true
		}
	}
	if len(distinct) < 90 {
		t.Fatalf("only %d distinct delays in 100 draws", len(distinct))
	}
	e := newEnvoy(t, func(c *EnvoyGradientConfig) { c.Jitter = 0 })
	e.Update(t0, samp(50, 0.01))
	if got := e.NextWindow().Sub(t0); got != 60*time.Second {
		t.Fatalf("no jitter: next window after %s, want 60s", got)
	}
}

// percentile selects which of the runner's percentiles summarises samples.
func TestEnvoyPercentile(t *testing.T) {
	for _, tc := range []struct {
		p    int
		want float64
	}{{50, 0.01}, {90, 0.02}, {99, 0.03}} {
		e := newEnvoy(t, func(c *EnvoyGradientConfig) { c.Percentile = tc.p })
		d := e.Update(t0, samp(60, 0.01))
		near(t, fmt.Sprintf("p%d minRTT", tc.p), e.MinRTT(), tc.want)
		if !strings.Contains(d.Reason, fmt.Sprintf("p%d", tc.p)) {
			t.Fatalf("reason does not name p%d: %s", tc.p, d.Reason)
		}
	}
}

// With equal history, a higher sample RTT never gives a higher limit.
func TestEnvoyMonotoneInLatency(t *testing.T) {
	prev := 1e9
	for _, p := range []float64{0.001, 0.005, 0.01, 0.0125, 0.02, 0.05, 1} {
		e := newEnvoy(t, nil)
		now := runEnvoy(t, e, t0, []envoyStep{{samp(50, 0.01), 3, true, false}})
		for i := 0; i < 6; i++ {
			now = now.Add(100 * time.Millisecond)
			e.Update(now, samp(40, 0.01))
		}
		d := e.Update(now.Add(100*time.Millisecond), samp(40, p))
		if d.New > prev {
			t.Fatalf("sample RTT %v gave limit %v > %v", p, d.New, prev)
		}
		prev = d.New
	}
}

func TestEnvoyValidateNamesField(t *testing.T) {
	checkFieldErrors(t, DefaultEnvoyGradientConfig, []fieldCase[EnvoyGradientConfig]{
		{Field: "concurrency_update_interval", Edit: func(c *EnvoyGradientConfig) { c.ConcurrencyUpdateInterval = 0 }},
		{Field: "min_rtt_calc_interval", Edit: func(c *EnvoyGradientConfig) { c.MinRTTCalcInterval = time.Microsecond }},
		{Field: "request_count", Edit: func(c *EnvoyGradientConfig) { c.RequestCount = 0 }},
		{Field: "jitter", Edit: func(c *EnvoyGradientConfig) { c.Jitter = 150 }},
		{Field: "buffer", Edit: func(c *EnvoyGradientConfig) { c.Buffer = -5 }},
		{Field: "percentile", Edit: func(c *EnvoyGradientConfig) { c.Percentile = 95 }},
		{Field: "min_concurrency", Edit: func(c *EnvoyGradientConfig) { c.MinConcurrency = 0 }},
		{Field: "max_concurrency", Edit: func(c *EnvoyGradientConfig) { c.MaxConcurrency = 2 }},
		{Field: "probe_concurrency", Edit: func(c *EnvoyGradientConfig) { c.ProbeConcurrency = 0 }},
		{Field: "probe_concurrency", Edit: func(c *EnvoyGradientConfig) { c.ProbeConcurrency = 2000 }},
	})
}

func FuzzEnvoyGradient(f *testing.F) { fuzzController(f, "envoy-gradient") }

// Envoy's controller starts pinned at 3 in a minRTT window; once 50
// samples are in, minRTT is their p50 and the limit grows by its square
// root while the sampled p50 stays within the 25 % buffer.
func ExampleEnvoyGradient() {
	c, err := NewEnvoyGradient(DefaultEnvoyGradientConfig())
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Current().New, c.Current().Fence, c.TriggerSamples())
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := sluice.Measurements{Elapsed: 80 * time.Millisecond, ServiceSamples: 50, ServiceP50: 0.010}
	fmt.Println(c.Update(now, m).Reason)
	m = sluice.Measurements{Elapsed: 100 * time.Millisecond, ServiceSamples: 120, ServiceP50: 0.011}
	fmt.Println(c.Update(now.Add(100*time.Millisecond), m).Reason)
	// Output:
	// 3 true 50
	// minRTT window closed: p50 10ms over 50 samples; limit 3 → 3; next window in 1m2.317s
	// sample p50 11ms over 120, minRTT 10ms+25%: gradient 1.136, L′ 3.409, limit 3 → ⌊L′+√L′⌋ = 5
}
