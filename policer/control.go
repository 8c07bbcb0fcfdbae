// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultPeriod is the control period of a policer whose Control names
// neither a period nor a controller: the papers' h = 1 s.
const DefaultPeriod = time.Second

// UtilizationSource is a CPU utilization sensor read at now, as a fraction
// in [0, 1] over the interval since its previous reading
// (monitor.UtilizationSource satisfies it).
type UtilizationSource interface {
	Utilization(now time.Time) (float64, error)
}

// Control is the policer's control loop: the controller that sets its
// global rate once per period, and the readings it takes. The zero value
// has no controller: a step only ends the period.
type Control struct {
	// Controller sets the global rate each period from the period's
	// measurements; the paper's is control.VoigtQueue, the PD controller
	// on the listen queue. nil: none (Step only collects the period, for
	// the counts the admin API shows).
	Controller sluice.Controller
	// Period is how often a runner steps the policer; 0 means the
	// controller's period, or DefaultPeriod without a controller.
	Period time.Duration
	// Queue, when set, fills Measurements.Queue every step: the listen
	// queue, the queue of accepted requests waiting for the server (the
	// proxy's backend wait queue), in requests.
	Queue func() float64
	// Utilization, when set, fills Measurements.Utilization every step:
	// the CPU guard (the rate may increase only while the CPU is below the
	// controller's util_ref). A reading that fails gives NaN, which the
	// controller reads as no guard for that period; the error is kept for
	// LastStep.
	Utilization UtilizationSource
}

// SetControl sets the policer's control loop. Call it before a runner
// first steps the policer (it is not safe for use concurrent with Step).
func (p *Policer) SetControl(c Control) error {
	if c.Period < 0 {
		return fmt.Errorf("policer: control period %v must be positive", c.Period)
	}
	p.ctl = c
	return nil
}

// Poll returns the control period: how often a runner calls Step
// (Control.Period, else the controller's period, else DefaultPeriod).
func (p *Policer) Poll() time.Duration {
	switch {
	case p.ctl.Period > 0:
		return p.ctl.Period
	case p.ctl.Controller != nil:
		return p.ctl.Controller.Period()
	}
	return DefaultPeriod
}

var _ sluice.Stepper = (*Policer)(nil)

// Step ends the policer's control period at now and runs its controller:
// it collects what the policer saw (Collect), fills the queue and the CPU
// guard's utilization into the measurements, calls the controller's
// Update and puts the new rate into force with SetRate. It returns the
// decision, or nil without a controller. With the paper's controller
// (control.VoigtQueue, docs/algorithms.md §1):
//
//	rate(t+1) = rate(t) + Kp·(q_ref − q(t)) − Kd·(q(t) − q(t−1))
//
// with its guards: while q(t) < q_ref the rate changes only if
// q(t) ≠ q(t−1), and it may increase only while the CPU utilization is
// below util_ref. Step, with Poll, makes the policer a sluice.Stepper: the
// proxy's stage.Runner and the simulator's sim.Runner drive it alike. It
// is safe for concurrent use (calls are serialised).
func (p *Policer) Step(now time.Time) []sluice.Decision {
	p.stepMu.Lock()
	defer p.stepMu.Unlock()
	m := p.Collect(now)
	if p.ctl.Queue != nil {
		m.Queue = p.ctl.Queue()
	}
	p.guardErr = ""
	if g := p.ctl.Utilization; g != nil {
		u, err := g.Utilization(now)
		if err != nil {
			u, p.guardErr = math.NaN(), err.Error()
		}
		m.Utilization = u
	}
	p.lastIn, p.stepped = m, true
	if p.ctl.Controller == nil {
		return nil
	}
	d := p.ctl.Controller.Update(now, m)
	if err := p.SetRate(now, d.New); err != nil {
		d.Reason += " (not applied: " + err.Error() + ")"
	}
	return []sluice.Decision{d}
}

// LastStep returns the measurements of the last Step, the CPU guard's
// error in it ("" for none), and false before the first Step.
func (p *Policer) LastStep() (m sluice.Measurements, guardErr string, ok bool) {
	p.stepMu.Lock()
	defer p.stepMu.Unlock()
	return p.lastIn, p.guardErr, p.stepped
}
