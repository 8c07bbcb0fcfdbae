// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/settle"
)

func TestKihlWindowMeanSD(t *testing.T) {
	if got := KihlWindowMeanSD(0.1, 0, 25); math.Abs(got-0.02) > 1e-12 {
		t.Errorf("white noise: sd of a 25-period mean = %v, want σ/5 = 0.02", got)
	}
	if got := KihlWindowMeanSD(0.1, 0.55, 1); math.Abs(got-0.1) > 1e-12 {
		t.Errorf("one period: %v, want σ", got)
	}
	// Correlated noise averages out more slowly; a negative φ counts as 0.
	if a, b := KihlWindowMeanSD(0.1, 0, 9), KihlWindowMeanSD(0.1, 0.55, 9); !(b > 1.5*a) {
		t.Errorf("φ = 0.55: %v, white %v: want well above", b, a)
	}
	if a, b := KihlWindowMeanSD(0.1, 0, 9), KihlWindowMeanSD(0.1, -0.5, 9); a != b {
		t.Errorf("φ < 0: %v, want the white noise's %v", b, a)
	}
}

func TestKihlSettleWindow(t *testing.T) {
	h, min := 500*time.Millisecond, 2500*time.Millisecond
	// The paper's M/D/1 (noise ≈ 0.01) keeps the configured 5 periods.
	if got := KihlSettleWindow(0.011, -0.5, 0.1, h, min, 60); got != min {
		t.Errorf("M/D/1: window %v, want %v", got, min)
	}
	// The quiet live rerun of 2026-11-27 (M/D/1 variant: cost noise 0.102,
	// lag-1 autocorrelation 0.55): 21 periods, the first whose mean has
	// sd ≤ 0.1/2.5.
	got := KihlSettleWindow(0.102, 0.55, 0.1, h, min, 60)
	if got != 21*h {
		t.Errorf("live noise: window %v, want %v", got, 21*h)
	}
	if sd := KihlWindowMeanSD(0.102, 0.55, 21); sd > 0.04 {
		t.Errorf("21 periods: sd %v > band/2.5", sd)
	}
	if sd := KihlWindowMeanSD(0.102, 0.55, 19); sd <= 0.04 {
		t.Errorf("19 periods already: sd %v", sd)
	}
	// Noise no run can average away stops the search at the run's length.
	if got := KihlSettleWindow(1.5, 0.2, 0.1, h, min, 60); got != 61*h {
		t.Errorf("huge noise: window %v, want the run's length (61 periods)", got)
	}
	// An even minimum is made odd (a centred window).
	if got := KihlSettleWindow(0, 0, 0.1, time.Second, 4*time.Second, 60); got != 5*time.Second {
		t.Errorf("even minimum: %v", got)
	}
}

func TestKihlNoise(t *testing.T) {
	h := 500 * time.Millisecond
	var det []KihlPeriod
	for k := range 40 {
		det = append(det, KihlPeriod{Start: time.Duration(k) * h, End: time.Duration(k+1) * h, Completed: 30,
			Utilization: 30 * 0.01125 / h.Seconds()})
	}
	if sd, _ := KihlNoise(det, 0.8, 0); sd > 1e-9 {
		t.Errorf("identical cost every period: noise %v, want 0", sd)
	}
	// The cost, not the count, carries the noise: a loop admitting more
	// or fewer requests does not change it.
	for i := range det {
		det[i].Completed = float64(20 + i%10)
		det[i].Utilization = det[i].Completed * 0.01125 / h.Seconds()
	}
	if sd, _ := KihlNoise(det, 0.8, 0); sd > 1e-9 {
		t.Errorf("varying admissions at identical cost: noise %v, want 0", sd)
	}
	// Periods before from, without answers or without a reading are skipped.
	det[0].Utilization, det[1].Completed, det[2].Utilization = 1, 0, math.NaN()
	if sd, _ := KihlNoise(det, 0.8, h); sd > 1e-9 {
		t.Errorf("with skipped periods: noise %v, want 0", sd)
	}
	if sd, phi := KihlNoise(det[:3], 0.8, 0); sd != 0 || phi != 0 {
		t.Errorf("too few periods: %v, %v", sd, phi)
	}
	ps := noisyKihlRun(rand.New(rand.NewPCG(7, 7)), 2000, 0.12, 0.55)
	sd, phi := KihlNoise(ps, 0.8, 0)
	if math.Abs(sd-0.8*0.12) > 0.015 || math.Abs(phi-0.55) > 0.08 {
		t.Errorf("AR(1) cost noise 0.12, φ 0.55: estimated sd %v (want ≈ %v), φ %v", sd, 0.8*0.12, phi)
	}
}

// liveKihl is the Kihl parameters at the live time scale 0.5 (as
// live.kihlLiveParams compresses them): h = 0.5 s, 30-s runs.
func liveKihl() KihlParams {
	c := DefaultKihl(60 * time.Second)
	for _, d := range []*time.Duration{&c.Duration, &c.H, &c.ServiceTime, &c.Ti, &c.CompareTi, &c.MeasureFrom, &c.SettleWindow} {
		*d /= 2
	}
	c.Rate *= 2
	return c
}

