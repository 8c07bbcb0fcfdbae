// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gate"
)

// ErrQueueTimeout is the rejection of a request that waited for a slot
// until the end of its allowed wait, was predicted to wait longer, or was
// evicted from a full queue by a higher class. It is gate.ErrQueueTimeout,
// the one error of a wait for a concurrency slot that ran out, and wraps
// sluice.ErrRejected. (A request that reaches its own deadline gets
// ErrDeadline.)
var ErrQueueTimeout = gate.ErrQueueTimeout

// Waiter is told how a queued request left the queue. The stage calls
// exactly one of its methods, once, after releasing its own locks (the
// call may come from the goroutine of another request).
type Waiter interface {
	// Granted hands the request its ticket: it holds a slot.
	Granted(t Ticket)
	// Dropped says the request was rejected while it waited (the end of
	// its allowed wait or its own deadline, eviction by a higher class):
	// answer it as a rejection. err is ErrQueueTimeout or ErrDeadline.
	Dropped(err error)
}

// Wait is one request waiting for a slot of a concurrency stage. The
// caller owns it and fills Notify before Arrive; Arrive sets Class,
// Tenant and Arrival and, when it queues the request, Deadline. A Wait may
// be reused once Notify has been told or Leave has returned true.
type Wait struct {
	// Class is the request's class index (out of range: the lowest).
	Class int
	// Tenant is the request's tenant (Request.Tenant), kept for fair
	// queueing within a class.
	Tenant string
	// Notify is told when the request leaves the queue.
	Notify Waiter
	// Arrival is when it arrived; Deadline when it stops waiting (the
	// caller arms a timer that calls Leave at Deadline): the end of the
	// allowed wait, or the request's own deadline when that comes first.
	Arrival, Deadline time.Time
	// byDeadline: Deadline is the request's own deadline.
	byDeadline bool
	// tag is its virtual finish time under fair queueing (Tenants), and
	// charge what it added to its tenant's (ĉ/w).
	tag, charge float64
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
	reserve  float64    // Priority's reserve, in force while wait ≤ 0 (0: none)
	fair     *fairQueue // weighted fair queueing among tenants (nil: FIFO)
}

func newConcGate(limit, maxQueue, classes int, timeout time.Duration) (*concGate, error) {
	sl, err := gate.NewClassSlots[*Wait](max(limit, 1), maxQueue, classes)
	if err != nil {
		return nil, err
	}
	return &concGate{slots: sl, wait: timeout, defWait: timeout, setLimit: max(limit, 1)}, nil
}

// apply puts a decision's limit and queue policy into force, and returns
// the waiters it lets in and those it evicts (trim).
func (c *concGate) apply(now time.Time, d sluice.Decision) (granted, evicted []*Wait) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.New >= 1 {
		c.setLimit = int(d.New)
		_ = c.slots.SetLimit(c.setLimit)
	}
	c.fair.reshare(c.setLimit)
	switch {
	case d.MaxWait > 0:
		c.wait = d.MaxWait
	case d.MaxWait < 0:
		c.wait = 0
	default:
		c.wait = c.defWait
	}
	c.drain = d.Drain
	if c.reserve > 0 {
		// The reserve protects the higher classes while the limit
		// rejects at once; a queue does it by its class order.
		r := 0.0
		if c.wait <= 0 {
			r = c.reserve
		}
		_ = c.slots.SetReserve(r)
	}
	for {
		w, ok := c.slots.Next(now)
		if !ok {
			break
		}
		c.left(w, true)
		granted = append(granted, w)
	}
	return granted, c.trim(nil)
}

