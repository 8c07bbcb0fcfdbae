// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"time"
)

// Request is one request of a simulated client, from the moment a source
// sends it until it finishes (completed, rejected or timed out).
type Request struct {
	// ID is unique within the engine (Engine.NextID).
	ID uint64
	// Type is the index of the request type (the stage: a URL class or
	// page type) in the source's Types.
	Type int
	// Class is the priority class; 0 is the highest.
	Class int
	// Client identifies the sender: the client of an open source, or
	// ClientBase + user index for closed-loop users.
	Client int
	// User is the index of the closed-loop user that sent the request
	// within its group, or −1 for an open source.
	User int
	// Attempt is 0 for a first try and counts retries after rejections.
	Attempt int
	// Demand is the CPU service demand in seconds.
	Demand float64
	// Size is the reply size in bytes.
	Size float64
	// Sent is the virtual time the request was sent: its intended send
	// time, from which its response time is measured.
	Sent time.Duration
	// Finished is the virtual time it finished; valid once Done.
	Finished time.Duration
	// Outcome says how it finished; valid once Done.
	Outcome Outcome
	// Deadline is the virtual time by which the sender needs the answer,
	// the deadline that travels with a request from hop to hop (the
	// X-Sluice-Timeout header, a context's deadline); 0 means none.
	// Stage admits against it (stage.Stage.ArriveRequest).
	Deadline time.Duration
	// Tenant is who the request is done for (X-Sluice-Tenant), kept by
	// Stage for fair queueing within a class.
	Tenant string
	// Data is free for scenarios (for example a proxy-side timestamp).
	Data any
	// OnFinish is called once when the request finishes, after the
	// functions registered with Defer; sources set it.
	OnFinish func(r *Request)

	done     bool
	canceled bool
	deferred []func(r *Request)
	cancels  []func(r *Request)
	routes   []func(r *Request, member int)
}

// ResponseTime returns Finished − Sent.
func (r *Request) ResponseTime() time.Duration { return r.Finished - r.Sent }

// Done reports whether the request has finished.
func (r *Request) Done() bool { return r.done }

// Defer registers fn to run when the request finishes, before OnFinish;
// deferred functions run in last-in-first-out order, like defer. Stages
// use it to release what they hold (a worker slot) and recorders to see
// the outcome.
func (r *Request) Defer(fn func(r *Request)) { r.deferred = append(r.deferred, fn) }

// OnCancel registers fn to run when the request's sender goes away
// (Cancel) before it finished; functions run newest first, like Defer.
// Stages use it to take a waiting request out of their queue, and a hop
// to stop the calls it makes on the request's behalf.
func (r *Request) OnCancel(fn func(r *Request)) { r.cancels = append(r.cancels, fn) }

// OnRoute registers fn to run when a Pool hands the request to one of its
// members, with the member's index; functions run in the order
// registered. Stages use it to tell their overtake meter which server
// the request went to (stage.Ticket.SentTo), as the proxy does.
func (r *Request) OnRoute(fn func(r *Request, member int)) { r.routes = append(r.routes, fn) }

// routed runs the functions registered with OnRoute.
func (r *Request) routed(member int) {
	for _, fn := range r.routes {
		fn(r, member)
	}
}

// Cancel says that the request's sender has gone (it gave up, closed its
// connection, or its context ended), as a server sees a client leave:
// the functions registered with OnCancel run, once. Cancel does not
// finish the request: whoever holds it decides (a queue drops it; a
// server may well finish work nobody waits for any more). It does
// nothing once the request has finished or was canceled.
func (r *Request) Cancel() {
	if r.done || r.canceled {
		return
	}
	r.canceled = true
	fns := r.cancels
	r.cancels = nil
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i](r)
	}
}

// Canceled reports whether the request's sender had gone (Cancel) before
// it finished.
func (r *Request) Canceled() bool { return r.canceled }

// Finish ends the request at virtual time now with outcome o: it sets
// Finished and Outcome, runs the deferred functions and then OnFinish. It
// reports false and does nothing if the request had already finished.
// The functions registered with OnCancel are dropped: a finished request
// can no longer be canceled.
func (r *Request) Finish(now time.Duration, o Outcome) bool {
	if r.done {
		return false
	}
	r.done = true
	r.cancels = nil
	r.Finished, r.Outcome = now, o
	for i := len(r.deferred) - 1; i >= 0; i-- {
		r.deferred[i](r)
	}
	r.deferred = nil
	if r.OnFinish != nil {
		r.OnFinish(r)
	}
	return true
}