// noisyKihlRun is a kihl-step run at the live time scale (h = 0.5 s,
// 11.25 ms per request): the loop admits what a first-order rise to
// ρ_ref = 0.8 asks (slow pole 0.85, about the paper's loop) and the
// server's cost per request wanders by an AR(1) factor 1 + ε of standard
// deviation cv and lag-1 autocorrelation phi, as the live CPU's did.
func noisyKihlRun(r *rand.Rand, n int, cv, phi float64) []KihlPeriod {
	h, cost := 500*time.Millisecond, 0.01125
	eps := cv * r.NormFloat64()
	ps := make([]KihlPeriod, n)
	for k := range ps {
		completed := math.Round(0.8 * (1 - math.Pow(0.85, float64(k+1))) * h.Seconds() / cost)
		ps[k] = KihlPeriod{Start: time.Duration(k) * h, End: time.Duration(k+1) * h, Completed: completed,
			Utilization: math.Min(completed*cost*(1+eps)/h.Seconds(), 1)}
		eps = phi*eps + math.Sqrt(1-phi*phi)*cv*r.NormFloat64()
	}
	return ps
}

// TestKihlSettlingUnderCPUNoise runs the step figure's settling check on
// runs whose loop settles as fast as the paper's but whose server has the
// live CPU's cost noise: the rule with the window from the run's noise
// accepts nearly all of them, while the fixed 5-period window it replaced
// rejects most (the live quiet rerun's miss: in at 6.5 s, out again at
// 7–8 s and 22–25.5 s).
func TestKihlSettlingUnderCPUNoise(t *testing.T) {
	c := liveKihl()
	oldMisses, newMisses := 0, 0
	for seed := range uint64(10) {
		ps := noisyKihlRun(rand.New(rand.NewPCG(seed, 1)), int(c.Duration/c.H), 0.12, 0.55)
		s := report.NewSummary("kihl-step", "test", seed)
		KihlMetrics(s, "", ps, c, c.Duration, true, 0)
		KihlMetrics(s, "_md1", ps, c, c.Duration, true, 0)
		KihlSettling(s, "", ps, c, c.Duration)
		KihlSettling(s, "_md1", ps, c, c.Duration)
		if err := KihlModelSettling(s, c); err != nil {
			t.Fatal(err)
		}
		if w := s.Metric("settle_window_s"); !(w > c.SettleWindow.Seconds()) {
			t.Errorf("seed %d: settle window %v s, want wider than %v under the live noise", seed, w, c.SettleWindow)
		}
		for _, ch := range KihlChecks(s, c, 0.5, false) {
			if strings.Contains(ch.Claim, "settles quickly") && !ch.Pass {
				newMisses++
				t.Logf("seed %d: %s (window %v s)", seed, ch.Measured, s.Metric("settle_window_s"))
			}
		}
		// The rule it replaced: the 5-period window, bound the model's
		// time with that window + 2 periods.
		pts := make([]settle.Point, len(ps))
		for i, p := range ps {
			pts[i] = settle.Point{Start: p.Start, End: p.End, Value: p.Utilization, Weight: 1}
		}
		old := report.NewSummary("kihl-step", "test", seed)
		if err := KihlModelSettling(old, c); err != nil {
			t.Fatal(err)
		}
		half := settle.HalfWindow(c.SettleWindow, c.H)
		if v := settle.Time(pts, c.RhoRef, c.SettleBand, half); !(v <= old.Metric("settling_time_s_model")+float64(half)*c.H.Seconds()) {
			oldMisses++
		}
	}
	// The window is chosen for about 5 % of misses in the closed loop
	// (the simulator with speed_cv = 0.12 met it on 19 of 20 seeds); this
	// open-loop rise does not damp the slow noise as the PI controller
	// does, so allow 2 of 10.
	if newMisses > 2 {
		t.Errorf("the window from the run's noise missed %d of 10 noisy runs", newMisses)
	}
	if oldMisses < 5 {
		t.Errorf("the fixed 5-period window missed only %d of 10 noisy runs: the noise model is milder than the live CPU's", oldMisses)
	}
}

// TestKihlSettlingTooNoisy: noise no window within the run can average
// away (a loaded machine: the live run at 10:53 UTC on 2026-11-27 had
// noise 0.265, lag-1 autocorrelation 0.86) fails the check and says why.
func TestKihlSettlingTooNoisy(t *testing.T) {
	c := liveKihl()
	ps := noisyKihlRun(rand.New(rand.NewPCG(3, 1)), int(c.Duration/c.H), 0.35, 0.86)
	s := report.NewSummary("kihl-step", "test", 3)
	KihlMetrics(s, "_md1", ps, c, c.Duration, true, 0)
	KihlSettling(s, "_md1", ps, c, c.Duration)
	if err := KihlModelSettling(s, c); err != nil {
		t.Fatal(err)
	}
	if w := s.Metric("settle_window_s"); w < c.Duration.Seconds() {
		t.Logf("noise %v, %v", s.Metric("settle_noise_sd_md1"), s.Metric("settle_noise_ac1_md1"))
		t.Fatalf("window %v s, want the run's length", w)
	}
	for _, ch := range KihlChecks(s, c, 1, false) {
		if strings.Contains(ch.Claim, "settles quickly") {
			if ch.Pass || !strings.Contains(ch.Measured, "cannot be told from noise") {
				t.Errorf("too noisy a run: pass %v, %s", ch.Pass, ch.Measured)
			}
		}
	}
}
