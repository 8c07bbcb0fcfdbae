// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/design"
	"github.com/sluicehq/sluice/internal/mathx"
)

// minAdmitAvg is the floor on the running average of the admission
// probability used in the self-tuned gain Kg = λ0·Tref²/pa_avg, so that Kg
// stays finite (Kg ≤ 100·λ0·Tref²).
const minAdmitAvg = 0.01

// YakshaConfig configures the Yaksha controller. Start from
// DefaultYakshaConfig; Tref has no default and must be set.
type YakshaConfig struct {
	// Tref is the mean response-time target (required).
	Tref time.Duration `yaml:"tref" json:"tref"`
	// Period is the control period h (default 1s).
	Period time.Duration `yaml:"period" json:"period"`
	// SelfTuning re-derives the gains every period from the running
	// admission probability (default true). false gives the static design
	// of the paper's comparison, which then needs Lambda0.
	SelfTuning bool `yaml:"self_tuning" json:"self_tuning"`
	// Lambda0 is the nominal arrival rate of the design, in req/s. 0 (the
	// default) means: estimate it as the running average of the measured
	// goodput (successful completions per second: fast failures are not
	// served work), averaged over TuneWindow —
	// allowed only with self-tuning. With λ0 = pa·λ measured this way,
	// Kg = λ0·Tref²/pa_avg tracks λ·Tref², the plant gain at the current
	// offered rate λ.
	Lambda0 float64 `yaml:"lambda0" json:"lambda0"`
	// Pole is the closed-loop pole in 1/s (default −0.1: a 10 s time
	// constant).
	Pole float64 `yaml:"pole" json:"pole"`
	// TuneWindow is the time scale of the running averages of self-tuning
	// (default 10s): α = exp(−h/TuneWindow).
	TuneWindow time.Duration `yaml:"tune_window" json:"tune_window"`
	// Smoothing is the weight s of the previous value in the smoothed
	// response time T(k) = s·T(k−1) + (1−s)·mean(k), in [0, 1) (default
	// 0.5).
	Smoothing float64 `yaml:"smoothing" json:"smoothing"`
	// MaxDrop bounds the drop probability, in (0, 1] (default 0.99, so that
	// some requests keep producing response-time samples; 1 allows full
	// shedding, which then relies on the runner's other signals).
	MaxDrop float64 `yaml:"max_drop" json:"max_drop"`
}

// DefaultYakshaConfig returns the paper's design: h = 1 s, Pole −0.1,
// SelfTuning true over TuneWindow 10s, Lambda0 0 (λ0 estimated from the
// measured throughput), Smoothing 0.5 and MaxDrop 0.99.
func DefaultYakshaConfig() YakshaConfig {
	return YakshaConfig{Period: time.Second, SelfTuning: true, Pole: design.DefaultYakshaPole,
		TuneWindow: 10 * time.Second, Smoothing: 0.5, MaxDrop: 0.99}
}

// Validate reports the first invalid field.
func (c *YakshaConfig) Validate() error {
	return firstError(
		invalidIf(c.Tref <= 0, "tref", c.Tref, "must be set to a positive duration such as 150ms"),
		checkPeriod("period", c.Period),
		checkNonNegative("lambda0", c.Lambda0),
		invalidIf(!c.SelfTuning && c.Lambda0 == 0, "lambda0", c.Lambda0,
			"must be > 0 when self_tuning is false (the static design needs a nominal rate)"),
		invalidIf(!mathx.Finite(c.Pole) || c.Pole >= 0, "pole", c.Pole, "must be a finite negative number (1/s), e.g. -0.1"),
		checkPositiveDuration("tune_window", c.TuneWindow, "10s"),
		checkWithin("smoothing", c.Smoothing, '[', 0, 1, ')'),
		checkWithin("max_drop", c.MaxDrop, '(', 0, 1, ']'),
	)
}

// New validates the configuration and returns a controller.
func (c *YakshaConfig) New() (sluice.Controller, error) { return NewYaksha(*c) }

// Yaksha is the self-tuning PI controller of Kamra, Misra and Nahum,
// "Yaksha: A Self-Tuning Controller for Managing the Performance of
// 3-Tiered Web sites" (docs/algorithms.md §2). It holds the mean response
// time at Tref by dropping each request with probability pd.
//
// Every period h, with T(k) the smoothed mean response time (seconds):
//
//	pd(k) = pd(k−1) + A·(T(k) − Tref) − B·(T(k−1) − Tref),  clamped to [0, max_drop]
//
// where A = Kp + Ki·h/2 and B = Kp − Ki·h/2 (Tustin; see design.YakshaGains)
// with Kp = 1/(√2·Kg), Ki = −pole·(Kp + 1/Kg). The velocity form keeps no
// separate integrator, so clamping pd is itself the anti-windup.
//
// With self-tuning, before each step pa_avg = α·pa_avg + (1−α)·(1 − pd(k−1))
// with α = exp(−h/tune_window), and Kg = λ0·Tref²/max(pa_avg, 0.01); A and
// B are recomputed. Without it, Kg = λ0·Tref² is fixed. A period without
// response-time samples, or with an unusable mean, holds pd. T(−1) is taken
// as Tref.
//
// By priority: only when the stage asks (stage.Priority, ShedOn), the
// drops go to the lowest classes first, in proportion to each class's
// arrivals of the last period; by default the paper's single drop
// probability for every request.
type Yaksha struct {
	cfg     YakshaConfig
	alpha   float64
	lambda0 float64 // current λ0 (fixed, or the throughput estimate)
	paAvg   float64
	gains   design.YakshaGains
	t, tOld float64 // smoothed T(k) and T(k−1), seconds
	haveT   bool
	cur     sluice.Decision
}

