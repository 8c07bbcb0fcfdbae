package stage

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gate"
)

// ErrQueueTimeout is the rejection of a request that waited for a slot
// until its deadline, was predicted to miss it, or was evicted from a full
// queue by a higher class. It wraps sluice.ErrRejected.
var ErrQueueTimeout = fmt.Errorf("stage: no concurrency slot within the allowed wait: %w", sluice.ErrRejected)

// Waiter is told how a queued request left the queue. The stage calls
// exactly one of its methods, once, after releasing its own locks (the
// call may come from the goroutine of another request).
type Waiter interface {
	// Granted hands the request its ticket: it holds a slot.
	Granted(t Ticket)
	// Dropped says the request was rejected while it waited (deadline,
	// eviction by a higher class): answer it as a rejection.
	Dropped(err error)
}

// Wait is one request waiting for a slot of a concurrency stage. The
// caller owns it and fills Class and Notify before Arrive; Arrive sets
// Arrival and, when it queues the request, Deadline. A Wait may be reused
// once Notify has been told or Leave has returned true.
type Wait struct {
	// Class is the request's class index (out of range: the lowest).
	Class int
	// Notify is told when the request leaves the queue.
	Notify Waiter
	// Arrival is when it arrived; Deadline when it stops waiting (the
	// caller arms a timer that calls Leave at Deadline).
	Arrival, Deadline time.Time
}

// concGate is a stage's concurrency limit with its wait queue: the
// deterministic gate.Slots behind a mutex, and the queue policy of the
// controller's last decision.
type concGate struct {
	mu       sync.Mutex
	slots    *gate.Slots[*Wait]
	wait     time.Duration // allowed wait for new arrivals; ≤ 0: none
	defWait  time.Duration // the stage's configured queue timeout
	drain    float64       // predicted slot release rate, req/s (0: no prediction)
	expired  []*Wait       // scratch: waiters to tell Dropped after unlock
	setLimit int
}

func newConcGate(limit, maxQueue, classes int, timeout time.Duration) (*concGate, error) {
	sl, err := gate.NewClassSlots[*Wait](max(limit, 1), maxQueue, classes)
	if err != nil {
		return nil, err
	}
	return &concGate{slots: sl, wait: timeout, defWait: timeout, setLimit: max(limit, 1)}, nil
}

// apply puts a decision's limit and queue policy into force.
func (c *concGate) apply(now time.Time, d sluice.Decision) []*Wait {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.New >= 1 {
		c.setLimit = int(d.New)
		_ = c.slots.SetLimit(c.setLimit)
	}
	switch {
	case d.MaxWait > 0:
		c.wait = d.MaxWait
	case d.MaxWait < 0:
		c.wait = 0
	default:
		c.wait = c.defWait
	}
	c.drain = d.Drain
	var granted []*Wait
	for {
		w, ok := c.slots.Next(now)
		if !ok {
			break
		}
		granted = append(granted, w)
	}
	return granted
}

// Arrive decides one request at now: Admitted with its ticket, Rejected,
// or (a concurrency stage with a wait queue) Queued, in which case w's
// Notify is told later how it left the queue and the caller must call
// Leave at w.Deadline if it is still waiting then. w may be nil for a
// stage without a concurrency limit, or to forbid queueing. Arrive reads
// no clock and does not block: the simulator and the live Enter both use
// it.
func (s *Stage) Arrive(now time.Time, class int, w *Wait) (Ticket, gate.Outcome) {
	t, o, _ := s.arrive(now, class, w, nil)
	return t, o
}

// arrive is Arrive that, when w is nil and mk is not, makes the waiter
// only if the request has to queue (the live path allocates it then), and
// returns the waiter it queued.
//
// It reads top to bottom: the class's counters, the rate or drop gate,
// then, for a concurrency stage, one decision taken under the limit's
// lock (concGate.arrive) and acted on after it is released.
func (s *Stage) arrive(now time.Time, class int, w *Wait, mk func() *Wait) (Ticket, gate.Outcome, *Wait) {
	class = s.classOf(class)
	cs := s.classes[class]
	cs.rec.Arrive()
	if s.agg != nil {
		s.agg.Arrive()
	}
	if !s.gates.AdmitAt(now, class) {
		if !s.shadow {
			s.reject(cs)
			return Ticket{}, gate.Rejected, nil
		}
		cs.shadowRejected.Add(1)
	}
	c := s.conc
	if c == nil || s.gates.Off() {
		return s.admit(cs, class, now, now, false), gate.Admitted, nil
	}
	// Shadow mode never queues: it admits a request that finds no slot.
	mayWait := !s.shadow && (w != nil || mk != nil)
	v := c.arrive(now, class, w, mk, mayWait)
	if v.victim != nil {
		s.drop(v.victim)
	}
	switch {
	case v.held:
		return s.admit(cs, class, now, now, true), gate.Admitted, nil
	case v.queued != nil:
		return Ticket{}, gate.Queued, v.queued
	case s.shadow:
		cs.shadowRejected.Add(1)
		return s.admit(cs, class, now, now, false), gate.Admitted, nil
	}
	// No slot, and no room to wait: the predicted wait is beyond the
	// allowed one (counted as an expired wait), or the stage has no
	// queue, or the queue is full of waiters of its class or higher.
	if v.tooLong {
		s.expired.Add(1)
	}
	s.reject(cs)
	return Ticket{}, gate.Rejected, nil
}

