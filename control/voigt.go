// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// VoigtCPUConfig configures the CPU rule. Start from DefaultVoigtCPUConfig.
type VoigtCPUConfig struct {
	// Period is the control period (default 1s).
	Period time.Duration `yaml:"period" json:"period"`
	// UtilRef is the utilization reference in percent, in (0, 100]
	// (default 90).
	UtilRef float64 `yaml:"util_ref" json:"util_ref"`
	// Kp is the proportional gain, in req/s per percentage point
	// (default 1/5).
	Kp float64 `yaml:"kp" json:"kp"`
	// MinRate, MaxRate bound the rate in req/s (defaults 10 and 100000).
	MinRate float64 `yaml:"min_rate" json:"min_rate"`
	MaxRate float64 `yaml:"max_rate" json:"max_rate"`
	// InitialRate is the starting rate in req/s (default 100; the hits
	// guard keeps it from growing beyond the demand).
	InitialRate float64 `yaml:"initial_rate" json:"initial_rate"`
}

// DefaultVoigtCPUConfig returns the paper's CPU controller: util_ref 90 %,
// Kp 1/5, min_rate 10.
func DefaultVoigtCPUConfig() VoigtCPUConfig {
	return VoigtCPUConfig{Period: time.Second, UtilRef: 90, Kp: 0.2, MinRate: 10, MaxRate: 100000, InitialRate: 100}
}

// Validate reports the first invalid field.
func (c *VoigtCPUConfig) Validate() error {
	return firstError(
		checkPeriod("period", c.Period),
		checkUtilRef(c.UtilRef),
		checkPositive("kp", c.Kp),
		checkRateBounds("min_rate", c.MinRate, "max_rate", c.MaxRate, "initial_rate", c.InitialRate),
	)
}

// checkUtilRef reports an error unless util_ref is a percentage in (0, 100].
func checkUtilRef(u float64) error {
	return invalidIf(!mathx.Finite(u) || u <= 0 || u > 100, "util_ref", u, "must be a percentage within (0, 100]")
}

// New validates the configuration and returns a controller.
func (c *VoigtCPUConfig) New() (sluice.Controller, error) { return NewVoigtCPU(*c) }

// VoigtCPU is the CPU controller (P) of Voigt and Gunningberg,
// "Handling Multiple Bottlenecks in Web Servers Using Adaptive Inbound
// Controls" (resource-based admission control with early discard;
// docs/algorithms.md §1). It sets the token rate of a filter rule that
// guards the CPU:
//
//	rate(t+1) = rate(t) + Kp·(util_ref − util(t))      util in percent
//
// clamped to [min_rate, max_rate], except for the hits guard: if
// hits(t) < 0.9·rate(t) and util(t) < util_ref, the rate is kept (a rate
// nobody uses is not grown). hits(t) is Measurements.Arrivals per second
// of the interval. A NaN, infinite or negative utilization or hit count
// holds the rate; utilization above 1 is read as 1.
//
// By priority: only when the stage asks (stage.Priority, ShedOn), the
// higher classes may run ahead of the token bucket; by default the
// paper's gate, which has no classes. VoigtQueue likewise.
type VoigtCPU struct {
	cfg VoigtCPUConfig
	cur sluice.Decision
}

var _ sluice.Controller = (*VoigtCPU)(nil)

// initialRate is the first decision of a Voigt controller: the initial
// rate in req/s.
func initialRate(controller string, rate float64) sluice.Decision {
	return sluice.Decision{Controller: controller, Kind: sluice.KindRate, Old: rate, New: rate,
		Reason: "initial: rate " + fmtRate(rate)}
}

// NewVoigtCPU returns a CPU controller for a validated copy of cfg.
func NewVoigtCPU(cfg VoigtCPUConfig) (*VoigtCPU, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &VoigtCPU{cfg: cfg, cur: initialRate("voigt-cpu", cfg.InitialRate)}, nil
}