// trim, under fair queueing with a drain prediction, evicts the waiters
// furthest ahead in virtual time (gate.Slots.DropNewestTagged) of each
// class while the waiters of the class and the higher ones exceed what
// drains within the allowed wait, n > wait·drain: they would wait past
// it, and learn it at once rather than at the end of their wait
// (longest-queue drop). It appends them to victims for the caller to
// answer once c's lock is released.
func (c *concGate) trim(victims []*Wait) []*Wait {
	if c.fair == nil || c.drain <= 0 || c.wait <= 0 {
		return victims
	}
	room := max(c.wait, c.fair.burst).Seconds() * c.drain
	for class := len(c.fair.vtime) - 1; class >= 0; class-- {
		for float64(c.slots.Ahead(class)) > room {
			w, ok := c.slots.DropNewestTagged(class)
			if !ok {
				break
			}
			c.left(w, false)
			victims = append(victims, w)
		}
	}
	return victims
}

// Arrive decides one request at now: Admitted with its ticket, Rejected,
// or (a concurrency stage with a wait queue) Queued, in which case w's
// Notify is told later how it left the queue and the caller must call
// Leave at w.Deadline if it is still waiting then. w may be nil for a
// stage without a concurrency limit, or to forbid queueing. Arrive reads
// no clock and does not block: the simulator and the live Enter both use
// it.
func (s *Stage) Arrive(now time.Time, class int, w *Wait) (Ticket, gate.Outcome) {
	t, o, _, _ := s.arrive(now, Request{Class: class}, w, nil)
	return t, o
}

// ArriveRequest is Arrive for a request with a deadline or a tenant; a
// rejection comes with its error (wrapping sluice.ErrRejected): ErrDeadline
// when the request's deadline has passed or its predicted wait for a slot
// exceeds what is left of it, the stage's plain rejection otherwise.
func (s *Stage) ArriveRequest(now time.Time, r Request, w *Wait) (Ticket, gate.Outcome, error) {
	t, o, _, err := s.arrive(now, r, w, nil)
	return t, o, err
}

// arrive is ArriveRequest that, when w is nil and mk is not, makes the
// waiter only if the request has to queue (the live path allocates it
// then), and returns the waiter it queued.
//
// It reads top to bottom: the class's counters, the request's deadline,
// the rate or drop gate, then, for a concurrency stage, one decision taken
// under the limit's lock (concGate.arrive) and acted on after it is
// released.
func (s *Stage) arrive(now time.Time, r Request, w *Wait, mk func() *Wait) (Ticket, gate.Outcome, *Wait, error) {
	class := s.classOf(r.Class)
	cs := s.classes[class]
	cs.rec.Arrive()
	if s.agg != nil {
		s.agg.Arrive()
	}
	if s.rejCap.Load() != 0 {
		s.capArr.Add(1)
	}
	shadowed := false // counted as shadow-rejected already
	if !r.Deadline.IsZero() && !r.Deadline.After(now) {
		// Its caller has given up: serving it would be work nobody waits
		// for.
		if !s.shadow {
			s.rejectDeadline(cs)
			return Ticket{}, gate.Rejected, nil, s.errDeadline
		}
		cs.shadowRejected.Add(1)
		shadowed = true
	}
	if !s.gates.AdmitAt(now, class) && !s.spare() {
		if !s.shadow {
			s.reject(cs)
			return Ticket{}, gate.Rejected, nil, s.errReject
		}
		if !shadowed {
			cs.shadowRejected.Add(1)
			shadowed = true
		}
	}
	c := s.conc
	if c == nil || s.gates.Off() {
		return s.admit(cs, class, r.Tenant, now, now, false), gate.Admitted, nil, nil
	}
	// Shadow mode never queues: it admits a request that finds no slot.
	mayWait := !s.shadow && (w != nil || mk != nil) && !s.atBound()
	r.Class = class
	v := c.arrive(now, r, w, mk, mayWait)
	if v.victim != nil {
		s.drop(v.victim, true, v.fairVictim)
	}
	for _, x := range v.trimmed {
		s.drop(x, true, true)
	}
	switch {
	case v.held:
		return s.admit(cs, class, r.Tenant, now, now, true), gate.Admitted, nil, nil
	case v.queued != nil:
		return Ticket{}, gate.Queued, v.queued, nil
	case s.shadow:
		if !shadowed {
			cs.shadowRejected.Add(1)
		}
		return s.admit(cs, class, r.Tenant, now, now, false), gate.Admitted, nil, nil
	}
	// No slot, and no room to wait: the predicted wait is beyond the
	// allowed one or beyond the request's deadline (counted as an
	// expired wait), or the stage has no queue, or the queue is full of
	// waiters of its class or higher.
	if v.tooLong {
		if v.deadline {
			s.expired.Add(1)
			s.rejectDeadline(cs)
			return Ticket{}, gate.Rejected, nil, s.errDeadline
		}
	}
	if s.spare() {
		// The controller's bound on the share rejected: admitted past the
		// limit (it holds no slot).
		return s.admit(cs, class, r.Tenant, now, now, false), gate.Admitted, nil, nil
	}
	if v.tooLong {
		s.expired.Add(1)
	}
	s.reject(cs)
	return Ticket{}, gate.Rejected, nil, s.errReject
}

