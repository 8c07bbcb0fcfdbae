// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stage"
)

// Runner drives a sluice.Stepper (a stage.Stage, a policer.Policer) in
// virtual time the way stage.Runner drives it live: from the time it is
// made, a ticker of the engine calls stage.Runner's Step with the engine's
// clock every Stepper.Poll(), so the stepper runs exactly as it runs
// live, on the simulator's clock.
type Runner struct {
	e      *Engine
	run    stage.Runner
	ticker *Ticker
	// OnStep, if set, sees the decisions of every step that took any,
	// with the step's virtual time.
	OnStep func(now time.Duration, ds []sluice.Decision)
}

// NewRunner returns a runner stepping s on e, starting its ticker at Now.
func NewRunner(e *Engine, s sluice.Stepper) (*Runner, error) {
	if err := checkEngine("NewRunner", e); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("sim: NewRunner: nil stepper")
	}
	r := &Runner{e: e, run: stage.Runner{Stepper: s}}
	t, err := e.Every(s.Poll(), r.Step)
	if err != nil {
		return nil, err
	}
	r.ticker = t
	return r, nil
}

// Step runs one step at the engine's current time, as each tick does.
func (r *Runner) Step() {
	ds := r.run.Step(r.e.Time())
	if r.OnStep != nil && len(ds) > 0 {
		r.OnStep(r.e.Now(), ds)
	}
}

// Stop stops the ticker.
func (r *Runner) Stop() { r.ticker.Stop() }
