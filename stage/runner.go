// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ctxsleep"
)

// Runner drives a sluice.Stepper (a Stage, the connection policer) with
// the wall clock: every Stepper.Poll() it calls Step with the tick's time.
// It is the one loop of every live control step; the simulator runs its
// Step at the engine's clock instead (the lab's sim.Runner), so a stepper
// decides alike under both. A Runner holds no state of its own: Run may be
// called from one goroutine while tests call Step directly.
type Runner struct {
	// Stepper is what the runner steps; required.
	Stepper sluice.Stepper
	// OnStep, if set, sees the decisions of every step that took any
	// (a policy counts and logs them). It is called from the goroutine
	// that calls Step.
	OnStep func(now time.Time, ds []sluice.Decision)
}

// Run steps until ctx ends, every Stepper.Poll() of the wall clock.
func (r Runner) Run(ctx context.Context) {
	ctxsleep.Every(ctx, r.Stepper.Poll(), func(now time.Time) { r.Step(now) })
}

// Step runs one step at now, as Run does on each tick, and returns its
// decisions.
func (r Runner) Step(now time.Time) []sluice.Decision {
	ds := r.Stepper.Step(now)
	if r.OnStep != nil && len(ds) > 0 {
		r.OnStep(now, ds)
	}
	return ds
}
