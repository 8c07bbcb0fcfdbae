// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// g2win is a one-second step that closes a default window: n samples of
// mean service time mean (seconds) and a peak of inflight in service.
func g2win(mean float64, inflight float64) sluice.Measurements {
	return sluice.Measurements{Elapsed: time.Second, ServiceSamples: 20, ServiceMean: mean, ServiceMin: mean,
		ServiceP50: mean, ServiceP90: mean, ServiceP99: mean, InFlight: inflight / 2, MaxInFlight: inflight}
}

func newGradient2(t *testing.T, edit func(*Gradient2Config)) *Gradient2 {
	t.Helper()
	return build(t, DefaultGradient2Config(), edit, NewGradient2)
}

// Hand-computed from Gradient2Limit with the defaults (limit 20 in
// [20, 200], smoothing 0.2, queue 4, tolerance 1.5); every step is one
// 1 s window.
func TestGradient2Timeline(t *testing.T) {
	g := newGradient2(t, nil)
	if d := g.Current(); d.New != 20 || d.MaxWait != -1 || d.Kind != sluice.KindConcurrency {
		t.Fatalf("initial decision %+v", d)
	}
	runTimeline(t, g, []step{
		// longRtt = 0.1 (warm-up mean); gradient = min(1, 1.5) = 1;
		// newLimit = 20 + 4 = 24; limit = 0.8·20 + 0.2·24 = 20.8:
		// flat latency grows the limit by smoothing·queue_size.
		{g2win(0.1, 20), 20.8, true},
		{g2win(0.1, 20), 21.6, true},
		// Latency jump: longRtt = (0.1+0.1+1)/3 = 0.4; gradient = 1.5·0.4/1 = 0.6;
		// newLimit = 21.6·0.6 + 4 = 16.96; limit = 0.8·21.6 + 0.2·16.96 = 20.672.
		{g2win(1.0, 20), 20.672, true},
		// App-limited: peak 10 < 20.672/2 = 10.336: hold.
		{g2win(0.1, 10), 20.672, false},
		// longRtt = (0.1+0.1+1+0.1+5)/5 = 1.26 (the previous drain is lost in
		// warm-up, as in ExpAvgMeasurement); gradient = 1.5·1.26/5 = 0.378 → 0.5;
		// newLimit = 20.672·0.5 + 4 = 14.336; 0.8·20.672 + 0.2·14.336 = 19.4048 → min_limit 20.
		{g2win(5.0, 30), 20, true},
	})
	near(t, "longRtt", g.LongRTT(), 1.26)
}

// With smoothing 1 the gradient's floor of 0.5 shows directly: a latency
// jump can at most halve the limit (then add queue_size).
func TestGradient2ShrinksAtMostHalf(t *testing.T) {
	g := newGradient2(t, func(c *Gradient2Config) { c.InitialLimit, c.MinLimit, c.Smoothing = 40, 1, 1 })
	var steps []step
	for i := 1; i <= 10; i++ {
		// Flat: limit + 4 per window.
		steps = append(steps, step{g2win(0.1, 200), 40 + 4*float64(i), true})
	}
	steps = append(steps,
		// longRtt = 0.1·(1 − 2/601) + 10·2/601 = 0.132945; gradient = 1.5·0.132945/10 = 0.0199 → 0.5:
		// 80·0.5 + 4 = 44.
		step{g2win(10, 200), 44, true},
		// 44·0.5 + 4 = 26.
		step{g2win(10, 200), 26, true},
	)
	runTimeline(t, g, steps)
	near(t, "longRtt", g.LongRTT(), 0.165780549)
}

