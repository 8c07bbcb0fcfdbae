// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Ticket is an admitted request: the stage it entered, its class, when it
// arrived and when it started service (got its slot). Finish it exactly
// once (or go through a Lifecycle). The zero Ticket's methods do nothing.
type Ticket struct {
	s       *Stage
	class   int
	tenant  string  // its tenant, for a fair queue's cost (Tenants.Cost)
	charge  float64 // what its tag charged its tenant (0: it did not queue)
	hog     uint64  // its id in the stage's hog watch (0: none)
	epoch   uint32  // the stage's sample epoch at admission (see Fence)
	held    bool    // holds a slot of the stage's concurrency limit
	arrival time.Time
	start   time.Time
	seq     uint64 // 1 + the overtake meter's sequence number (0: none)
}

// Outcome is how an admitted request ended, as its caller saw it.
type Outcome struct {
	// OK is false for a failed request: an error status (5xx), a
	// transport failure or timeout, a client that gave up.
	OK bool
	// Excluded is time inside the request that says nothing about the
	// service: spent blocked writing to a slow client, or a delay the
	// caller injected (client shares). It is subtracted from the response
	// and service times.
	Excluded time.Duration
	// NoSample marks a request whose duration says nothing about the
	// service at all (a share rejection, a stream): it is counted but
	// never a response-time or service-time sample, nor charged to its
	// tenant (Tenants.Cost).
	NoSample bool
	// Cost is what the service reports the request cost (> 0; 0: none),
	// charged to its tenant under fair queueing with CostReported
	// instead of its service time.
	Cost time.Duration
}

// spent is what a request that left service cost: its service time and
// its reported cost; ok false for one that is not charged (a stream, a
// share rejection).
type spent struct {
	ok       bool
	success  bool // and succeeded
	service  time.Duration
	reported time.Duration
}

// Class returns the ticket's class index.
func (t Ticket) Class() int { return t.class }

// Start returns the time the request started service: it got its slot,
// or was admitted when the stage has no concurrency limit.
func (t Ticket) Start() time.Time { return t.start }

// Arrival returns the time the request arrived at the stage.
func (t Ticket) Arrival() time.Time { return t.arrival }

// Held reports whether the ticket holds a concurrency slot of its stage.
func (t Ticket) Held() bool { return t.held }

// Sent reports that the request was handed to the service now (the proxy
// calls it when it has written the request to the backend); it is
// SentTo(now, 0), for a service of one server.
func (t Ticket) Sent(now time.Time) { t.SentTo(now, 0) }

// SentTo reports that the request was handed to server now: server
// numbers the service's servers from 0 (the proxy's pool passes the
// backend's index). The overtake meter (auto.Config.Knee "overtakes") then
// orders the request among those of the same server by this moment rather
// than by its admission, which may differ from the order in which requests
// reach the service, and counts its overtakes among them only: requests
// sent to a faster server overtake a slower one's whatever their workers.
// It is safe to call from any goroutine and does nothing when the stage
// does not measure overtakes (Stage.MeasuresOvertakes) or the request
// already left service.
func (t Ticket) SentTo(now time.Time, server int) {
	if t.seq > 0 && t.s.otk != nil {
		t.s.otk.sent(t.seq-1, now, server)
	}
}

// Answered reports that the first byte of the service's answer arrived
// now (after Sent): the time between the two is the request's time in
// the service, and the rest of its time in service the caller's own
// (Measurements.BackendShare). Like Sent, it does nothing when the stage
// does not measure overtakes.
func (t Ticket) Answered(now time.Time) {
	if t.seq > 0 && t.s.otk != nil {
		t.s.otk.answered(t.seq-1, now)
	}
}

