// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"cmp"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/control/internal/ctl"
	"github.com/sluicehq/sluice/internal/mathx"
)

// The verdicts on a complete window, by phase (see Auto for the law).

// windowLimit returns the limit of the window at the current phase: a·L
// for a high probe (bounded by the knee, highProbe), L/b for the low
// probe, L for a base.
func (a *Auto) windowLimit() float64 {
	switch {
	case a.phase.isHigh():
		return mathx.Clamp(a.highProbe(math.Ceil(a.limit*a.gain)), a.cfg.MinLimit, a.cfg.MaxLimit)
	case a.phase == phaseLow:
		return mathx.Clamp(math.Round(a.limit/a.cfg.LowProbe), a.cfg.MinLimit, a.cfg.MaxLimit)
	}
	return mathx.Clamp(math.Round(a.limit), a.cfg.MinLimit, a.cfg.MaxLimit)
}

// judge ends the window in progress and moves the cycle (and maybe L).
// A window without enough completions, or that demand did not fill,
// holds L (judgeUnfilled); the overtakes may cap L or take an unfilled
// high probe first; else the phase judges it.
func (a *Auto) judge() string {
	w := a.win
	x, n := w.x(), w.meanN()
	if w.done < 10 || !mathx.Usable(x) {
		a.phase = phaseBase1
		return fmt.Sprintf("hold L %.4g: window %g without enough completions (%g)", a.limit, w.limit, w.done)
	}
	if why, cut := a.overtakeCap(w); cut {
		return why
	}
	if why, grew := a.overtakeUnfilled(w); grew {
		return why
	}
	if n < 0.8*w.limit {
		return a.judgeUnfilled(w, x, n)
	}
	switch {
	case a.phase.isBase():
		return a.judgeBase(w, x, n)
	case a.phase.isHigh():
		return a.judgeHigh(w, x)
	}
	return a.judgeLow(w, x)
}

// judgeUnfilled judges a window that demand did not fill (n̄ < 0.8·L_w):
// it says nothing about the service's parallelism, and L holds, but for
// a high probe that ran more in service than L, n̄ > 1.1·L, whose
// throughput grew with the number in service, X_probe/X_base ≥
// 0.9·n̄/n̄_base: the service serves all of the demand's concurrency, so
// L ← ⌈n̄⌉ at once (in the warm-up, and after a change that gave the
// service more parallelism; holding the base there turned away what the
// service could serve for another cycle of probes).
func (a *Auto) judgeUnfilled(w window, x, n float64) string {
	if a.phase.isHigh() && a.base.done > 0 && n > 1.1*a.limit && x/a.base.x() >= 0.9*n/a.base.meanN() && a.mayRaise() {
		old := a.limit
		a.limit = mathx.Clamp(math.Ceil(n), a.cfg.MinLimit, a.cfg.MaxLimit)
		a.restart()
		return fmt.Sprintf("L %.4g → %.4g: high probe %g was not filled (n̄ %.3g), and %.4g req/s vs %.4g grew with it", old, a.limit, w.limit, n, x, a.base.x())
	}
	a.phase, a.gain = phaseBase1, a.cfg.HighProbe
	return fmt.Sprintf("hold L %.4g: demand below the limit (n̄ %.3g of %g, %.4g req/s)", a.limit, n, w.limit, x)
}

// judgeBase judges a base window: the tail guard may cut L; else the
// window becomes the base the next probe is compared with (the low probe
// is skipped while the knee from overtakes is above it), and Little's
// law may cut L (littleCut).
func (a *Auto) judgeBase(w window, x, n float64) string {
	if why, cut := a.tailCut(); cut {
		a.restart()
		return why
	}
	a.base = w
	a.phase = a.phase.next()
	if a.phase == phaseLow && a.knee.w > 0 && a.limit/a.cfg.LowProbe < a.knee.w {
		// The overtakes put the knee above the low probe, which
		// would only lose throughput below it.
		a.phase = phaseBase1
	}
	if why, cut := a.littleCut(w, x); cut {
		return why
	}
	return fmt.Sprintf("base %g: %.4g req/s, n̄ %.3g, R %s", w.limit, x, n, ctl.FmtSec(w.meanR()))
}

// littleCut is Little's law above the knee, R = L/X: a base window whose
// mean service time R alone eats more than a quarter of the SLO queues
// inside the service for nothing, and L ← L·(SLO/4)/R, at most halving
// it. The first of a run of cuts keeps the limit it cut from (uncut.go).
func (a *Auto) littleCut(w window, x float64) (string, bool) {
	r := w.meanR()
	if !(w.samples > 0 && r > a.cfg.SLO.Seconds()/4 && a.limit > 2*a.cfg.MinLimit) {
		return "", false
	}
	old := a.limit
	a.limit = mathx.Clamp(a.limit*a.cfg.SLO.Seconds()/(4*r), math.Max(a.cfg.MinLimit, a.limit/2), a.cfg.MaxLimit)
	a.phase, a.cut = phaseBase1, true
	a.cutFrom = cmp.Or(a.cutFrom, old)
	return fmt.Sprintf("L %.4g → %.4g: base %g: service time %s is over SLO/4 (%.4g req/s)", old, a.limit, w.limit, ctl.FmtSec(r), x), true
}