// slotVerdict is what concGate.arrive decided for one request under the
// gate's lock, for the stage to act on once the lock is released.
type slotVerdict struct {
	held   bool  // it took a free slot
	queued *Wait // the waiter the queue took (nil: not queued)
	victim *Wait // a waiter evicted to make room (nil: none)
	// fairVictim: victim is of the arrival's class, evicted under fair
	// queueing as the waiter furthest ahead in virtual time.
	fairVictim bool
	// trimmed: waiters evicted under fair queueing because the arrival
	// went ahead of them (concGate.trim).
	trimmed  []*Wait
	tooLong  bool // the gate queues, but the predicted wait exceeds the allowed one
	deadline bool // tooLong because of the request's own deadline
}

// arrive decides, under c's lock, how request r that passed the stage's
// other gates at now meets the concurrency limit: a free slot (below its
// class's threshold, and nobody of its class or higher waiting) is taken;
// otherwise, when mayWait, the gate has a queue (an allowed wait
// c.wait > 0) and the predicted wait fits in the wait allowed and in
// what is left of the request's deadline,
//
//	fits ⇔ drain ≤ 0  ∨  (ahead + 1)/drain ≤ min(wait, deadline − now)
//	       (ahead: waiters served first, drain in req/s)
//
// the request is offered to the queue, as w or, when w is nil, a waiter
// from mk, which the queue may refuse when full or take by evicting a
// lower-class waiter. It waits until the end of the allowed wait or its
// deadline, whichever comes first. With a deadline budget
// (Tenants.DeadlineBudget) the deadline is held less its tenant's
// need_t, here and in the queue, and a request with no more than need_t
// left is refused before it takes even a free slot.
func (c *concGate) arrive(now time.Time, r Request, w *Wait, mk func() *Wait, mayWait bool) (v slotVerdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	class := r.Class
	need := c.fair.need(r.Tenant)
	if overBudget(now, r, need) {
		v.tooLong, v.deadline = true, true
		return v
	}
	if !c.fair.holds(r.Tenant) && c.slots.TryAdmitClass(class) {
		c.fair.took(r.Tenant)
		v.held = true
		return v
	}
	canWait := mayWait && c.wait > 0
	allowed := c.wait
	tag, charge := 0.0, 0.0
	if c.fair != nil && canWait {
		tag, charge = c.fair.tag(class, r.Tenant)
		// Fairness, not the controller's standing-queue cut, keeps the
		// light tenants' waits short (see Tenants).
		allowed = max(allowed, c.fair.burst)
	}
	wait, byDeadline := allowed, false
	if !r.Deadline.IsZero() {
		if left := r.Deadline.Sub(now) - need; left < wait {
			wait, byDeadline = left, true
		}
	}
	if canWait && c.drain > 0 {
		pred := float64(c.slots.AheadTagged(class, tag)+1) / c.drain
		if pred > wait.Seconds() {
			v.tooLong = true
			v.deadline = byDeadline && pred <= allowed.Seconds()
			return v
		}
	}
	if !canWait {
		return v
	}
	if w == nil {
		w = mk()
	}
	w.Class, w.Tenant, w.Arrival, w.Deadline, w.byDeadline, w.tag, w.charge = class, r.Tenant, now, now.Add(wait), byDeadline, tag, charge
	o, victim, evicted := c.slots.ArriveTagged(now, w, class, tag, w.Deadline)
	if evicted {
		c.left(victim, false)
		v.victim, v.fairVictim = victim, victim.Class == class
	}
	if o == gate.Queued {
		if c.fair != nil {
			c.fair.queued(w)
		}
		v.queued = w
		// Longest-queue drop: the arrival's tag may have put it ahead of
		// waiters that now wait past the allowed wait.
		for _, x := range c.trim(nil) {
			if x == w {
				v.queued, v.tooLong = nil, true
				continue
			}
			v.trimmed = append(v.trimmed, x)
		}
	}
	return v
}