var _ sluice.Controller = (*Yaksha)(nil)

// NewYaksha returns a Yaksha controller for a validated copy of cfg.
func NewYaksha(cfg YakshaConfig) (*Yaksha, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	y := &Yaksha{cfg: cfg, alpha: math.Exp(-cfg.Period.Seconds() / cfg.TuneWindow.Seconds()),
		lambda0: cfg.Lambda0, paAvg: 1, tOld: cfg.Tref.Seconds()}
	if cfg.Lambda0 > 0 {
		g, err := designYaksha(cfg.Tref, cfg.Lambda0, cfg.Period)
		if err != nil {
			return nil, err
		}
		y.gains = g
	}
	y.cur = sluice.Decision{Controller: "yaksha", Kind: sluice.KindDropProbability, Reason: "initial: pd = 0"}
	return y, nil
}

// designYaksha is the static design at the default pole.
func designYaksha(tref time.Duration, lambda0 float64, h time.Duration) (design.YakshaGains, error) {
	return design.Yaksha(tref, lambda0, h)
}

// Period returns h.
func (y *Yaksha) Period() time.Duration { return y.cfg.Period }

// Current returns the setting in force.
func (y *Yaksha) Current() sluice.Decision { return y.cur }

// Gains returns the PI gains in use (zero until λ0 is known).
func (y *Yaksha) Gains() design.YakshaGains { return y.gains }

// AdmitAverage returns the running average pa_avg of the admission
// probability used by self-tuning.
func (y *Yaksha) AdmitAverage() float64 { return y.paAvg }

// Update runs one PI step. Decision.New is the drop probability pd.
func (y *Yaksha) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	pdOld := y.cur.New
	hold := func(why string) sluice.Decision {
		y.cur = decision(now, "yaksha", sluice.KindDropProbability, m, pdOld, pdOld, false,
			fmt.Sprintf("hold pd at %.4f: %s", pdOld, why))
		return y.cur
	}
	if !usable(m.Samples) || m.Samples < 1 {
		return hold("no response-time samples in the period")
	}
	if !usable(m.MeanRT) {
		return hold(fmt.Sprintf("unusable mean response time %v", m.MeanRT))
	}
	if y.haveT {
		y.t = y.cfg.Smoothing*y.t + (1-y.cfg.Smoothing)*m.MeanRT
	} else {
		y.t, y.haveT = m.MeanRT, true
	}
	tref := y.cfg.Tref.Seconds()
	if y.cfg.SelfTuning {
		y.paAvg = y.alpha*y.paAvg + (1-y.alpha)*(1-pdOld)
		if y.cfg.Lambda0 == 0 {
			if tp := m.Goodput(); usable(tp) && tp > 0 {
				if y.lambda0 == 0 {
					y.lambda0 = tp
				} else {
					y.lambda0 = y.alpha*y.lambda0 + (1-y.alpha)*tp
				}
			}
		}
		if y.lambda0 > 0 {
			g, err := design.YakshaFromKg(y.lambda0*tref*tref/math.Max(y.paAvg, minAdmitAvg), y.cfg.Period, y.cfg.Pole)
			if err == nil {
				y.gains = g
			}
		}
	}
	if y.gains.Kg == 0 {
		y.tOld = y.t
		return hold("λ0 not known yet (no throughput measured)")
	}
	pd := pdOld + y.gains.A*(y.t-tref) - y.gains.B*(y.tOld-tref)
	clamped := ""
	if pd < 0 || pd > y.cfg.MaxDrop {
		clamped = " (clamped)"
	}
	pd = clamp(pd, 0, y.cfg.MaxDrop)
	if !mathx.Finite(pd) {
		pd = pdOld
	}
	reason := fmt.Sprintf("T %s (mean %s of %.0f) vs Tref %s: pd %.4f → %.4f%s [A %.4g, B %.4g, Kg %.4g",
		fmtSec(y.t), fmtSec(m.MeanRT), m.Samples, fmtSec(tref), pdOld, pd, clamped, y.gains.A, y.gains.B, y.gains.Kg)
	if y.cfg.SelfTuning {
		reason += fmt.Sprintf(", pa_avg %.3f, λ0 %.4g", y.paAvg, y.lambda0)
	}
	y.tOld = y.t
	y.cur = decision(now, "yaksha", sluice.KindDropProbability, m, pdOld, pd, true, reason+"]")
	return y.cur
}