// Handler is a stage of a simulated system. Handle takes over the request
// and must eventually call r.Finish exactly once, directly or through the
// stages it passes the request to.
type Handler interface {
	Handle(r *Request)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(r *Request)

// Handle calls f(r).
func (f HandlerFunc) Handle(r *Request) { f(r) }

// Admitter is the admission hook through which scenarios plug in the real
// gates (token bucket, probabilistic dropper, concurrency limit,
// connection policer). Admit is called once per request at virtual wall
// time now and reports whether the request may enter.
type Admitter interface {
	Admit(now time.Time, r *Request) bool
}

// AdmitFunc adapts a function to Admitter.
type AdmitFunc func(now time.Time, r *Request) bool

// Admit calls f(now, r).
func (f AdmitFunc) Admit(now time.Time, r *Request) bool { return f(now, r) }

// Compile-time guards.
var (
	_ Handler  = HandlerFunc(nil)
	_ Handler  = (*Gate)(nil)
	_ Handler  = (*Visit)(nil)
	_ Handler  = (*Hold)(nil)
	_ Handler  = (*Delay)(nil)
	_ Admitter = AdmitFunc(nil)
)

// Gate is an admission stage: it asks Admitter about each request, passes
// admitted ones to Next and finishes refused ones at once as Rejected. It
// measures nothing: to control and measure a stage, drive a stage.Stage
// through Stage.
type Gate struct {
	// Engine supplies the clock; required.
	Engine *Engine
	// Admitter decides; nil admits every request.
	Admitter Admitter
	// Next receives admitted requests; nil completes them at once.
	Next Handler
}

// Handle admits or rejects r.
func (g *Gate) Handle(r *Request) {
	if g.Admitter != nil && !g.Admitter.Admit(g.Engine.Time(), r) {
		r.Finish(g.Engine.Now(), Rejected)
		return
	}
	pass(g.Engine, g.Next, r)
}

// pass hands r to next, or completes it when next is nil.
func pass(e *Engine, next Handler, r *Request) {
	if next == nil {
		r.Finish(e.Now(), Completed)
		return
	}
	next.Handle(r)
}

// Demand returns r.Demand: the work of a CPU or FIFO visit.
func Demand(r *Request) float64 { return r.Demand }

// Size returns r.Size: the work of a link visit.
func Size(r *Request) float64 { return r.Size }

// Visit is a stage that sends each request through a Station as one job of
// Work(r) units, then on to Next. A request that does not complete at the
// station (rejected by a full queue, timed out) finishes with that outcome.
type Visit struct {
	// Engine supplies the clock; required.
	Engine *Engine
	// Station serves the jobs; required.
	Station Station
	// Work gives the job's work; nil means Demand.
	Work func(r *Request) float64
	// Next receives requests served in full; nil completes them.
	Next Handler

	done func(j *Job)
}

// Handle submits r's job to the station.
func (v *Visit) Handle(r *Request) {
	if v.done == nil {
		v.done = v.onDone
	}
	w := r.Demand
	if v.Work != nil {
		w = v.Work(r)
	}
	v.Station.Submit(&Job{Req: r, Work: w, Done: v.done})
}

func (v *Visit) onDone(j *Job) {
	if j.Outcome != Completed {
		j.Req.Finish(v.Engine.Now(), j.Outcome)
		return
	}
	pass(v.Engine, v.Next, j.Req)
}

// Hold is a stage that models a listen queue in front of a pool of
// workers: a request waits in Queue (a FIFO whose Servers are the workers,
// with its QueueLimit and Timeout) for a free worker, then runs through
// Next while holding the worker, which is released when the request
// finishes. A request refused by the full queue finishes Rejected, one
// that waits too long finishes TimedOut. Queue.Waiting() is the listen
// queue length.
type Hold struct {
	// Engine supplies the clock; required.
	Engine *Engine
	// Queue is the listen queue and worker pool; required. Jobs are
	// submitted in hold mode.
	Queue *FIFO
	// Next runs while the request holds a worker; nil completes it at once.
	Next Handler

	start, done func(j *Job)
}

// Handle queues r for a worker.
func (h *Hold) Handle(r *Request) {
	if h.start == nil {
		h.start, h.done = h.onStart, h.onDone
	}
	h.Queue.Submit(&Job{Req: r, OnStart: h.start, Done: h.done})
}

func (h *Hold) onStart(j *Job) {
	j.Req.Defer(func(*Request) { h.Queue.Release(j) })
	pass(h.Engine, h.Next, j.Req)
}

func (h *Hold) onDone(j *Job) {
	if j.Outcome != Completed {
		j.Req.Finish(h.Engine.Now(), j.Outcome)
	}
}

// Delay is a stage that holds each request for a delay chosen per request
// before passing it on: the hook through which a bandwidth-share controller
// (Li & Jamin) slows a client's replies. Fn may instead refuse the request
// (the standby/rejection path), which finishes it Rejected.
type Delay struct {
	// Engine supplies the clock; required.
	Engine *Engine
	// Fn returns the delay for r at virtual wall time now, and false to
	// reject it. nil means no delay.
	Fn func(now time.Time, r *Request) (time.Duration, bool)
	// Next receives the request after the delay; nil completes it.
	Next Handler
}

// Handle delays, passes or rejects r.
func (d *Delay) Handle(r *Request) {
	if d.Fn == nil {
		pass(d.Engine, d.Next, r)
		return
	}
	wait, ok := d.Fn(d.Engine.Time(), r)
	if !ok {
		r.Finish(d.Engine.Now(), Rejected)
		return
	}
	if wait <= 0 {
		pass(d.Engine, d.Next, r)
		return
	}
	d.Engine.After(wait, func() { pass(d.Engine, d.Next, r) })
}

// checkEngine is shared by constructors.
func checkEngine(what string, e *Engine) error {
	if e == nil {
		return fmt.Errorf("sim: %s: nil engine", what)
	}
	return nil
}
