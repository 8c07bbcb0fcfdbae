// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/auto"
)

// Targeted is implemented by controllers whose response-time target can be
// changed at run time (the admin API's PUT /stages/{name}/target). The new
// target applies from the next step; the controller keeps its state.
type Targeted interface {
	SetTarget(target time.Duration) error
	Target() time.Duration
}

var (
	_ Targeted = (*SEDA)(nil)
	_ Targeted = (*Degrader)(nil)
	_ Targeted = (*Yaksha)(nil)
	_ Targeted = (*auto.Auto)(nil)
)

func checkTarget(target time.Duration) error {
	return checkPositiveDuration("target", target, "500ms")
}

// SetTarget sets the p90 target of every class.
func (s *SEDA) SetTarget(target time.Duration) error {
	if err := checkTarget(target); err != nil {
		return err
	}
	s.cfg.Target = target
	s.cfg.ClassTargets = nil
	return nil
}

// Target returns the p90 target of the highest class.
func (s *SEDA) Target() time.Duration { return time.Duration(s.cfg.targetOf(0) * float64(time.Second)) }

// SetTarget sets the p90 target.
func (d *Degrader) SetTarget(target time.Duration) error { return d.seda.SetTarget(target) }

// Target returns the p90 target.
func (d *Degrader) Target() time.Duration { return d.seda.Target() }

// SetTarget sets Tref. The gains are re-derived: at once for the static
// design, at the next step when self-tuning.
func (y *Yaksha) SetTarget(target time.Duration) error {
	if err := checkTarget(target); err != nil {
		return err
	}
	if !y.cfg.SelfTuning {
		g, err := designYaksha(target, y.cfg.Lambda0, y.cfg.Period)
		if err != nil {
			return fmt.Errorf("target: %w", err)
		}
		y.gains = g
	}
	y.cfg.Tref = target
	if !y.haveT {
		y.tOld = target.Seconds() // T(−1) is defined as Tref
	}
	return nil
}

// Target returns Tref.
func (y *Yaksha) Target() time.Duration { return y.cfg.Tref }

// Unwrap returns the wrapped controller.
func (l *Logged) Unwrap() sluice.Controller { return l.Controller }