// left records, under c's lock, that w left the queue (served: with a
// slot).
func (c *concGate) left(w *Wait, served bool) {
	if c.fair != nil {
		c.fair.left(w, served)
		if !served && w.charge > 0 {
			c.slots.Retag(w.Class, shift(w))
		}
	}
}

// spare reports whether a request about to be rejected is admitted
// instead, because its rejection would take the step's rejections past the
// controller's bound (Decision.MaxReject): f·arrivals. Otherwise, with a
// bound in force, it counts the rejection. Under concurrent arrivals the
// bound is approximate by the requests deciding at the same moment.
func (s *Stage) spare() bool {
	b := s.rejCap.Load()
	if b == 0 {
		return false
	}
	f := math.Float64frombits(b)
	if float64(s.capRej.Load()+1) > f*float64(s.capArr.Load()) {
		s.maxRejectAdmits.Add(1)
		return true
	}
	s.capRej.Add(1)
	return false
}

// atBound reports whether the step's rejections have reached the
// controller's bound (Decision.MaxReject): a request that finds no slot is
// then admitted past the limit rather than queued, since a waiter that
// times out would be one more rejection.
func (s *Stage) atBound() bool {
	b := s.rejCap.Load()
	return b != 0 && float64(s.capRej.Load()+1) > math.Float64frombits(b)*float64(s.capArr.Load())
}

// countCapped counts a rejection from the queue in the step's share
// (Decision.MaxReject).
func (s *Stage) countCapped() {
	if s.rejCap.Load() != 0 {
		s.capRej.Add(1)
	}
}

// admit counts an admission and returns its ticket.
func (s *Stage) admit(cs *classState, class int, tenant string, arrival, now time.Time, held bool) Ticket {
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
	var seq uint64
	if s.otk != nil {
		seq = s.otk.begin(now) + 1
	}
	var hog uint64
	if s.hog != nil {
		hog = s.hog.id()
	}
	return Ticket{s: s, class: class, tenant: tenant, epoch: s.epoch.Load(), held: held, arrival: arrival, start: now, seq: seq, hog: hog}
}

func (s *Stage) reject(cs *classState) {
	cs.rec.Reject()
	if s.agg != nil {
		s.agg.Reject()
	}
}

// rejectDeadline counts a rejection because of the request's deadline.
func (s *Stage) rejectDeadline(cs *classState) {
	cs.deadline.Add(1)
	s.reject(cs)
}

// drop rejects a waiter that left the queue without a slot: evicted by a
// higher class or, under fair queueing, by a tenant behind it in virtual
// time (fair, counted apart: ClassState.FairEvicted), or expired (at the
// end of its allowed wait or at its own deadline).
func (s *Stage) drop(w *Wait, evicted, fair bool) {
	s.expired.Add(1)
	s.countCapped()
	cs := s.classes[s.classOf(w.Class)]
	if fair {
		cs.fairEvicted.Add(1)
	}
	if !evicted && w.byDeadline {
		s.rejectDeadline(cs)
		w.Notify.Dropped(ErrDeadline)
		return
	}
	s.reject(cs)
	w.Notify.Dropped(ErrQueueTimeout)
}

func (s *Stage) classOf(c int) int {
	if c < 0 || c >= len(s.classes) {
		return len(s.classes) - 1
	}
	return c
}

