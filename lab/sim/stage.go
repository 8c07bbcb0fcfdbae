// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gate"
	"github.com/sluicehq/sluice/stage"
)

// Stage is a Handler that puts each request through a stage.Stage, the
// very stage the proxy and the middleware drive, in virtual time: the
// stage's gate and wait queue decide (Stage.ArriveRequest with the
// engine's clock, the request's class, tenant and Deadline), admitted
// requests go on to Next holding their ticket, a queued request waits
// for its slot, the end of its allowed wait or its own deadline, and
// leaves the queue when its sender goes away (Request.Cancel, as the
// middleware's Enter leaves it when the request's context ends), and
// every finished request ends its ticket at the virtual time it
// finished. A ticker calls the
// stage's Step as the live runner does (a Runner: every period, or every
// stage.MaxPoll for a sample-triggered controller), so its controller runs
// exactly as it runs live.
//
// A request that Next finishes Completed is a success; any other outcome
// is a failure. Rejected and dropped requests finish Rejected.
type Stage struct {
	e       *Engine
	st      *stage.Stage
	next    Handler
	classOf func(r *Request) int
	run     *Runner
	// TenantOf, if set, names the tenant of a request (stage.Request's
	// Tenant, for a stage with fair queueing among tenants).
	TenantOf func(r *Request) string
	// OnStep, if set, sees the decisions of every step.
	OnStep func(now time.Duration, ds []sluice.Decision)
	// OnReject, if set, is told why a request is rejected (the stage's
	// error: stage.ErrDeadline for a deadline), before it finishes; a
	// request whose sender left while it waited is not told.
	OnReject func(r *Request, err error)
	// ExactTrigger, for a sample-triggered controller (SEDA's nreq),
	// also steps the stage whenever a request finishes, so that the
	// controller runs at the very instant its nreq-th sample lands, as
	// the paper's stage does, instead of at the next poll (up to
	// stage.MaxPoll later, as the live runner does). Step decides what is
	// due, so a finish that completes nothing runs nothing. The default,
	// false, reproduces the live runner's timing exactly.
	ExactTrigger bool
}

// NewStage returns a handler driving st on e, passing admitted requests to
// next (nil completes them). classOf maps a request to the stage's class
// (nil: Request.Class). It starts the stage's step ticker at Now.
func NewStage(e *Engine, st *stage.Stage, next Handler, classOf func(r *Request) int) (*Stage, error) {
	if err := checkEngine("NewStage", e); err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("sim: NewStage: nil stage")
	}
	s := &Stage{e: e, st: st, next: next, classOf: classOf}
	run, err := NewRunner(e, st)
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

// Stop stops stepping the stage.
func (s *Stage) Stop() { s.run.Stop() }

// simWait is a request waiting for a slot.
type simWait struct {
	stage.Wait
	s     *Stage
	r     *Request
	timer Timer
}

// Granted starts the request's service with its ticket.
func (w *simWait) Granted(t stage.Ticket) {
	w.timer.Stop()
	w.s.serve(w.r, t)
}

// Dropped finishes the request as rejected.
func (w *simWait) Dropped(err error) {
	w.timer.Stop()
	w.s.rejected(w.r, err)
	w.r.Finish(w.s.e.Now(), Rejected)
}

// rejected tells OnReject.
func (s *Stage) rejected(r *Request, err error) {
	if s.OnReject != nil {
		s.OnReject(r, err)
	}
}

// Handle decides r.
func (s *Stage) Handle(r *Request) {
	c := r.Class
	if s.classOf != nil {
		c = s.classOf(r)
	}
	w := &simWait{s: s, r: r}
	w.Notify = w
	req := stage.Request{Class: c, Tenant: r.Tenant}
	if s.TenantOf != nil {
		req.Tenant = s.TenantOf(r)
	}
	if r.Deadline > 0 {
		req.Deadline = s.e.Base().Add(r.Deadline)
	}
	t, o, err := s.st.ArriveRequest(s.e.Time(), req, &w.Wait)
	switch o {
	case gate.Admitted:
		s.serve(r, t)
	case gate.Rejected:
		s.rejected(r, err)
		r.Finish(s.e.Now(), Rejected)
	default:
		w.timer = s.e.After(w.Deadline.Sub(s.e.Time()), func() {
			if s.st.Leave(s.e.Time(), &w.Wait, true) {
				// Its wait ended at its own deadline, or at the
				// stage's allowed wait.
				err := stage.ErrQueueTimeout
				if !req.Deadline.IsZero() && !w.Deadline.Before(req.Deadline) {
					err = stage.ErrDeadline
				}
				s.rejected(r, err)
				r.Finish(s.e.Now(), Rejected)
			}
		})
		r.OnCancel(func(r *Request) {
			// The sender left while the request waited: out of the
			// queue, counted as the middleware counts it (a rejection,
			// not a deadline's).
			if s.st.Leave(s.e.Time(), &w.Wait, false) {
				w.timer.Stop()
				r.Finish(s.e.Now(), Rejected)
			}
		})
	}
}

// serve runs an admitted request through next and ends its ticket when it
// finishes; where the stage measures overtakes, a pool's choice of member
// is the server the ticket was sent to.
func (s *Stage) serve(r *Request, t stage.Ticket) {
	if s.st.MeasuresOvertakes() {
		r.OnRoute(func(_ *Request, member int) { t.SentTo(s.e.Time(), member) })
	}
	// A stage with a hog rule may cancel the request in service, as the
	// middleware's watch cancels the handler's context: the sender's
	// side of the request ends (Request.Cancel) at that instant, and
	// whoever holds it stops its work and answers.
	t.Watch(func(error) { s.e.Schedule(s.e.Now(), r.Cancel) })
	r.Defer(func(r *Request) {
		t.Finish(s.e.Time(), stage.Outcome{OK: r.Outcome == Completed})
		if s.ExactTrigger && s.st.Triggered() {
			s.run.Step()
		}
	})
	pass(s.e, s.next, r)
}
