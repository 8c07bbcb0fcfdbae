// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/design"
	"github.com/sluicehq/sluice/internal/mathx"
)

// KihlTune is the auto tuning of one kihl stage (the proxy's
// resources[i].kihl with tuning: auto): the σ estimate, the gains pole
// placement chose and the stability verdict (Andersson, Kihl et al.'s
// design rule, docs/algorithms.md §4). It outlives a stage, so that a stage
// rebuilt on reload starts with the gains already found. It is safe for
// concurrent use.
//
// σ, the maximum number of departures per period, is estimated as
//
//	σ̂ = h · Σ completed_k / Σ (ρ_k · elapsed_k)
//
// over the periods k with ρ_k ≥ min_utilization and at least one
// completion: the completions per second of busy time, 1/(mean service
// time), where the busy time of a period is its utilization times its
// length. Once estimate_periods such periods are in (or at once with a
// fixed sigma), design.KihlPlace gives K = (2 + a1)·σ̂ and
// Ti = h·(2 + a1)/(1 + a1 + a2), and design.KihlAnalyze judges them.
// ρ is the whole resource's utilization while the completions are the
// stage's only: other traffic on the same resource makes σ̂ smaller than
// the stage's true σ, which lowers K (a slower, not a less stable, loop).
type KihlTune struct {
	stage   string
	a1, a2  float64
	h       time.Duration
	fixed   float64
	periods int
	minUtil float64
	log     *slog.Logger

	mu        sync.Mutex
	sumN      float64
	sumBusy   float64 // seconds of busy time
	used      int
	sigma     float64 // 0 until resolved
	k, ti     float64
	analysis  *design.KihlAnalysis
	resolved  time.Time
	lastError string
}

// NewKihlTune returns the tuning of the named stage: the closed-loop
// characteristic polynomial's a1, a2, the period h, a fixed σ (> 0) or 0
// to estimate it over periods usable periods (utilization ≥ minUtil).
// Decisions are logged to log.
func NewKihlTune(stage string, a1, a2 float64, h time.Duration, sigma float64, periods int, minUtil float64, log *slog.Logger) *KihlTune {
	return &KihlTune{stage: stage, a1: a1, a2: a2, h: h, fixed: sigma, periods: periods, minUtil: minUtil, log: log}
}

// CheckKihlPlacement reports whether a1, a2 can be placed for a period h
// (the pole-placement rule's own check).
func CheckKihlPlacement(h time.Duration, a1, a2 float64) error {
	_, _, err := design.KihlPlace(1, h, a1, a2)
	return err
}

// KihlTuningAuto is the tuning mode KihlTuningState reports.
const KihlTuningAuto = "auto"

// Gains returns the resolved σ, K and Ti, and whether they are known. A
// fixed σ resolves on the first call, at now: a runner calls it when it
// builds the stage.
func (t *KihlTune) Gains(now time.Time) (sigma, k, ti float64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sigma == 0 && t.fixed > 0 {
		t.resolve(now, t.fixed, "configured")
	}
	return t.current()
}

// current returns the gains resolved so far. Called with mu held.
func (t *KihlTune) current() (sigma, k, ti float64, ok bool) {
	return t.sigma, t.k, t.ti, t.sigma > 0 && t.k > 0
}

// observe folds one period into the estimate and resolves the gains when
// it is complete. It reports whether the gains are known afterwards.
func (t *KihlTune) observe(now time.Time, m sluice.Measurements) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sigma > 0 {
		return t.k > 0
	}
	if t.fixed > 0 {
		t.resolve(now, t.fixed, "configured")
		return t.k > 0
	}
	rho, el := m.Utilization, m.Elapsed.Seconds()
	if !mathx.Finite(rho) || rho < t.minUtil || !(m.Completed >= 1) || !(el > 0) {
		return false
	}
	t.sumN += m.Completed
	t.sumBusy += math.Min(rho, 1) * el
	t.used++
	if t.used < t.periods {
		return false
	}
	t.resolve(now, t.h.Seconds()*t.sumN/t.sumBusy, fmt.Sprintf("estimated over %d periods: %.0f completions in %.3g s of busy time", t.used, t.sumN, t.sumBusy))
	return t.k > 0
}

// resolve places the poles for sigma. Called with mu held.
func (t *KihlTune) resolve(now time.Time, sigma float64, how string) {
	t.sigma, t.resolved = sigma, now
	k, ti, err := design.KihlPlace(sigma, t.h, t.a1, t.a2)
	if err != nil {
		t.lastError = err.Error()
		t.log.Error("kihl auto tuning failed: the stage keeps params.k and params.ti", "stage", t.stage, "sigma", sigma, "err", err)
		return
	}
	t.k, t.ti = k, ti
	a, err := design.KihlAnalyze(sigma, t.h, k, ti)
	verdict := ""
	if err != nil {
		t.lastError = err.Error()
		verdict = "analysis failed: " + err.Error()
	} else {
		t.analysis = &a
		verdict = a.Verdict
	}
	t.log.Info("kihl auto tuning", "stage", t.stage, "sigma", sigma, "sigma_from", how, "a1", t.a1, "a2", t.a2,
		"K", k, "Ti_s", ti, "verdict", verdict)
}