// Leave takes a queued request out of the queue at now: its Deadline
// passed (timedOut) or its client went away. It reports whether the
// request was still waiting; false means Notify has been or is being
// told (the caller then waits for that). A request that leaves is counted
// as rejected, and, timed out at its own deadline, as a deadline
// rejection.
func (s *Stage) Leave(now time.Time, w *Wait, timedOut bool) bool {
	return s.leave(w, timedOut, timedOut && w.byDeadline)
}

// leave is Leave, with the deadline rejection said by the caller.
func (s *Stage) leave(w *Wait, timedOut, deadline bool) bool {
	c := s.conc
	if c == nil {
		return false
	}
	c.mu.Lock()
	removed := c.slots.Remove(w)
	if removed {
		c.left(w, false)
	}
	c.mu.Unlock()
	if removed {
		s.countCapped()
		if timedOut {
			s.expired.Add(1)
		}
		cs := s.classes[s.classOf(w.Class)]
		if deadline {
			s.rejectDeadline(cs)
		} else {
			s.reject(cs)
		}
	}
	return removed
}

// leaveService ends t's service at now: the in-flight count, and its slot,
// which goes to the next waiter. A request that cost something (cost.ok:
// it was served, not a stream) is charged to its tenant under a fair
// queue's measured cost (Tenants.Cost).
func (s *Stage) leaveService(t Ticket, now time.Time, cost spent) {
	if t.hog != 0 {
		s.hog.forget(t.hog)
	}
	if s.conc == nil {
		return
	}
	s.flight.end(t.start, now)
	if t.seq > 0 && s.otk != nil {
		s.otk.end(t.seq-1, now)
	}
	c := s.conc
	charge := cost.ok && c.fair != nil && c.fair.costs != nil
	if !t.held {
		if charge {
			c.mu.Lock()
			c.charge(t, cost)
			c.mu.Unlock()
		}
		return
	}
	c.mu.Lock()
	if charge {
		c.charge(t, cost)
	}
	c.fair.released(t.tenant)
	next, ok := c.slots.Release(now)
	if ok {
		c.left(next, true)
	}
	c.slots.Expire(now, c.collect)
	// The expired waiters leave with their own slice: the scratch's
	// array, reused, would be appended to by another release under the
	// lock while this one still reads it unlocked.
	var dropped []*Wait
	if len(c.expired) > 0 {
		dropped, c.expired = c.expired, nil
	}
	c.mu.Unlock()
	for _, w := range dropped {
		s.drop(w, false, false)
	}
	if ok {
		s.grant(next, now)
	}
}

// charge records, under c's lock, what t's request cost its tenant
// (Tenants.Cost), and settles its tag's charge: the difference between
// what it cost and what its tag charged moves its tenant's waiters and
// its next tags, as a deficit counter carries a flow's over- or
// under-use into its next round (Shreedhar and Varghese's DRR).
func (c *concGate) charge(t Ticket, cost spent) {
	d := c.fair.completed(t.tenant, cost.service, cost.reported, cost.success)
	if t.charge <= 0 {
		return
	}
	if delta := d/c.fair.weight(t.tenant) - t.charge; c.fair.settle(t.class, t.tenant, delta) {
		c.slots.Retag(t.class, func(x *Wait, tag float64) float64 {
			if x.Tenant == t.tenant {
				tag += delta
				x.tag = tag
			}
			return tag
		})
	}
}

func (c *concGate) collect(w *Wait) {
	c.left(w, false)
	c.expired = append(c.expired, w)
}