// Period returns the control period.
func (v *VoigtCPU) Period() time.Duration { return v.cfg.Period }

// Current returns the setting in force.
func (v *VoigtCPU) Current() sluice.Decision { return v.cur }

// Update runs one P step.
func (v *VoigtCPU) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	old := v.cur.New
	if !usable(m.Utilization) || !usable(m.Arrivals) {
		v.cur = decision(now, "voigt-cpu", sluice.KindRate, m, old, old, false,
			fmt.Sprintf("hold at %s: unusable input (utilization %v, hits %v)", fmtRate(old), m.Utilization, m.Arrivals))
		return v.cur
	}
	util := 100 * min(m.Utilization, 1)
	hits := perSecond(m.Arrivals, m.Elapsed, v.cfg.Period)
	if hits < 0.9*old && util < v.cfg.UtilRef {
		v.cur = decision(now, "voigt-cpu", sluice.KindRate, m, old, old, false,
			fmt.Sprintf("hits guard: %.4g hits/s < 0.9 × rate %s with CPU %.1f%% < %.4g%%: rate kept", hits, fmtRate(old), util, v.cfg.UtilRef))
		return v.cur
	}
	rate := clamp(old+v.cfg.Kp*(v.cfg.UtilRef-util), v.cfg.MinRate, v.cfg.MaxRate)
	v.cur = decision(now, "voigt-cpu", sluice.KindRate, m, old, rate, true,
		fmt.Sprintf("CPU %.1f%% vs %.4g%%: rate %s %+.4g → %s", util, v.cfg.UtilRef, fmtRate(old), v.cfg.Kp*(v.cfg.UtilRef-util), fmtRate(rate)))
	return v.cur
}

// VoigtQueueConfig configures a queue rule (the connection policer or the
// bandwidth rule). Start from DefaultVoigtQueueConfig.
type VoigtQueueConfig struct {
	// Period is the control period (default 1s).
	Period time.Duration `yaml:"period" json:"period"`
	// QRef is the queue-length reference q_ref, in the queue's unit
	// (default 100: the listen queue; the paper's bandwidth rule uses 35
	// on an outgoing queue normalised to 100).
	QRef float64 `yaml:"q_ref" json:"q_ref"`
	// Kp is the proportional gain, in req/s per queue unit (default 1/16).
	Kp float64 `yaml:"kp" json:"kp"`
	// Kd is the derivative gain, in req/s per queue unit of change per
	// period (default 1/4).
	Kd float64 `yaml:"kd" json:"kd"`
	// MinRate, MaxRate bound the rate in req/s (or connections/s for the
	// policer) (defaults 10 and 100000).
	MinRate float64 `yaml:"min_rate" json:"min_rate"`
	MaxRate float64 `yaml:"max_rate" json:"max_rate"`
	// InitialRate is the starting rate (default 1000, the policer's).
	InitialRate float64 `yaml:"initial_rate" json:"initial_rate"`
	// UtilRef is the CPU utilization reference in percent above which the
	// rate may not increase (default 90). It applies only when the runner
	// passes a utilization (Measurements.Utilization not NaN), as it does
	// for the connection policer.
	UtilRef float64 `yaml:"util_ref" json:"util_ref"`
}

// DefaultVoigtQueueConfig returns the paper's connection-policer
// controller: QRef 100, Kp 1/16, Kd 1/4, InitialRate 1000 per second,
// MinRate 10; MaxRate 100000 and UtilRef 90.
func DefaultVoigtQueueConfig() VoigtQueueConfig {
	return VoigtQueueConfig{Period: time.Second, QRef: 100, Kp: 1.0 / 16, Kd: 0.25, MinRate: 10, MaxRate: 100000,
		InitialRate: 1000, UtilRef: 90}
}

// Validate reports the first invalid field.
func (c *VoigtQueueConfig) Validate() error {
	return firstError(
		checkPeriod("period", c.Period),
		checkPositive("q_ref", c.QRef),
		checkPositive("kp", c.Kp),
		checkNonNegative("kd", c.Kd),
		checkRateBounds("min_rate", c.MinRate, "max_rate", c.MaxRate, "initial_rate", c.InitialRate),
		checkUtilRef(c.UtilRef),
	)
}