// slotVerdict is what concGate.arrive decided for one request under the
// gate's lock, for the stage to act on once the lock is released.
type slotVerdict struct {
	held    bool  // it took a free slot
	queued  *Wait // the waiter the queue took (nil: not queued)
	victim  *Wait // a lower-class waiter evicted to make room (nil: none)
	tooLong bool  // the gate queues, but the predicted wait exceeds the allowed one
}

// arrive decides, under c's lock, how a request of class that passed the
// stage's other gates at now meets the concurrency limit: a free slot
// (and nobody waiting) is taken; otherwise, when mayWait, the gate has a
// queue (an allowed wait c.wait > 0) and the predicted wait fits in it,
//
//	fits ⇔ drain ≤ 0  ∨  (ahead + 1)/drain ≤ wait   (ahead: waiters served first, drain in req/s)
//
// the request is offered to the queue, as w or, when w is nil, a waiter
// from mk, which the queue may refuse when full or take by evicting a
// lower-class waiter.
func (c *concGate) arrive(now time.Time, class int, w *Wait, mk func() *Wait, mayWait bool) (v slotVerdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots.TryAdmit() {
		v.held = true
		return v
	}
	canWait := mayWait && c.wait > 0
	fits := canWait && (c.drain <= 0 || float64(c.slots.Ahead(class)+1)/c.drain <= c.wait.Seconds())
	if !fits {
		v.tooLong = canWait
		return v
	}
	if w == nil {
		w = mk()
	}
	w.Class, w.Arrival, w.Deadline = class, now, now.Add(c.wait)
	o, victim, evicted := c.slots.ArriveClass(now, w, class, w.Deadline)
	if evicted {
		v.victim = victim
	}
	if o == gate.Queued {
		v.queued = w
	}
	return v
}

// admit counts an admission and returns its ticket.
func (s *Stage) admit(cs *classState, class int, arrival, now time.Time, held bool) Ticket {
	cs.rec.Admit()
	if s.agg != nil {
		s.agg.Admit()
	}
	if s.conc != nil {
		// What concurrency controllers steer by; rate and drop
		// controllers do without, and their hot path stays lean.
		s.flight.begin(now)
		s.waits.add(now.Sub(arrival))
	}
	return Ticket{s: s, class: class, epoch: s.epoch.Load(), held: held, arrival: arrival, start: now}
}

func (s *Stage) reject(cs *classState) {
	cs.rec.Reject()
	if s.agg != nil {
		s.agg.Reject()
	}
}

// drop rejects a waiter that left the queue without a slot.
func (s *Stage) drop(w *Wait) {
	s.expired.Add(1)
	s.reject(s.classes[s.classOf(w.Class)])
	w.Notify.Dropped(ErrQueueTimeout)
}

func (s *Stage) classOf(c int) int {
	if c < 0 || c >= len(s.classes) {
		return len(s.classes) - 1
	}
	return c
}

// Leave takes a queued request out of the queue at now: its deadline
// passed (timedOut) or its client went away. It reports whether the
// request was still waiting; false means Notify has been or is being
// told (the caller then waits for that). A request that leaves is counted
// as rejected.
func (s *Stage) Leave(now time.Time, w *Wait, timedOut bool) bool {
	c := s.conc
	if c == nil {
		return false
	}
	c.mu.Lock()
	removed := c.slots.Remove(w)
	c.mu.Unlock()
	if removed {
		if timedOut {
			s.expired.Add(1)
		}
		s.reject(s.classes[s.classOf(w.Class)])
	}
	return removed
}