// grant admits waiter w, which got a slot at now.
func (s *Stage) grant(w *Wait, now time.Time) {
	class := s.classOf(w.Class)
	t := s.admit(s.classes[class], class, w.Tenant, w.Arrival, now, true)
	t.charge = w.charge
	w.Notify.Granted(t)
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
// when the stage queues it, waits for its slot. ctx's deadline is the
// request's (Request.Deadline) and the tenant of its sluice.Hop the
// request's tenant. It returns an error wrapping sluice.ErrRejected when
// the gate refuses it, its deadline passes or would pass before it gets
// a slot (ErrDeadline), or its wait ends without a slot; or ctx's error
// if ctx is canceled while it waits. It does not allocate: waiters, their
// channels and timers are pooled.
func (s *Stage) Enter(ctx context.Context, class int) (Ticket, error) {
	return s.EnterRequest(ctx, Request{Class: class})
}

// EnterRequest is Enter for r: its class and tenant, and its deadline, or
// ctx's when that is earlier or r has none, at r.Arrival (zero: the wall
// clock's now). The tenant of ctx's sluice.Hop is used when r has none.
func (s *Stage) EnterRequest(ctx context.Context, r Request) (Ticket, error) {
	now := r.Arrival
	if now.IsZero() {
		now = time.Now()
	}
	if d, ok := ctx.Deadline(); ok && (r.Deadline.IsZero() || d.Before(r.Deadline)) {
		r.Deadline = d
	}
	if s.conc == nil {
		t, _, _, err := s.arrive(now, r, nil, nil)
		return t, err
	}
	if r.Tenant == "" {
		r.Tenant = sluice.HopFrom(ctx).Tenant
	}
	t, o, w, err := s.arrive(now, r, nil, s.mkWait)
	switch o {
	case gate.Admitted:
		return t, nil
	case gate.Rejected:
		return Ticket{}, err
	}
	lw := w.Notify.(*liveWait)
	if lw.timer == nil {
		lw.timer = time.NewTimer(lw.Deadline.Sub(now))
	} else {
		lw.timer.Reset(lw.Deadline.Sub(now))
	}
	got, err := s.await(ctx, lw)
	lw.timer.Stop()
	lw.Wait = Wait{Notify: lw}
	s.waitPool.Put(lw)
	if err != nil {
		return Ticket{}, err
	}
	return got, nil
}

// await waits for lw's slot, its deadline or ctx, and leaves lw with no
// send pending on its channel.
func (s *Stage) await(ctx context.Context, lw *liveWait) (Ticket, error) {
	var r waitResult
	select {
	case r = <-lw.ch:
	case <-ctx.Done():
		// A context that reached its deadline is the request's own
		// deadline: a deadline rejection, as when the timer wins.
		late := errors.Is(ctx.Err(), context.DeadlineExceeded)
		if s.leave(&lw.Wait, late, late) {
			if late {
				return Ticket{}, s.errDeadline
			}
			return Ticket{}, ctx.Err()
		}
		// Granted or dropped at the same moment: take the result, and give
		// a granted slot back, since the request can no longer use it. A
		// request whose own deadline passed is still waited for: answer
		// it as a deadline rejection, as the other branches do; ctx's
		// error would say its client left, and nobody would answer it.
		if r = <-lw.ch; r.err == nil {
			r.t.Finish(time.Now(), Outcome{OK: false, NoSample: true})
		}
		if late {
			return Ticket{}, s.errDeadline
		}
		return Ticket{}, ctx.Err()
	case <-lw.timer.C:
		if s.Leave(time.Now(), &lw.Wait, true) {
			if lw.byDeadline {
				return Ticket{}, s.errDeadline
			}
			return Ticket{}, s.errTimeout
		}
		r = <-lw.ch // granted at the deadline: serve it
	}
	if r.err != nil {
		if errors.Is(r.err, ErrDeadline) {
			return Ticket{}, s.errDeadline
		}
		return Ticket{}, s.errTimeout
	}
	return r.t, nil
}

// Admit is the stage API of the middleware: Enter plus a done function
// that ends the request with its outcome (sluice.Success, Failure or
// Ignore, as Ticket.Done). Calling done more than once has no further
// effect; after a rejection done does nothing.
func (s *Stage) Admit(ctx context.Context, class int) (done func(sluice.Outcome), err error) {
	t, err := s.Enter(ctx, class)
	if err != nil {
		return func(sluice.Outcome) {}, err
	}
	var once sync.Once
	return func(o sluice.Outcome) { once.Do(func() { t.Done(o) }) }, nil
}