// KihlTuningState is the auto tuning of a kihl stage as /state shows it.
type KihlTuningState struct {
	Tuning string  `json:"tuning"`
	A1     float64 `json:"a1"`
	A2     float64 `json:"a2"`
	// Sigma is σ in requests per period (fixed, or estimated; 0 until
	// known), with SigmaFrom saying which.
	Sigma     float64 `json:"sigma"`
	SigmaFrom string  `json:"sigma_from"`
	// PeriodsUsed of EstimatePeriods have entered the estimate so far.
	PeriodsUsed     int `json:"periods_used"`
	EstimatePeriods int `json:"estimate_periods"`
	// K (requests per period per unit of utilization) and Ti (seconds) are
	// the placed gains, 0 until σ is known.
	K  float64 `json:"k"`
	Ti float64 `json:"ti_s"`
	// StableLinear, StableTsypkin and Verdict are design.KihlAnalyze's.
	StableLinear  bool      `json:"stable_linear"`
	StableTsypkin bool      `json:"stable_tsypkin"`
	Verdict       string    `json:"verdict,omitempty"`
	ResolvedAt    time.Time `json:"resolved_at,omitzero"`
	Error         string    `json:"error,omitempty"`
}

// State returns the tuning as the admin API shows it.
func (t *KihlTune) State() KihlTuningState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := KihlTuningState{Tuning: KihlTuningAuto, A1: t.a1, A2: t.a2, Sigma: t.sigma, PeriodsUsed: t.used,
		EstimatePeriods: t.periods, K: t.k, Ti: t.ti, ResolvedAt: t.resolved, Error: t.lastError}
	switch {
	case t.fixed > 0:
		st.SigmaFrom = "configured"
	case t.sigma > 0:
		st.SigmaFrom = "estimated"
	default:
		st.SigmaFrom = "estimating"
	}
	if a := t.analysis; a != nil {
		st.StableLinear, st.StableTsypkin, st.Verdict = a.StableLinear, a.StableTsypkin, a.Verdict
	}
	return st
}

// KihlAutoConfig is the controller configuration of a kihl stage with
// tuning: auto: the stage's compiled params (Base), whose k and ti serve
// until σ is known, and the shared tuning state (Tune).
type KihlAutoConfig struct {
	Base KihlConfig
	Tune *KihlTune
}

var _ Config = (*KihlAutoConfig)(nil)

// Validate validates the params.
func (c *KihlAutoConfig) Validate() error { return c.Base.Validate() }

// New returns a kihl controller that re-tunes itself once σ is known (at
// once when it already is: a fixed σ once the runner has called Gains).
func (c *KihlAutoConfig) New() (sluice.Controller, error) {
	inner, err := NewKihl(c.Base)
	if err != nil {
		return nil, err
	}
	a := &kihlAuto{base: c.Base, tune: c.Tune, inner: inner}
	c.Tune.mu.Lock()
	sigma, k, ti, ok := c.Tune.current()
	c.Tune.mu.Unlock()
	if ok {
		if err := a.retune(k, ti); err != nil {
			return nil, err
		}
		a.note = fmt.Sprintf("auto gains (σ %.4g): K %.4g, Ti %.4gs; ", sigma, k, ti)
	}
	return a, nil
}

// kihlAuto is Kihl whose gains K and Ti are replaced once, when
// the tuning resolves, with a bumpless transfer: the new controller's
// integrator starts where the old one was (clamped to [0, max_rate·h]).
// The control law itself is Kihl's, unchanged. Like every
// controller it is driven by one runner (the stage's Step).
type kihlAuto struct {
	base  KihlConfig
	tune  *KihlTune
	inner *Kihl
	tuned bool
	note  string // prefix of the next decision's reason
}

var _ sluice.Controller = (*kihlAuto)(nil)

func (a *kihlAuto) retune(k, ti float64) error {
	cfg := a.base
	cfg.K = k
	cfg.Ti = time.Duration(ti * float64(time.Second))
	uMax := cfg.MaxRate * cfg.Period.Seconds()
	cfg.InitialIntegral = math.Max(0, math.Min(a.inner.Integral(), uMax))
	inner, err := NewKihl(cfg)
	if err != nil {
		return fmt.Errorf("kihl auto tuning: K %g, Ti %gs: %w", k, ti, err)
	}
	a.inner, a.tuned = inner, true
	return nil
}

// Update folds the period into the σ estimate, re-tunes when it
// completes, and runs one PI step.
func (a *kihlAuto) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	note := a.note
	a.note = ""
	if !a.tuned && a.tune.observe(now, m) {
		sigma, k, ti, _ := a.tune.Gains(now)
		if err := a.retune(k, ti); err != nil {
			note += err.Error() + "; "
		} else {
			note += fmt.Sprintf("auto-tuned: σ %.4g → K %.4g, Ti %.4gs; ", sigma, k, ti)
		}
	}
	d := a.inner.Update(now, m)
	if note != "" {
		d.Reason = note + d.Reason
	}
	return d
}

// Current returns the setting in force.
func (a *kihlAuto) Current() sluice.Decision { return a.inner.Current() }

// Period returns h.
func (a *kihlAuto) Period() time.Duration { return a.base.Period }

// Integral returns the integrator state of the Kihl controller in force.
func (a *kihlAuto) Integral() float64 { return a.inner.Integral() }
