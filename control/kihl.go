// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// KihlConfig configures the Kihl controller. Start from DefaultKihlConfig.
type KihlConfig struct {
	// Period is the control period h (default 1s).
	Period time.Duration `yaml:"period" json:"period"`
	// RhoRef is the utilization reference ρ_ref in (0, 1] (default 0.8).
	RhoRef float64 `yaml:"rho_ref" json:"rho_ref"`
	// K is the proportional gain, in admissions per period per unit of
	// utilization error (default 20).
	K float64 `yaml:"k" json:"k"`
	// Ti is the integral time (default 2.8s).
	Ti time.Duration `yaml:"ti" json:"ti"`
	// MaxRate bounds the output, in admissions per second (default 100000).
	MaxRate float64 `yaml:"max_rate" json:"max_rate"`
	// InitialIntegral is the integrator state I(0), in admissions per
	// period (default 0: start from an empty system as in the paper).
	InitialIntegral float64 `yaml:"initial_integral" json:"initial_integral"`
}

// DefaultKihlConfig returns the paper's parameters, h = 1 s, ρ_ref = 0.8,
// K = 20 and Ti = 2.8 s, with MaxRate 100000.
func DefaultKihlConfig() KihlConfig {
	return KihlConfig{Period: time.Second, RhoRef: 0.8, K: 20, Ti: 2800 * time.Millisecond, MaxRate: 100000}
}

// Validate reports the first invalid field.
func (c *KihlConfig) Validate() error {
	uMax := c.MaxRate * c.Period.Seconds()
	return firstError(
		checkPeriod("period", c.Period),
		checkWithin("rho_ref", c.RhoRef, '(', 0, 1, ']'),
		checkPositive("k", c.K),
		checkPositiveDuration("ti", c.Ti, "2.8s"),
		checkPositive("max_rate", c.MaxRate),
		invalidIf(!mathx.Finite(c.InitialIntegral) || c.InitialIntegral < 0 || c.InitialIntegral > uMax, "initial_integral", c.InitialIntegral,
			fmt.Sprintf("must be within [0, max_rate·period] = [0, %g]", uMax)),
	)
}

// New validates the configuration and returns a controller.
func (c *KihlConfig) New() (sluice.Controller, error) { return NewKihl(*c) }

// Kihl is PI control of server utilization through a token-bucket gate,
// after Andersson, Kihl, Robertsson and Wittenmark, "Admission Control of
// the Apache Web Server" / "Design and Evaluation of Load Control in Web
// Server Systems" (docs/algorithms.md §4).
//
// Every period h it reads the utilization ρ(k) (busy fraction in [0, 1])
// and sets the number of admissions u(k) allowed in the next period:
//
//	u(k)   = K·(ρ_ref − ρ(k)) + I(k)
//	I(k+1) = I(k) + K·h/Ti·(ρ_ref − ρ(k))
//
// u is clamped to [0, max_rate·h] and fed to a token bucket at rate u/h
// (the decision's New, in req/s). Anti-windup by conditional integration:
// the integrator does not move further in the direction of a saturation,
// i.e. it stops integrating while u is clamped at 0 (or max) and the error
// pushes further out, and while u ≥ the arrivals α(k) of the last period
// (the gate is not binding: everything offered was admitted) and the error
// is positive. Utilization above 1 is read as 1; a NaN, infinite or
// negative utilization or arrival count holds the setting.
//
// By priority: only when the stage asks (stage.Priority, ShedOn), the
// higher classes may run ahead of the token bucket; by default the
// paper's gate, which has no classes.
type Kihl struct {
	cfg   KihlConfig
	integ float64 // I(k), admissions per period
	cur   sluice.Decision
}

var _ sluice.Controller = (*Kihl)(nil)

// NewKihl returns a Kihl controller for a validated copy of cfg.
func NewKihl(cfg KihlConfig) (*Kihl, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	k := &Kihl{cfg: cfg, integ: cfg.InitialIntegral}
	u0 := clamp(cfg.InitialIntegral, 0, k.uMax())
	k.cur = sluice.Decision{Controller: "kihl", Kind: sluice.KindRate, Old: u0 / k.h(), New: u0 / k.h(),
		Reason: fmt.Sprintf("initial: u = I(0) = %.4g admissions per %v", u0, cfg.Period)}
	return k, nil
}

func (k *Kihl) h() float64    { return k.cfg.Period.Seconds() }
func (k *Kihl) uMax() float64 { return k.cfg.MaxRate * k.h() }

// Period returns h.
func (k *Kihl) Period() time.Duration { return k.cfg.Period }

// Current returns the setting in force.
func (k *Kihl) Current() sluice.Decision { return k.cur }

// Integral returns the integrator state I(k), in admissions per period.
func (k *Kihl) Integral() float64 { return k.integ }

// Update runs one PI step. Decision.New is the token rate u/h in req/s.
func (k *Kihl) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	old := k.cur.New
	rho, arrivals := m.Utilization, m.Arrivals
	if !usable(rho) || !usable(arrivals) {
		k.cur = decision(now, "kihl", sluice.KindRate, m, old, old, false,
			fmt.Sprintf("hold at %s: unusable input (utilization %v, arrivals %v)", fmtRate(old), rho, arrivals))
		return k.cur
	}
	if rho > 1 {
		rho = 1
	}
	e := k.cfg.RhoRef - rho
	v := k.cfg.K*e + k.integ
	u := clamp(v, 0, k.uMax())
	integrate, why := true, ""
	switch {
	case v <= 0 && e < 0:
		integrate, why = false, "; integrator held (u saturated at 0)"
	case v >= k.uMax() && e > 0:
		integrate, why = false, "; integrator held (u saturated at max)"
	case v >= arrivals && e > 0:
		integrate, why = false, fmt.Sprintf("; integrator held (u ≥ arrivals %.4g: gate not binding)", arrivals)
	}
	if integrate {
		k.integ += k.cfg.K * k.h() / k.cfg.Ti.Seconds() * e
	}
	rate := u / k.h()
	k.cur = decision(now, "kihl", sluice.KindRate, m, old, rate, true,
		fmt.Sprintf("ρ %.3f vs ρ_ref %.3f: u = %.4g·%.3f + I = %.4g admissions/period → %s%s",
			rho, k.cfg.RhoRef, k.cfg.K, e, u, fmtRate(rate), why))
	return k.cur
}