// New validates the configuration and returns a controller.
func (c *VoigtQueueConfig) New() (sluice.Controller, error) { return NewVoigtQueue(*c) }

// VoigtQueue is the queue controller (PD) of Voigt and Gunningberg,
// "Handling Multiple Bottlenecks in Web Servers Using Adaptive Inbound
// Controls" (docs/algorithms.md §1), used for the connection policer (TCP
// SYN policing, on the listen queue) and for the bandwidth rule (on the
// outgoing queue):
//
//	rate(t+1) = rate(t) + Kp·(q_ref − q(t)) − Kd·(q(t) − q(t−1))
//
// Erratum: the paper prints "+ Kd·(q(t) − q(t−1))", which would raise the
// rate while the queue grows; its prose says the derivative makes the rate
// fall fast when the queue builds, so the minus sign is implemented.
// Guards: while q(t) < q_ref the rate is updated only if q(t) ≠ q(t−1);
// and when a utilization is given, the rate may only increase while it is
// below util_ref. Rates are clamped to [min_rate, max_rate]; q(−1) = 0; a
// NaN, infinite or negative queue length holds the rate (and is not
// remembered as q(t−1)).
type VoigtQueue struct {
	cfg   VoigtQueueConfig
	qPrev float64
	cur   sluice.Decision
}

var _ sluice.Controller = (*VoigtQueue)(nil)

// NewVoigtQueue returns a queue controller for a validated copy of cfg.
func NewVoigtQueue(cfg VoigtQueueConfig) (*VoigtQueue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &VoigtQueue{cfg: cfg, cur: initialRate("voigt-queue", cfg.InitialRate)}, nil
}

// Period returns the control period.
func (v *VoigtQueue) Period() time.Duration { return v.cfg.Period }

// Current returns the setting in force.
func (v *VoigtQueue) Current() sluice.Decision { return v.cur }

// Update runs one PD step.
func (v *VoigtQueue) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	old := v.cur.New
	q := m.Queue
	if !usable(q) {
		v.cur = decision(now, "voigt-queue", sluice.KindRate, m, old, old, false,
			fmt.Sprintf("hold at %s: unusable queue length %v", fmtRate(old), q))
		return v.cur
	}
	qPrev := v.qPrev
	v.qPrev = q
	if q < v.cfg.QRef && q == qPrev {
		v.cur = decision(now, "voigt-queue", sluice.KindRate, m, old, old, false,
			fmt.Sprintf("queue %.4g below q_ref %.4g and unchanged: rate kept at %s", q, v.cfg.QRef, fmtRate(old)))
		return v.cur
	}
	p, dTerm := v.cfg.Kp*(v.cfg.QRef-q), v.cfg.Kd*(q-qPrev)
	delta := p - dTerm
	if delta > 0 && mathx.Finite(m.Utilization) && 100*m.Utilization >= v.cfg.UtilRef {
		v.cur = decision(now, "voigt-queue", sluice.KindRate, m, old, old, false,
			fmt.Sprintf("queue %.4g (prev %.4g) would raise the rate by %.4g, but CPU %.1f%% ≥ %.4g%%: rate kept at %s",
				q, qPrev, delta, 100*m.Utilization, v.cfg.UtilRef, fmtRate(old)))
		return v.cur
	}
	rate := clamp(old+delta, v.cfg.MinRate, v.cfg.MaxRate)
	v.cur = decision(now, "voigt-queue", sluice.KindRate, m, old, rate, true,
		fmt.Sprintf("queue %.4g (prev %.4g, q_ref %.4g): rate %s %+.4g (P) %+.4g (D) → %s",
			q, qPrev, v.cfg.QRef, fmtRate(old), p, -dTerm, fmtRate(rate)))
	return v.cur
}
