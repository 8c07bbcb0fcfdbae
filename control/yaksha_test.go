// SPDX-License-Identifier: Apache-2.0

package control

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func rt(mean float64) sluice.Measurements {
	return sluice.Measurements{Samples: 50, MeanRT: mean, Completed: 50}
}

// Static design, Tref = 150 ms, λ0 = 50/s, h = 1 s, no smoothing:
// Kg = 50·0.15² = 1.125; Kp = 1/(√2·1.125) = 0.628539361;
// Ki = 0.1·(0.628539361 + 1/1.125) = 0.151742825;
// A = Kp + Ki/2 = 0.704410774; B = Kp − Ki/2 = 0.552667949.
func TestYakshaStaticTimeline(t *testing.T) {
	cfg := DefaultYakshaConfig()
	cfg.Tref, cfg.Lambda0, cfg.SelfTuning, cfg.Smoothing = 150*time.Millisecond, 50, false, 0
	y := build(t, cfg, nil, NewYaksha)
	g := y.Gains()
	near(t, "A", g.A, 0.704410774)
	near(t, "B", g.B, 0.552667949)
	runTimeline(t, y, []step{
		// T(−1) = Tref: pd = 0 + A·0.15 − B·0 = 0.105661616
		{rt(0.30), 0.105661616, true},
		// pd = 0.105661616 + 0.15·(A − B) = 0.105661616 + 0.022761424 = 0.128423040
		{rt(0.30), 0.128423040, true},
		// pd = 0.128423040 + A·(−0.05) − B·0.15 = 0.128423040 − 0.035220539 − 0.082900192 = 0.010302309
		{rt(0.10), 0.010302309, true},
		// pd = 0.010302309 − A·0.1 + B·0.05 = −0.032505371 → clamped to 0
		{rt(0.05), 0, true},
		// no samples: hold
		{sluice.Measurements{}, 0, false},
		// NaN mean: hold
		{sluice.Measurements{Samples: 10, MeanRT: nan()}, 0, false},
	})
}

// Erratum (docs/algorithms.md §2): A = Kp + Ki·h/2, B = Kp − Ki·h/2, so with
// h = 2 s a constant error e raises pd by (A − B)·e = Ki·h·e per step:
// Ki·2 = 0.303485650; at e = 0.15: +0.045522847 per step after the first.
func TestYakshaTustinErratum(t *testing.T) {
	cfg := DefaultYakshaConfig()
	cfg.Tref, cfg.Lambda0, cfg.SelfTuning, cfg.Smoothing, cfg.Period = 150*time.Millisecond, 50, false, 0, 2*time.Second
	y, _ := NewYaksha(cfg)
	near(t, "A", y.Gains().A, 0.780282186)
	near(t, "B", y.Gains().B, 0.476796536)
	d1 := y.Update(at(2), rt(0.30))
	d2 := y.Update(at(4), rt(0.30))
	near(t, "increment", d2.New-d1.New, 0.045522847)
}

// Self-tuning with λ0 = 50, tune_window 10 s → α = e^−0.1 = 0.904837418.
// Step 1: pa_avg = α·1 + (1−α)·(1 − 0) = 1, gains as static: pd = 0.105661616.
// Step 2: pa_avg = α + (1−α)·(1 − 0.105661616) = 0.989944968;
// Kg = 1.125/0.989944968 = 1.136426808 → A = 0.697327901, B = 0.547110855;
// pd = 0.105661616 + 0.15·(A − B) = 0.128194173.
func TestYakshaSelfTuningTimeline(t *testing.T) {
	cfg := DefaultYakshaConfig()
	cfg.Tref, cfg.Lambda0, cfg.Smoothing = 150*time.Millisecond, 50, 0
	y, _ := NewYaksha(cfg)
	runTimeline(t, y, []step{{rt(0.30), 0.105661616, true}, {rt(0.30), 0.128194173, true}})
	near(t, "pa_avg", y.AdmitAverage(), 0.989944968)
	near(t, "Kg", y.Gains().Kg, 1.136426808)
}

// Auto λ0: the first measured throughput (50 completions in 1 s) becomes
// λ0, so the first step equals the static design with λ0 = 50.
func TestYakshaAutoLambda0(t *testing.T) {
	cfg := DefaultYakshaConfig()
	cfg.Tref, cfg.Smoothing = 150*time.Millisecond, 0
	y, _ := NewYaksha(cfg)
	d := y.Update(at(1), sluice.Measurements{Elapsed: time.Second, Samples: 50, MeanRT: 0.30, Completed: 50})
	near(t, "pd", d.New, 0.105661616)
	// Without throughput there is no λ0 yet: hold.
	y2, _ := NewYaksha(cfg)
	d = y2.Update(at(1), sluice.Measurements{Elapsed: time.Second, Samples: 5, MeanRT: 0.30})
	if d.Acted || d.New != 0 {
		t.Fatalf("expected hold without throughput, got %+v", d)
	}
}

// Smoothing s = 0.5: T(1) = 0.3 (first sample), T(2) = 0.5·0.3 + 0.5·0.1 = 0.2.
// pd(2) = 0.105661616 + A·0.05 − B·0.15 = 0.105661616 + 0.035220539 − 0.082900192 = 0.057981963.
func TestYakshaSmoothing(t *testing.T) {
	cfg := DefaultYakshaConfig()
	cfg.Tref, cfg.Lambda0, cfg.SelfTuning = 150*time.Millisecond, 50, false
	y, _ := NewYaksha(cfg)
	runTimeline(t, y, []step{{rt(0.30), 0.105661616, true}, {rt(0.10), 0.057981963, true}})
}

// pd never exceeds max_drop (0.99 by default) however large the error.
func TestYakshaMaxDrop(t *testing.T) {
	cfg := DefaultYakshaConfig()
	cfg.Tref, cfg.Lambda0, cfg.SelfTuning = 150*time.Millisecond, 50, false
	y, _ := NewYaksha(cfg)
	var d sluice.Decision
	for i := 1; i <= 20; i++ {
		d = y.Update(at(i), rt(60))
	}
	if d.New != 0.99 || math.IsNaN(d.New) {
		t.Fatalf("pd = %v, want 0.99", d.New)
	}
}