// After the warm-up, a longRtt more than twice the window's RTT drains by
// 0.95 per window (the Go port's 0.9 would give 0.8973 and 0.8049 here).
func TestGradient2LongRTTDrain(t *testing.T) {
	g := newGradient2(t, nil)
	for i := 1; i <= 10; i++ {
		g.Update(at(i), g2win(1.0, 100))
	}
	near(t, "warm-up mean", g.LongRTT(), 1.0)
	// longRtt = 1·(1−α) + 0.1·α = 0.997005 with α = 2/601; 9.97 > 2 → ×0.95.
	d := g.Update(at(11), g2win(0.1, 100))
	near(t, "after one drain", g.LongRTT(), 0.947154742)
	if !strings.Contains(d.Reason, "drained") {
		t.Fatalf("reason does not mention the drain: %s", d.Reason)
	}
	// 0.947155·(1−α) + 0.1·α = 0.944336, ×0.95.
	g.Update(at(12), g2win(0.1, 100))
	near(t, "after two drains", g.LongRTT(), 0.897118812)
}

// The limit stays within [min_limit, max_concurrency].
func TestGradient2MaxClamp(t *testing.T) {
	g := newGradient2(t, func(c *Gradient2Config) { c.InitialLimit = 198 })
	runTimeline(t, g, []step{
		{g2win(0.05, 300), 198.8, true},
		{g2win(0.05, 300), 199.6, true},
		{g2win(0.05, 300), 200, true},
		{g2win(0.05, 300), 200, true},
	})
}

// A window closes only when it is both 1 s long and holds 10 samples:
// thin steps accumulate (WindowedLimit would discard them) and the window's
// RTT is the sample-weighted mean of its steps.
func TestGradient2WindowAccumulates(t *testing.T) {
	thin := func(mean float64) sluice.Measurements {
		return sluice.Measurements{Elapsed: time.Second, ServiceSamples: 4, ServiceMean: mean, ServiceMin: mean, MaxInFlight: 22}
	}
	g := newGradient2(t, nil)
	runTimeline(t, g, []step{
		{thin(0.01), 20, false}, // 4 of 10
		{thin(0.02), 20, false}, // 8 of 10
		{thin(0.04), 20.8, true},
	})
	near(t, "window mean", g.LongRTT(), (0.01+0.02+0.04)/3)

	// Ten 100 ms steps of 3 samples make one 1 s window.
	g = newGradient2(t, nil)
	for i := 1; i <= 10; i++ {
		d := g.Update(t0.Add(time.Duration(i)*100*time.Millisecond), sluice.Measurements{
			Elapsed: 100 * time.Millisecond, ServiceSamples: 3, ServiceMean: 0.02, ServiceMin: 0.015, MaxInFlight: 25})
		if d.Acted != (i == 10) {
			t.Fatalf("step %d: acted %v (%s)", i, d.Acted, d.Reason)
		}
	}
}

// A step whose mean service time is under min_rtt_threshold (100 µs)
// gives no samples; its peak in flight still counts.
func TestGradient2RTTThreshold(t *testing.T) {
	g := newGradient2(t, nil)
	d := g.Update(at(1), sluice.Measurements{Elapsed: time.Second, ServiceSamples: 100, ServiceMean: 50e-6, ServiceMin: 10e-6, MaxInFlight: 30})
	if d.Acted || !strings.Contains(d.Reason, "discarded") {
		t.Fatalf("fast step was used: %+v", d)
	}
	d = g.Update(at(2), sluice.Measurements{Elapsed: time.Second, ServiceSamples: 12, ServiceMean: 0.01, ServiceMin: 0.008, MaxInFlight: 5})
	if !d.Acted {
		t.Fatalf("window did not close: %s", d.Reason)
	}
	near(t, "longRtt ignores the fast step", g.LongRTT(), 0.01)
	near(t, "peak 30 from the fast step keeps it from app-limited", d.New, 20.8)
}

