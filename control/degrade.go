// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// DegradeConfig configures SEDA service degradation (SEDAConfig.Degrade).
type DegradeConfig struct {
	// Enabled turns the stage's controller into a Degrader.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// QualityMin is the lowest quality level q_min, in (0, 1) (default 0.1).
	QualityMin float64 `yaml:"quality_min" json:"quality_min"`
	// QualityDown divides the quality on a run over target (default 1.2,
	// SEDA's adj_d).
	QualityDown float64 `yaml:"quality_down" json:"quality_down"`
	// QualityUp is added to the quality on a run below target (default
	// 0.02: quality rises slowly).
	QualityUp float64 `yaml:"quality_up" json:"quality_up"`
	// Admission re-enables admission control when the quality is at
	// q_min and the p90 is still over target (default true). false is
	// "degradation alone".
	Admission bool `yaml:"admission" json:"admission"`
}

// DefaultDegradeConfig returns the degradation defaults (disabled).
func DefaultDegradeConfig() DegradeConfig {
	return DegradeConfig{QualityMin: 0.1, QualityDown: 1.2, QualityUp: 0.02, Admission: true}
}

func (c *DegradeConfig) validate() error {
	return firstError(
		checkWithin("degrade.quality_min", c.QualityMin, '(', 0, 1, ')'),
		invalidIf(!mathx.Finite(c.QualityDown) || c.QualityDown <= 1, "degrade.quality_down", c.QualityDown, "must be a finite factor > 1"),
		checkWithin("degrade.quality_up", c.QualityUp, '(', 0, 1, ']'),
	)
}

// Degrader is SEDA service degradation (Welsh and Culler, "Adaptive
// Overload Control for Busy Internet Servers", §3.4): a stage lowers the
// quality level q it hands to the application when its p90 is over target
// and raises it slowly below target; when q is already at q_min and the p90
// is still over target, it re-enables admission control, which then runs
// the SEDA AIMD law on a token rate.
//
// With err computed from the smoothed p90 exactly as in SEDA:
//
//	gate off, err > err_d, q > q_min:   q = max(q_min, q/quality_down)
//	gate off, err > err_d, q = q_min:   gate on (if admission), rate = throughput/adj_d
//	gate off, err < 0:                  q = min(1, q + quality_up)
//	gate on:                            SEDA AIMD on the rate; q stays at q_min
//	gate on, err < err_i, no rejection: gate off (admission no longer needed)
//
// where throughput is the successful completions per second of the last
// interval (the rate the stage sustains at q_min). Decision.Quality is q, GateOff is true
// while admission control is off, and New is the token rate (rate_max while
// the gate is off).
type Degrader struct {
	seda    *SEDA
	cfg     DegradeConfig
	quality float64
	gateOn  bool
	last    sluice.Decision
}

var _ sluice.Controller = (*Degrader)(nil)
var _ sluice.SampleTriggered = (*Degrader)(nil)

// NewDegrader returns a degradation controller for a validated copy of
// cfg (cfg.Degrade must be enabled).
func NewDegrader(cfg SEDAConfig) (*Degrader, error) {
	if !cfg.Degrade.Enabled {
		return nil, badField("degrade.enabled", false, "must be true for a degradation controller")
	}
	s, err := NewSEDA(cfg)
	if err != nil {
		return nil, err
	}
	d := &Degrader{seda: s, cfg: cfg.Degrade, quality: 1}
	s.classes[0].rate = cfg.RateMax
	d.last = sluice.Decision{Controller: "seda", Kind: sluice.KindRate, Old: cfg.RateMax, New: cfg.RateMax,
		Quality: 1, GateOff: true, Reason: "initial: quality 1, admission control off"}
	return d, nil
}

// Period returns SEDA's timeout.
func (d *Degrader) Period() time.Duration { return d.seda.Period() }

// TriggerSamples returns SEDA's nreq.
func (d *Degrader) TriggerSamples() int { return d.seda.TriggerSamples() }

// Current returns the last decision (or the initial setting).
func (d *Degrader) Current() sluice.Decision { return d.last }

// Quality returns the current quality level.
func (d *Degrader) Quality() float64 { return d.quality }

// Update runs one degradation step with the p90 of the stage's samples.
func (d *Degrader) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	m.Class = 0
	cfg := d.seda.cfg
	oldRate, oldQ := d.seda.classes[0].rate, d.quality
	out := func(acted bool, reason string) sluice.Decision {
		dec := decision(now, "seda", sluice.KindRate, m, oldRate, d.seda.classes[0].rate, acted,
			fmt.Sprintf("quality %.3f → %.3f, %s", oldQ, d.quality, reason))
		dec.Quality = d.quality
		dec.GateOff = !d.gateOn
		d.last = dec
		return dec
	}
	if !usable(m.Samples) || m.Samples < 1 {
		return out(false, "hold: no completions since the last run")
	}
	if !usable(m.P90RT) {
		return out(false, fmt.Sprintf("hold: unusable p90 %v", m.P90RT))
	}
	d.seda.classes[0].noteDemand(m)
	cur, e, _ := d.seda.observe(0, m.P90RT)
	obs := fmt.Sprintf("p90 %s (cur %s, target %s, err %+.2f) %s: ", fmtSec(m.P90RT), fmtSec(cur), fmtSec(cfg.targetOf(0)), e, d.seda.trigger(m))
	if d.gateOn {
		if e < cfg.ErrI && usable(m.Rejected) && m.Rejected == 0 {
			d.gateOn = false
			d.seda.classes[0].rate = cfg.RateMax
			return out(true, obs+"well under target and nothing rejected: admission control off")
		}
		return out(true, obs+"admission on: "+d.seda.adjust(now, 0, e))
	}
	switch {
	case e > cfg.ErrD && d.quality > d.cfg.QualityMin:
		d.quality = clamp(d.quality/d.cfg.QualityDown, d.cfg.QualityMin, 1)
		return out(true, obs+"over target: quality lowered")
	case e > cfg.ErrD && d.cfg.Admission:
		d.gateOn = true
		tp := m.Goodput()
		if !usable(tp) {
			tp = 0
		}
		d.seda.classes[0].rate = clamp(tp/cfg.AdjD, cfg.RateMin, cfg.RateMax)
		return out(true, obs+fmt.Sprintf("over target at q_min: admission control on at %s (throughput %s ÷%g)",
			fmtRate(d.seda.classes[0].rate), fmtRate(tp), cfg.AdjD))
	case e > cfg.ErrD:
		return out(true, obs+"over target at q_min (admission disabled): hold")
	case e < 0:
		d.quality = clamp(d.quality+d.cfg.QualityUp, d.cfg.QualityMin, 1)
		return out(true, obs+"under target: quality raised")
	}
	return out(true, obs+"at target: hold")
}