// leaveService ends t's service at now: the in-flight count, and its slot,
// which goes to the next waiter.
func (s *Stage) leaveService(t Ticket, now time.Time) {
	if s.conc == nil {
		return
	}
	s.flight.end(t.start, now)
	if !t.held {
		return
	}
	c := s.conc
	c.mu.Lock()
	next, ok := c.slots.Release(now)
	c.slots.Expire(now, c.collect)
	dropped := c.expired
	c.expired = c.expired[:0]
	c.mu.Unlock()
	for _, w := range dropped {
		s.drop(w)
	}
	if ok {
		s.grant(next, now)
	}
}

func (c *concGate) collect(w *Wait) { c.expired = append(c.expired, w) }

// grant admits waiter w, which got a slot at now.
func (s *Stage) grant(w *Wait, now time.Time) {
	class := s.classOf(w.Class)
	w.Notify.Granted(s.admit(s.classes[class], class, w.Arrival, now, true))
}

// liveWait is the live path's Waiter: the result goes to a channel, and
// a timer of its own ends the wait. Both are reused with the waiter.
type liveWait struct {
	Wait
	ch    chan waitResult
	timer *time.Timer
}

type waitResult struct {
	t   Ticket
	err error
}

func (l *liveWait) Granted(t Ticket)  { l.ch <- waitResult{t: t} }
func (l *liveWait) Dropped(err error) { l.ch <- waitResult{err: err} }

// newLiveWait makes a waiter for the stage's pool. The pool is the
// stage's own, so a waiter (its channel, its timer) never serves another
// stage's requests, nor, under testing/synctest, another bubble's.
func newLiveWait() any {
	l := &liveWait{ch: make(chan waitResult, 1)}
	l.Notify = l
	return l
}

// getWait takes a waiter from the pool (Enter's mk).
func (s *Stage) getWait() *Wait { return &s.waitPool.Get().(*liveWait).Wait }

// Enter is the live, blocking form of Arrive: it decides one request of
// the given class (out of range: the lowest) at the wall clock's now and,
// when the stage queues it, waits for its slot. It returns an error
// wrapping sluice.ErrRejected when the gate refuses it or its wait ends
// without a slot, or ctx's error if ctx ends while it waits. It does not
// allocate: waiters, their channels and timers are pooled.
func (s *Stage) Enter(ctx context.Context, class int) (Ticket, error) {
	now := time.Now()
	if s.conc == nil {
		t, o := s.Arrive(now, class, nil)
		if o != gate.Admitted {
			return Ticket{}, s.errReject
		}
		return t, nil
	}
	t, o, w := s.arrive(now, class, nil, s.mkWait)
	switch o {
	case gate.Admitted:
		return t, nil
	case gate.Rejected:
		return Ticket{}, s.errReject
	}
	lw := w.Notify.(*liveWait)
	if lw.timer == nil {
		lw.timer = time.NewTimer(lw.Deadline.Sub(now))
	} else {
		lw.timer.Reset(lw.Deadline.Sub(now))
	}
	r, err := s.await(ctx, lw)
	lw.timer.Stop()
	lw.Wait = Wait{Notify: lw}
	s.waitPool.Put(lw)
	if err != nil {
		return Ticket{}, err
	}
	return r, nil
}

// await waits for lw's slot, its deadline or ctx, and leaves lw with no
// send pending on its channel.
func (s *Stage) await(ctx context.Context, lw *liveWait) (Ticket, error) {
	var r waitResult
	select {
	case r = <-lw.ch:
	case <-ctx.Done():
		if s.Leave(time.Now(), &lw.Wait, false) {
			return Ticket{}, ctx.Err()
		}
		// Granted or dropped at the same moment: take the result, and give
		// a granted slot back, since nobody waits for the answer.
		if r = <-lw.ch; r.err == nil {
			r.t.Finish(time.Now(), Outcome{OK: false, NoSample: true})
		}
		return Ticket{}, ctx.Err()
	case <-lw.timer.C:
		if s.Leave(time.Now(), &lw.Wait, true) {
			return Ticket{}, s.errTimeout
		}
		r = <-lw.ch // granted at the deadline: serve it
	}
	if r.err != nil {
		return Ticket{}, s.errTimeout
	}
	return r.t, nil
}

// Admit is the stage API of the middleware: Enter plus a done function
// that ends the request (successfully). Calling done more than once has no
// further effect.
func (s *Stage) Admit(ctx context.Context, class int) (done func(), err error) {
	t, err := s.Enter(ctx, class)
	if err != nil {
		return func() {}, err
	}
	var once sync.Once
	return func() { once.Do(func() { t.Done(true) }) }, nil
}
