// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/policer"
)

// Policer is a Handler that puts each request through a policer.Policer,
// the very connection policer the proxy's listener asks at accept time, in
// virtual time: Admit with the engine's clock decides (a simulated request
// has no source address, so only the global bucket applies), admitted
// requests go on to Next, and a refused one finishes Rejected at once (the
// paper's early discard). A Runner steps the policer's control loop
// (policer.Policer.Step: its controller on the queue and the CPU guard)
// every Poll, as the proxy's runner does live.
type Policer struct {
	e    *Engine
	p    *policer.Policer
	next Handler
	run  *Runner
	// OnStep, if set, sees the decisions of every step.
	OnStep func(now time.Duration, ds []sluice.Decision)
}

// NewPolicer returns a handler driving p on e, passing admitted requests
// to next (nil completes them). It starts the policer's step ticker at
// Now; set p's control loop (policer.Policer.SetControl) before.
func NewPolicer(e *Engine, p *policer.Policer, next Handler) (*Policer, error) {
	if err := checkEngine("NewPolicer", e); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("sim: NewPolicer: nil policer")
	}
	s := &Policer{e: e, p: p, next: next}
	run, err := NewRunner(e, p)
	if err != nil {
		return nil, err
	}
	run.OnStep = func(now time.Duration, ds []sluice.Decision) {
		if s.OnStep != nil {
			s.OnStep(now, ds)
		}
	}
	s.run = run
	return s, nil
}

// Handle decides r.
func (s *Policer) Handle(r *Request) {
	if s.p.Admit(s.e.Time(), netip.Addr{}) != policer.Admitted {
		r.Finish(s.e.Now(), Rejected)
		return
	}
	pass(s.e, s.next, r)
}

// Stop stops stepping the policer.
func (s *Policer) Stop() { s.run.Stop() }