// Finish records the end of the request at now and releases its slot,
// which may go to a waiting request.
//
// The response time (now − arrival − Excluded) feeds the response-time
// windows; the service time (now − start − Excluded) feeds the
// service-time window of concurrency controllers. A failed request is
// never a service-time sample, and is a response-time sample only when
// its response time has already reached the controller's response-time
// target: it is then certainly over target, a censored observation whose
// true response time is at least that long. Without it a jammed backend,
// where every request times out and nothing completes, would leave SEDA
// and Yaksha with no samples and holding their setting. Faster failures
// say nothing about response time and are left out, so a timeout or an
// error never enters a window as a fast sample.
func (t Ticket) Finish(now time.Time, o Outcome) {
	s := t.s
	if s == nil {
		return
	}
	rt := now.Sub(t.arrival) - o.Excluded
	sample := !o.NoSample && (o.OK || rt >= time.Duration(s.censorAt.Load()))
	cs := s.classes[t.class]
	cs.rec.Complete(rt, sample)
	if s.agg != nil {
		s.agg.Complete(rt, sample)
	}
	if !o.OK {
		cs.errors.Add(1)
		cs.rec.Fail()
		if s.agg != nil {
			s.agg.Fail()
		}
	} else if !o.NoSample && s.conc != nil {
		d := now.Sub(t.start) - o.Excluded
		if t.epoch == s.epoch.Load() {
			s.svc.Record(d)
		}
		if s.svcTail != nil {
			s.svcTail.Record(d)
		}
	}
	// A failed request held its slot too: its tenant is charged for it.
	s.leaveService(t, now, spent{ok: !o.NoSample, success: o.OK, service: now.Sub(t.start) - o.Excluded, reported: o.Cost})
}

// Done is Finish at the wall clock's now with outcome o and no excluded
// time: the stage API of code that is not an HTTP proxy.
func (t Ticket) Done(o sluice.Outcome) { t.Finish(time.Now(), OutcomeOf(o)) }

// OutcomeOf returns the stage's Outcome of a request that ended with o:
// a failure is not OK; an ignored request is OK (not a failure) and no
// sample (nor charged to its tenant), as the proxy counts a request its
// client spoilt.
func OutcomeOf(o sluice.Outcome) Outcome {
	return Outcome{OK: o != sluice.Failure, NoSample: o == sluice.Ignore}
}

// Lifecycle is the state of one admitted request whose response may turn
// into a long-lived stream (a WebSocket upgrade, an event stream, a
// response longer than the stage's long_lived): active → streamed → done,
// or active → done. The proxy and the middleware share it, so both count
// streams the same way: a stream leaves service (its slot and the
// in-flight count) when it becomes one, and is counted as completed, never
// as a sample, when it ends. Its methods are safe for concurrent use and
// take effect once.
type Lifecycle struct {
	t     Ticket
	state atomic.Int32
}

const (
	lcActive int32 = iota
	lcStreamed
	lcDone
)

// Reset starts the lifecycle of ticket t (for pooled holders).
func (l *Lifecycle) Reset(t Ticket) {
	l.t = t
	l.state.Store(lcActive)
}

// Ticket returns the request's ticket.
func (l *Lifecycle) Ticket() Ticket { return l.t }

// Stream makes the request a stream at now: it leaves service and
// releases its slot. It reports whether it did (false after the first
// call, or once done).
func (l *Lifecycle) Stream(now time.Time) bool {
	if !l.state.CompareAndSwap(lcActive, lcStreamed) {
		return false
	}
	if l.t.s != nil {
		l.t.s.leaveService(l.t, now, spent{})
	}
	return true
}

// Streamed reports whether the request became a stream.
func (l *Lifecycle) Streamed() bool { return l.state.Load() == lcStreamed }

// Done ends the request at now with outcome o (a stream is never a
// sample). It reports whether it did (false after the first call).
func (l *Lifecycle) Done(now time.Time, o Outcome) bool {
	if l.state.CompareAndSwap(lcActive, lcDone) {
		l.t.Finish(now, o)
		return true
	}
	if l.state.CompareAndSwap(lcStreamed, lcDone) {
		l.t.finishStream(now, o.OK)
		return true
	}
	return false
}

// finishStream counts the end of a request that already left service.
func (t Ticket) finishStream(now time.Time, ok bool) {
	s := t.s
	if s == nil {
		return
	}
	cs := s.classes[t.class]
	cs.rec.Complete(0, false)
	if s.agg != nil {
		s.agg.Complete(0, false)
	}
	if !ok {
		cs.errors.Add(1)
		cs.rec.Fail()
		if s.agg != nil {
			s.agg.Fail()
		}
	}
}
