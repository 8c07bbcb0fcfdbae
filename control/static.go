// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// StaticRateConfig configures the fixed-token-rate baseline.
type StaticRateConfig struct {
	// Rate is the fixed token rate in req/s (required).
	Rate float64 `yaml:"rate" json:"rate"`
	// Period is how often a runner records a decision (default 1s).
	Period time.Duration `yaml:"period" json:"period"`
}

// DefaultStaticRateConfig returns a config with the default period; Rate
// must be set.
func DefaultStaticRateConfig() StaticRateConfig { return StaticRateConfig{Period: time.Second} }

// Validate reports the first invalid field.
func (c *StaticRateConfig) Validate() error {
	return firstError(checkPositive("rate", c.Rate), checkPeriod("period", c.Period))
}

// New validates the configuration and returns a controller.
func (c *StaticRateConfig) New() (sluice.Controller, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return newStatic("static-rate", sluice.KindRate, c.Rate, c.Period,
		fmt.Sprintf("static: rate fixed at %s", fmtRate(c.Rate))), nil
}

// StaticConcurrencyConfig configures the fixed-concurrency-cap baseline.
type StaticConcurrencyConfig struct {
	// Limit is the maximum number of requests in flight (required).
	Limit int `yaml:"limit" json:"limit"`
	// Period is how often a runner records a decision (default 1s).
	Period time.Duration `yaml:"period" json:"period"`
}

// DefaultStaticConcurrencyConfig returns a config with the default period;
// Limit must be set.
func DefaultStaticConcurrencyConfig() StaticConcurrencyConfig {
	return StaticConcurrencyConfig{Period: time.Second}
}

// Validate reports the first invalid field.
func (c *StaticConcurrencyConfig) Validate() error {
	return firstError(checkAtLeast("limit", c.Limit, 1), checkPeriod("period", c.Period))
}

// New validates the configuration and returns a controller.
func (c *StaticConcurrencyConfig) New() (sluice.Controller, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return newStatic("static-concurrency", sluice.KindConcurrency, float64(c.Limit), c.Period,
		fmt.Sprintf("static: at most %d requests in flight", c.Limit)), nil
}

// NoneConfig configures the no-control baseline.
type NoneConfig struct {
	// Period is how often a runner records a decision (default 1s).
	Period time.Duration `yaml:"period" json:"period"`
}

// DefaultNoneConfig returns the default period.
func DefaultNoneConfig() NoneConfig { return NoneConfig{Period: time.Second} }

// Validate reports the first invalid field.
func (c *NoneConfig) Validate() error { return checkPeriod("period", c.Period) }

// New validates the configuration and returns a controller.
func (c *NoneConfig) New() (sluice.Controller, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s := newStatic("none", sluice.KindNone, 0, c.Period, "none: no admission control")
	s.cur.GateOff = true
	return s, nil
}

// Static is a baseline that never changes its setting: a fixed token rate
// (static-rate, like nginx limit_req), a fixed concurrency cap
// (static-concurrency, like HAProxy maxconn) or no control at all (none).
// Update only records the measurements it was given.
//
// By priority (stage.Priority, on by default): static-rate's bucket lets
// the higher classes run ahead of it, so that the lowest is refused first;
// static-concurrency's wait queue serves the highest class first and a
// full queue evicts the lowest's newest waiter.
type Static struct {
	period time.Duration
	cur    sluice.Decision
}

var _ sluice.Controller = (*Static)(nil)

func newStatic(name string, kind sluice.Kind, value float64, period time.Duration, reason string) *Static {
	return &Static{period: period, cur: sluice.Decision{Controller: name, Kind: kind, Old: value, New: value, Reason: reason}}
}

// Period returns the recording period.
func (s *Static) Period() time.Duration { return s.period }

// Current returns the fixed setting.
func (s *Static) Current() sluice.Decision { return s.cur }

// Set changes the setting to value at now, for a runner that decides the
// setting from outside (cluster mode sets an instance's part of a global
// static budget this way), and returns the decision with the old and new
// values and reason. A static-rate value is in req/s and must be finite
// and > 0; a static-concurrency value is a whole number of requests ≥ 1.
// The none baseline has no setting to change: that is an error, as is a
// bad value (the setting is then unchanged). Like Update, Set must be
// serialised with the controller's other calls.
func (s *Static) Set(now time.Time, value float64, reason string) (sluice.Decision, error) {
	switch s.cur.Kind {
	case sluice.KindRate:
		if err := checkPositive("rate", value); err != nil {
			return s.cur, err
		}
	case sluice.KindConcurrency:
		if !mathx.Finite(value) || value < 1 || value != math.Trunc(value) {
			return s.cur, badField("limit", value, "must be a whole number ≥ 1")
		}
	default:
		return s.cur, fmt.Errorf("control: %s has no setting to change", s.cur.Controller)
	}
	d := s.cur
	d.At, d.Old, d.New, d.Acted, d.Reason = now, s.cur.New, value, value != s.cur.New, reason
	s.cur = d
	return d, nil
}

// Update returns the fixed setting with the given inputs.
func (s *Static) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	d := s.cur
	d.At, d.Inputs, d.Class, d.Old, d.Acted = now, m, m.Class, d.New, false
	s.cur = d
	return d
}