// judgeHigh judges a high probe by r = X_probe/X_base: the overtakes or
// the median test may settle it first; a gain r ≥ 1 + (a−1)/2 grows L
// once the next high probe confirms it (at once in the warm-up), the
// whole of it (r ≥ 0.9·a: L ← a·L, the probe's gain doubling up to 4)
// or the part that puts the knee at W ≈ r·L (L ← max(L, √b·r·L)); the
// guardrails may hold L.
func (a *Auto) judgeHigh(w window, x float64) string {
	a.phase = a.phase.next()
	r := x / a.base.x()
	old := a.limit
	if why, grew := a.overtakeGrow(w); grew {
		return why
	}
	if why, held := a.medianHeld(w); held {
		a.gain, a.pending = a.cfg.HighProbe, false
		return why
	}
	if !a.mayRaise() {
		a.gain, a.pending = a.cfg.HighProbe, false
		return fmt.Sprintf("hold L %.4g: high probe %g gave %.4g req/s vs %.4g (×%.3f), but service p99 %s is over max_healthy_latency %v",
			a.limit, w.limit, x, a.base.x(), r, ctl.FmtSec(a.est.rP99), a.cfg.MaxHealthyLatency)
	}
	if r < 1+(a.cfg.HighProbe-1)/2 {
		a.gain, a.pending = a.cfg.HighProbe, false
		return fmt.Sprintf("hold L %.4g: high probe %g gave %.4g req/s vs %.4g at %g (×%.3f)", a.limit, w.limit, x, a.base.x(), a.base.limit, r)
	}
	if !a.pending && !a.guard.warming() {
		// One window's gain may be noise: probe again before growing
		// (not during the warm-up: a fast start).
		a.pending = true
		return fmt.Sprintf("L %.4g: high probe %g gave %.4g req/s vs %.4g at %g (×%.3f): confirm", a.limit, w.limit, x, a.base.x(), a.base.limit, r)
	}
	if r >= 0.9*w.limit/a.base.limit {
		// The whole gain: W is at least the probe. Take it as the new
		// limit and base, and probe twice as far next (slow start).
		a.limit = mathx.Clamp(math.Max(a.limit, w.limit), a.cfg.MinLimit, a.cfg.MaxLimit)
		a.gain = math.Min(4, a.gain*2)
		a.base, a.phase = w, phaseHigh1
		return fmt.Sprintf("L %.4g → %.4g: high probe %g gave %.4g req/s vs %.4g at %g (×%.3f): grow, next probe ×%g", old, a.limit, w.limit, x, a.base.x(), a.base.limit, r, a.gain)
	}
	// Part of the gain: X ∝ min(n, W) puts the knee at W ≈ r·L_base;
	// the limit goes to √b·W, where the low probe sits just below it.
	a.limit = mathx.Clamp(math.Max(a.limit, math.Sqrt(a.cfg.LowProbe)*r*a.base.limit), a.cfg.MinLimit, a.cfg.MaxLimit)
	a.gain, a.pending = a.cfg.HighProbe, false
	return fmt.Sprintf("L %.4g → %.4g: high probe %g gave %.4g req/s vs %.4g at %g (×%.3f): knee near %.3g", old, a.limit, w.limit, x, a.base.x(), a.base.limit, r, r*a.base.limit)
}

// judgeLow judges the low probe by r = X_probe/X_base, with b's most
// possible loss 1 − 1/b: the median test may cut L first; r ≥ 1 −
// (1−1/b)/4 (less concurrency would do) shrinks L ← L/√b, not below the
// knee from overtakes; r < 1 − 3(1−1/b)/4 (the knee is close) steps
// back, L ← L·√b, unless the guardrails hold L; else L holds.
func (a *Auto) judgeLow(w window, x float64) string {
	a.phase = phaseBase1
	r := x / a.base.x()
	old := a.limit
	loss := 1 - 1/a.cfg.LowProbe // the most the low probe can lose
	if why, cut := a.medianCut(w); cut {
		return why
	}
	switch {
	case r >= 1-loss/4:
		a.limit = mathx.Clamp(math.Max(a.limit/math.Sqrt(a.cfg.LowProbe), a.knee.w), a.cfg.MinLimit, a.cfg.MaxLimit)
		return fmt.Sprintf("L %.4g → %.4g: low probe %g kept %.4g req/s vs %.4g at %g (×%.3f): shrink", old, a.limit, w.limit, x, a.base.x(), a.base.limit, r)
	case r < 1-loss*3/4 && a.mayRaise():
		a.limit = mathx.Clamp(a.limit*math.Sqrt(a.cfg.LowProbe), a.cfg.MinLimit, a.cfg.MaxLimit)
		return fmt.Sprintf("L %.4g → %.4g: low probe %g lost: %.4g req/s vs %.4g at %g (×%.3f): the knee is close, step back", old, a.limit, w.limit, x, a.base.x(), a.base.limit, r)
	}
	return fmt.Sprintf("hold L %.4g: low probe %g gave %.4g req/s vs %.4g at %g (×%.3f)", a.limit, w.limit, x, a.base.x(), a.base.limit, r)
}