// The next window lasts 2 × the previous window's smallest service time,
// clamped to [min_window_time, max_window_time].
func TestGradient2WindowLength(t *testing.T) {
	g := newGradient2(t, func(c *Gradient2Config) { c.MinWindowTime, c.MaxWindowTime = 200*time.Millisecond, 2*time.Second })
	m := sluice.Measurements{Elapsed: 100 * time.Millisecond, ServiceSamples: 10, ServiceMean: 0.5, ServiceMin: 0.4, MaxInFlight: 20}
	var acted []int
	for i := 1; i <= 12; i++ {
		if g.Update(t0.Add(time.Duration(i)*100*time.Millisecond), m).Acted {
			acted = append(acted, i)
		}
	}
	// First window 200 ms (steps 1–2), then 2·0.4 s = 800 ms (steps 3–10).
	if fmt.Sprint(acted) != "[2 10]" {
		t.Fatalf("windows closed at steps %v, want [2 10]", acted)
	}
}

// With equal history, a higher window RTT never gives a higher limit.
func TestGradient2MonotoneInLatency(t *testing.T) {
	for _, base := range []float64{0.01, 0.1, 1} {
		prev := 1e9
		for _, x := range []float64{0.5, 1, 1.5, 2, 4, 8} {
			g := newGradient2(t, func(c *Gradient2Config) { c.MinLimit = 1 })
			for i := 1; i <= 15; i++ {
				g.Update(at(i), g2win(base, 100))
			}
			d := g.Update(at(16), g2win(base*x, 100))
			if d.New > prev+1e-9 {
				t.Fatalf("base %v: RTT ×%v gave limit %v > %v", base, x, d.New, prev)
			}
			prev = d.New
		}
	}
}

func TestGradient2ValidateNamesField(t *testing.T) {
	checkFieldErrors(t, DefaultGradient2Config, []fieldCase[Gradient2Config]{
		{Field: "period", Edit: func(c *Gradient2Config) { c.Period = 0 }},
		{Field: "min_limit", Edit: func(c *Gradient2Config) { c.MinLimit = 0 }},
		{Field: "max_concurrency", Edit: func(c *Gradient2Config) { c.MaxConcurrency = 10 }},
		{Field: "initial_limit", Edit: func(c *Gradient2Config) { c.InitialLimit = 300 }},
		{Field: "smoothing", Edit: func(c *Gradient2Config) { c.Smoothing = 0 }},
		{Field: "queue_size", Edit: func(c *Gradient2Config) { c.QueueSize = -1 }},
		{Field: "long_window", Edit: func(c *Gradient2Config) { c.LongWindow = 0 }},
		{Field: "rtt_tolerance", Edit: func(c *Gradient2Config) { c.RTTTolerance = 0.9 }},
		{Field: "min_window_time", Edit: func(c *Gradient2Config) { c.MinWindowTime = 50 * time.Millisecond }},
		{Field: "max_window_time", Edit: func(c *Gradient2Config) { c.MaxWindowTime = 500 * time.Millisecond }},
		{Field: "window_size", Edit: func(c *Gradient2Config) { c.WindowSize = 5 }},
		{Field: "min_rtt_threshold", Edit: func(c *Gradient2Config) { c.MinRTTThreshold = -1 }},
	})
}

func FuzzGradient2(f *testing.F) { fuzzController(f, "gradient2") }

// A service whose latency stays flat lets Gradient2 grow its limit by
// smoothing·queue_size = 0.8 per 1 s window; the stage admits ⌊limit⌋.
func ExampleGradient2() {
	c, err := NewGradient2(DefaultGradient2Config())
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := sluice.Measurements{Elapsed: time.Second, ServiceSamples: 200, ServiceMean: 0.02, ServiceMin: 0.01, MaxInFlight: 18}
	d := c.Update(now, m)
	fmt.Println(d.New, d.Kind.Unit())
	fmt.Println(d.Reason)
	// Output:
	// 20.8 requests
	// window mean 20ms over 200 samples, longRtt 20ms, max in flight 18: gradient 1.000, new estimate 20·1.000 + 4 = 24, limit 20 → 20.8 (⌊limit⌋ 20)
}
