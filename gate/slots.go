// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/enum"
)

// Outcome is what happened to an arrival at a Slots.
type Outcome uint8

const (
	// Admitted means the arrival got a slot at once.
	Admitted Outcome = iota + 1
	// Queued means the arrival waits in the queue for a slot.
	Queued
	// Rejected means the queue was full (or maxQueue is 0 and no slot was
	// free): the arrival is refused.
	Rejected
)

// String returns "admitted", "queued" or "rejected".
func (o Outcome) String() string { return enum.Name(o, outcomeNames[:], "Outcome") }

var outcomeNames = [...]string{Admitted: "admitted", Queued: "queued", Rejected: "rejected"}

// Discipline is the order in which a Slots serves its waiters within a
// class, and whether it kills a standing queue. The zero value is plain
// FIFO with deadlines only.
//
// CoDel and adaptive LIFO follow Facebook's request-queue variant of CoDel
// (Maurer, "Fail at Scale", ACM Queue 13(8), 2015): the queue is standing
// when it has not been empty for Interval; while it is standing, a waiter
// that has waited longer than Target is dropped (reported by Expire, to be
// answered 503) and new waiters get Target as their deadline, and with
// LIFO the newest waiter is served first, since the oldest are the ones
// most likely to have given up. A queue that empties within Interval is a
// good queue: it absorbs bursts under the normal deadlines.
type Discipline struct {
	// LIFO serves the newest waiter of a class first while the queue is
	// standing (adaptive LIFO); FIFO otherwise.
	LIFO bool
	// CoDel enables dropping waiters older than Target while the queue is
	// standing.
	CoDel bool
	// Target is CoDel's M, the longest wait tolerated in a standing queue
	// (default 5ms).
	Target time.Duration
	// Interval is CoDel's N: the queue is standing when it has not been
	// empty for this long (default 100ms). LIFO without CoDel uses it too.
	Interval time.Duration
}

// Defaults of Discipline.
const (
	DefaultCoDelTarget   = 5 * time.Millisecond
	DefaultCoDelInterval = 100 * time.Millisecond
)

// withDefaults fills Target and Interval.
func (d Discipline) withDefaults() Discipline {
	if d.Target <= 0 {
		d.Target = DefaultCoDelTarget
	}
	if d.Interval <= 0 {
		d.Interval = DefaultCoDelInterval
	}
	return d
}

// slotEntry is one waiter in the queue.
type slotEntry[T comparable] struct {
	t        T
	arrival  time.Time
	deadline time.Time // zero: never expires
	tag      float64   // virtual finish time under fair queueing (SetFair)
}

// ring is a FIFO of waiters that grows by doubling up to a bound and is
// then reused.
type ring[T comparable] struct {
	buf  []slotEntry[T] // len(buf) is its capacity
	head int            // index in buf of the oldest waiter
	n    int
}

func (r *ring[T]) ptr(i int) *slotEntry[T] {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return &r.buf[j]
}

func (r *ring[T]) at(i int) slotEntry[T] { return *r.ptr(i) }

func (r *ring[T]) push(e slotEntry[T], bound int) {
	if r.n == len(r.buf) {
		c := max(2*len(r.buf), 8)
		c = min(c, max(bound, r.n+1))
		buf := make([]slotEntry[T], c)
		for i := 0; i < r.n; i++ {
			buf[i] = r.at(i)
		}
		r.buf, r.head = buf, 0
	}
	*r.ptr(r.n) = e
	r.n++
}

func (r *ring[T]) popFront() slotEntry[T] {
	p := r.ptr(0)
	e := *p
	*p = slotEntry[T]{}
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return e
}

func (r *ring[T]) popBack() slotEntry[T] {
	p := r.ptr(r.n - 1)
	e := *p
	*p = slotEntry[T]{}
	r.n--
	return e
}

// segs returns the waiters as at most two contiguous slices, oldest
// first.
func (r *ring[T]) segs() (a, b []slotEntry[T]) {
	if end := r.head + r.n; end <= len(r.buf) {
		return r.buf[r.head:end], nil
	}
	return r.buf[r.head:], r.buf[:r.head+r.n-len(r.buf)]
}

// minTag returns the index of the oldest waiter with the smallest tag
// (-1 when empty).
func (r *ring[T]) minTag() int {
	a, b := r.segs()
	best, bt := -1, math.Inf(1)
	for i := range a {
		if a[i].tag < bt {
			best, bt = i, a[i].tag
		}
	}
	for i := range b {
		if b[i].tag < bt {
			best, bt = len(a)+i, b[i].tag
		}
	}
	return best
}

// maxTag returns the index of the newest waiter with the largest tag (-1
// when empty).
func (r *ring[T]) maxTag() int {
	a, b := r.segs()
	best, bt := -1, math.Inf(-1)
	for i := range a {
		if a[i].tag >= bt {
			best, bt = i, a[i].tag
		}
	}
	for i := range b {
		if b[i].tag >= bt {
			best, bt = len(a)+i, b[i].tag
		}
	}
	return best
}

// countTag returns the number of waiters whose tag is ≤ tag.
func (r *ring[T]) countTag(tag float64) int {
	a, b := r.segs()
	n := 0
	for i := range a {
		if a[i].tag <= tag {
			n++
		}
	}
	for i := range b {
		if b[i].tag <= tag {
			n++
		}
	}
	return n
}

// removeAt removes the i-th oldest waiter, shifting the shorter side.
func (r *ring[T]) removeAt(i int) {
	if i < r.n/2 {
		for j := i; j > 0; j-- {
			*r.ptr(j) = r.at(j - 1)
		}
		r.popFront()
		return
	}
	for j := i; j < r.n-1; j++ {
		*r.ptr(j) = r.at(j + 1)
	}
	r.popBack()
}

// Slots is a concurrency limit with a bounded wait queue: at most Limit
// requests hold a slot at once; an arrival that finds no free slot waits
// in a queue of at most maxQueue entries (the papers' listen queue), and
// each freed slot goes to a waiter whose deadline has not passed: the
// waiter of the highest class (class 0 first), the oldest of that class
// (or the newest, under adaptive LIFO while the queue is standing). A
// queue with one class is plain FIFO. T identifies a request (an id in the
// simulator, a waiter pointer live).
//
// Slots is the deterministic core shared by the simulator and the live
// runtime: it never blocks, reads no clock and starts no goroutine; time
// is an argument. A waiter expires when its deadline ≤ now; a zero
// deadline never expires. Expired waiters, and waiters CoDel drops, are
// removed by Expire, and also by Release, Next and a full-queue Arrive
// when they meet them; those keep the removed waiters aside until the next
// Expire reports them, so a caller that uses deadlines or CoDel must call
// Expire after Release and Next (the simulator does it at every event).
// Expired waiters still in the queue count in QueueLen.
//
// Lowering the limit never revokes a held slot: InFlight may exceed Limit
// until enough releases happen. Raising it frees slots for waiters, which
// the caller pulls with Next.
//
// A reserve r in [0, 1) (SetReserve; a new Slots has none) gives the
// higher classes room beyond the limit: with n classes and limit L, class
// c takes a slot only while fewer than
//
//	T_c = L + ⌈r·L·(n − 1 − c)/(n − 1)⌉
//
// slots are held (the lowest class sees L, the highest L + ⌈r·L⌉). Since
// T_c falls with c, a class is refused a slot only when every lower class
// already is: the rule of the SRE book's criticality ("a backend task
// will only reject requests of a given criticality if it's already
// rejecting all requests of all lower criticalities", Beyer et al., Site
// Reliability Engineering, ch. 21), as Envoy's per-priority circuit
// breakers give each routing priority a limit of its own. The lowest
// class alone still gets the whole limit, so a controller that measures
// what the limit lets through (bbr's Little's law, gradient2's RTT) sees
// the same with or without the reserve; a higher class arriving on a
// limit full of lower ones gets in up to r·L beyond it, which a
// controller sees and corrects at its next step. With one class, or
// r = 0, every class sees L.
//
// Each class's queue is a ring buffer that grows by doubling up to
// maxQueue and is then reused, so there is no allocation per operation in
// steady state. Remove is O(distance to the nearer end of the queue);
// everything else is O(classes) amortised, except Expire, which scans the
// queue when some waiter may have expired.
//
// The zero value is not usable; use NewSlots or NewClassSlots. Slots is
// not safe for concurrent use: it belongs to one goroutine (or to a
// caller's lock).
type Slots[T comparable] struct {
	limit    int
	maxQueue int
	inFlight int
	disc     Discipline

	classes []ring[T]
	n       int // waiters in all classes

	// reserve is SetReserve's r; thr[c] is class c's threshold T_c, nil
	// when every class sees the limit (r = 0 or one class).
	reserve float64
	thr     []int

	// lastEmpty is the last time the queue was seen empty (CoDel's
	// "standing" test); valid once seen.
	lastEmpty time.Time

	// minDeadline is a lower bound of the non-zero deadlines in the queue
	// (valid when hasMin); Expire skips its scan while now < minDeadline.
	minDeadline time.Time
	hasMin      bool

	// expired holds waiters removed as expired (or dropped by CoDel) by
	// Release, Next or Arrive, to be reported by the next Expire.
	expired []T

	// fair: within a class, serve the smallest tag first (SetFair).
	fair bool
	// hold: waiters that may not take a slot now (SetHold; nil: none).
	hold func(T) bool
}

// NewSlots returns an empty single-class Slots with the given concurrency
// limit (≥ 1) and queue bound (≥ 0; 0 means arrivals that find no free
// slot are rejected at once). The error names the bad parameter and its
// value.
func NewSlots[T comparable](limit, maxQueue int) (*Slots[T], error) {
	return NewClassSlots[T](limit, maxQueue, 1)
}

// NewClassSlots is NewSlots with the given number of priority classes
// (≥ 1): class 0 is served first.
func NewClassSlots[T comparable](limit, maxQueue, classes int) (*Slots[T], error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if maxQueue < 0 {
		return nil, fmt.Errorf("gate: maxQueue = %d: must be >= 0", maxQueue)
	}
	if classes < 1 {
		return nil, fmt.Errorf("gate: classes = %d: must be >= 1", classes)
	}
	return &Slots[T]{limit: limit, maxQueue: maxQueue, classes: make([]ring[T], classes)}, nil
}

func checkLimit(limit int) error {
	if limit < 1 {
		return fmt.Errorf("gate: limit = %d: must be >= 1", limit)
	}
	return nil
}

// SetDiscipline sets the serving order and CoDel (zero durations take
// their defaults). It applies from the next operation.
func (s *Slots[T]) SetDiscipline(d Discipline) { s.disc = d.withDefaults() }

// Discipline returns the discipline in force.
func (s *Slots[T]) Discipline() Discipline { return s.disc }

// SetFair turns fair queueing within each class on or off. With it on, a
// class's waiters are served in the order of the tags their callers give
// them (ArriveTagged: a virtual finish time, smallest first; equal tags
// in arrival order) instead of FIFO, adaptive LIFO is ignored, Ahead
// counts only the waiters a new arrival's tag would follow, and a full
// queue evicts, within the arrival's class too, the waiter with the
// largest tag when that tag exceeds the arrival's. Finding the next
// waiter costs O(waiters of its class). The tags are the caller's
// business (stage's weighted fair queueing computes them per tenant);
// with equal tags in arrival order, fair queueing is FIFO.
func (s *Slots[T]) SetFair(on bool) { s.fair = on }

// Fair reports whether fair queueing is on.
func (s *Slots[T]) Fair() bool { return s.fair }

// Limit returns the concurrency limit.
func (s *Slots[T]) Limit() int { return s.limit }

// MaxQueue returns the queue bound.
func (s *Slots[T]) MaxQueue() int { return s.maxQueue }

// InFlight returns the number of slots held. It may exceed Limit after the
// limit was lowered.
func (s *Slots[T]) InFlight() int { return s.inFlight }

// QueueLen returns the number of waiters in the queue, including expired
// waiters that no call has removed yet.
func (s *Slots[T]) QueueLen() int { return s.n }

// Ahead returns the number of waiters that would be served before a new
// arrival of class c: the waiters of classes 0..c (under FIFO; under LIFO
// those of class c are behind it, but CoDel then bounds their number).
func (s *Slots[T]) Ahead(c int) int {
	c = s.clampClass(c)
	n := 0
	for i := 0; i <= c; i++ {
		n += s.classes[i].n
	}
	return n
}

// AheadTagged is Ahead for a new arrival of class c with the given tag
// under fair queueing: the waiters of the higher classes, and those of
// class c whose tag is not above it. Without fair queueing it is Ahead.
func (s *Slots[T]) AheadTagged(c int, tag float64) int {
	c = s.clampClass(c)
	if !s.fair {
		return s.Ahead(c)
	}
	n := 0
	for i := 0; i < c; i++ {
		n += s.classes[i].n
	}
	return n + s.classes[c].countTag(tag)
}

// DropNewestTagged removes from class c's queue, under fair queueing, the
// waiter with the largest tag (the newest among equal tags) and returns
// it: longest-queue drop, the waiter of the tenant furthest ahead in
// virtual time. The caller answers it as rejected. Without fair queueing,
// or with class c's queue empty, it does nothing and returns ok = false.
func (s *Slots[T]) DropNewestTagged(c int) (victim T, ok bool) {
	c = s.clampClass(c)
	r := &s.classes[c]
	i := r.maxTag()
	if !s.fair || i < 0 {
		return victim, false
	}
	victim = r.ptr(i).t
	r.removeAt(i)
	s.n--
	return victim, true
}

// Retag sets the tag of each waiter of class c to fn(waiter, its tag),
// under fair queueing: how the caller keeps its tags consistent when a
// waiter leaves without being served (its tenant's later waiters move
// up by what it was charged). It costs O(waiters of class c); fn must
// not call methods of s. Without fair queueing it does nothing.
func (s *Slots[T]) Retag(c int, fn func(t T, tag float64) float64) {
	if !s.fair {
		return
	}
	c = s.clampClass(c)
	r := &s.classes[c]
	for i := 0; i < r.n; i++ {
		e := r.ptr(i)
		e.tag = fn(e.t, e.tag)
	}
}

// PendingExpired returns the number of expired waiters removed from the
// queue by Release, Next or Arrive that the next Expire will report.
func (s *Slots[T]) PendingExpired() int { return len(s.expired) }

// Standing reports whether the queue is a standing queue at now: it holds
// waiters and has not been empty for the discipline's interval.
func (s *Slots[T]) Standing(now time.Time) bool {
	if s.n == 0 {
		return false
	}
	iv := s.disc.Interval
	if iv <= 0 {
		iv = DefaultCoDelInterval
	}
	return !s.lastEmpty.IsZero() && now.Sub(s.lastEmpty) >= iv
}

// TryAdmit takes a slot if one is free and nobody waits (no barging past
// the queue), and reports whether it did.
func (s *Slots[T]) TryAdmit() bool {
	if s.inFlight < s.limit && (s.n == 0 || s.onlyHeld(len(s.classes)-1)) {
		s.inFlight++
		return true
	}
	return false
}

// TryAdmitClass takes a slot for a request of class c (out of range: the
// lowest) if one is free below the class's threshold (SetReserve) and no
// waiter of class c or higher waits (no barging past them), and reports
// whether it did. Without a reserve it is TryAdmit.
func (s *Slots[T]) TryAdmitClass(c int) bool {
	if s.thr == nil {
		return s.TryAdmit()
	}
	c = s.clampClass(c)
	if s.inFlight < s.thr[c] && (s.Ahead(c) == 0 || s.onlyHeld(c)) {
		s.inFlight++
		return true
	}
	return false
}

// SetReserve sets the share r in [0, 1) of the limit by which the higher
// classes may exceed it (see Slots); on error it is unchanged. It applies
// from the next operation: after raising it, call Next until it returns
// false to admit the waiters that now fit.
func (s *Slots[T]) SetReserve(r float64) error {
	if !(r >= 0 && r < 1) {
		return fmt.Errorf("gate: reserve = %v: must be within [0, 1)", r)
	}
	s.reserve = r
	s.setThresholds()
	return nil
}

// Reserve returns the share of the limit kept for the higher classes.
func (s *Slots[T]) Reserve() float64 { return s.reserve }

// Threshold returns the number of slots below which class c (out of range:
// the lowest) takes a slot: T_c of Slots, the limit without a reserve.
func (s *Slots[T]) Threshold(c int) int {
	if s.thr == nil {
		return s.limit
	}
	return s.thr[s.clampClass(c)]
}

// setThresholds computes thr from the limit and the reserve.
func (s *Slots[T]) setThresholds() {
	n := len(s.classes)
	if s.reserve == 0 || n == 1 {
		s.thr = nil
		return
	}
	if len(s.thr) != n {
		s.thr = make([]int, n)
	}
	for c := range s.thr {
		// 1e-9 keeps a product such as 0.1·20 from rounding up to 3.
		s.thr[c] = s.limit + int(math.Ceil(s.reserve*float64(s.limit)*float64(n-1-c)/float64(n-1)-1e-9))
	}
}

// Arrive offers request t of class 0 at now; see ArriveClass.
func (s *Slots[T]) Arrive(now time.Time, t T, deadline time.Time) Outcome {
	o, _, _ := s.ArriveClass(now, t, 0, deadline)
	return o
}

// ArriveClass offers request t of class c at now (an out-of-range class
// counts as the lowest). It is Admitted if a slot is free and the queue is
// empty; otherwise it is Queued with the given deadline (zero: none;
// CoDel shortens it in a standing queue), or Rejected if the queue is full
// and holds no waiter of a lower class than c. When the queue is full and
// it does, the newest waiter of the lowest such class is evicted to make
// room and returned with evicted = true: the caller must answer it as
// rejected. Before rejecting or evicting, expired waiters are removed
// (kept for Expire) to make room.
func (s *Slots[T]) ArriveClass(now time.Time, t T, c int, deadline time.Time) (o Outcome, victim T, evicted bool) {
	return s.ArriveTagged(now, t, c, 0, deadline)
}

// ArriveTagged is ArriveClass for a waiter with a fair-queueing tag (see
// SetFair; without fair queueing the tag is kept and ignored).
func (s *Slots[T]) ArriveTagged(now time.Time, t T, c int, tag float64, deadline time.Time) (o Outcome, victim T, evicted bool) {
	s.noteEmpty(now)
	c = s.clampClass(c)
	if !s.held(t) && s.TryAdmitClass(c) {
		return Admitted, victim, false
	}
	if s.n >= s.maxQueue {
		s.sweep(now)
		if s.n >= s.maxQueue {
			lc := -1
			for i := len(s.classes) - 1; i > c; i-- {
				if s.classes[i].n > 0 {
					lc = i
					break
				}
			}
			switch {
			case s.maxQueue == 0:
				return Rejected, victim, false
			case lc >= 0:
				victim = s.classes[lc].popBack().t
			default:
				// Fair queueing: the arrival may take the place of its
				// class's waiter with the largest tag.
				r := &s.classes[c]
				i := r.maxTag()
				if !s.fair || i < 0 || r.ptr(i).tag <= tag {
					return Rejected, victim, false
				}
				victim = r.ptr(i).t
				r.removeAt(i)
			}
			s.n--
			evicted = true
		}
	}
	if s.disc.CoDel && s.Standing(now) {
		if dl := now.Add(s.disc.Target); deadline.IsZero() || dl.Before(deadline) {
			deadline = dl
		}
	}
	s.classes[c].push(slotEntry[T]{t: t, arrival: now, deadline: deadline, tag: tag}, s.maxQueue)
	s.n++
	if !deadline.IsZero() && (!s.hasMin || deadline.Before(s.minDeadline)) {
		s.minDeadline, s.hasMin = deadline, true
	}
	return Queued, victim, evicted
}

func (s *Slots[T]) clampClass(c int) int {
	if c < 0 || c >= len(s.classes) {
		return len(s.classes) - 1
	}
	return c
}

// noteEmpty records now as a moment the queue was empty.
func (s *Slots[T]) noteEmpty(now time.Time) {
	if s.n == 0 {
		s.lastEmpty = now
	}
}

// Release frees one slot at now and, if that leaves a slot free, admits
// the next waiter whose deadline is after now and returns it with ok =
// true. Expired waiters met on the way are removed and kept for Expire. A
// Release with no slot held does nothing and returns ok = false.
func (s *Slots[T]) Release(now time.Time) (next T, ok bool) {
	if s.inFlight == 0 {
		return next, false
	}
	s.inFlight--
	return s.Next(now)
}

// Next admits the next unexpired waiter at now if a slot is free, and
// returns it with ok = true; otherwise it returns ok = false. After
// raising the limit with SetLimit, call Next until it returns false.
// Expired waiters (and, in a standing queue under CoDel, waiters older
// than Target) met on the way are removed and kept for Expire.
func (s *Slots[T]) Next(now time.Time) (next T, ok bool) {
	standing := s.Standing(now)
	top := s.limit
	if s.thr != nil {
		top = s.thr[0]
	}
	for s.inFlight < top && s.n > 0 {
		var r *ring[T]
		for i := range s.classes {
			if s.classes[i].n > 0 {
				r = &s.classes[i]
				if s.thr != nil && s.inFlight >= s.thr[i] {
					// Its class is at its threshold, and every lower
					// class's is lower: the room left is the higher
					// classes'.
					return next, false
				}
				break
			}
		}
		var e slotEntry[T]
		switch {
		case s.fair:
			i := s.minTagFree(r)
			if i < 0 {
				// Every waiter of the class is held (SetHold).
				return next, false
			}
			e = r.at(i)
			r.removeAt(i)
		case standing && s.disc.LIFO:
			e = r.popBack()
		default:
			e = r.popFront()
		}
		s.n--
		if expired(e.deadline, now) || (standing && s.disc.CoDel && now.Sub(e.arrival) > s.disc.Target) {
			s.expired = append(s.expired, e.t)
			s.noteEmpty(now)
			continue
		}
		s.inFlight++
		s.noteEmpty(now)
		return e.t, true
	}
	return next, false
}

// Expire removes every waiter whose deadline ≤ now (and, in a standing
// queue under CoDel, every waiter older than Target) and calls fn for each
// (fn may be nil to discard them), after first reporting the waiters
// already removed by Release, Next or Arrive. Waiters are reported oldest
// first within each group. fn must not call methods of s.
func (s *Slots[T]) Expire(now time.Time, fn func(T)) {
	s.sweep(now)
	var zero T
	for i, t := range s.expired {
		s.expired[i] = zero // do not retain
		if fn != nil {
			fn(t)
		}
	}
	s.expired = s.expired[:0]
}

// Remove takes waiter t (the first entry equal to t) out of the queue, or
// out of the expired waiters not yet reported, and reports whether it
// found it. It is how a cancelled request leaves; false means t is not
// waiting (for example it was already admitted).
func (s *Slots[T]) Remove(t T) bool {
	for c := range s.classes {
		r := &s.classes[c]
		for i := 0; i < r.n; i++ {
			if r.at(i).t == t {
				r.removeAt(i)
				s.n--
				return true
			}
		}
	}
	for i, e := range s.expired {
		if e == t {
			var zero T
			copy(s.expired[i:], s.expired[i+1:])
			s.expired[len(s.expired)-1] = zero
			s.expired = s.expired[:len(s.expired)-1]
			return true
		}
	}
	return false
}

// SetLimit sets the concurrency limit (≥ 1; on error it is unchanged).
// Lowering it revokes nothing; after raising it, call Next until it returns
// false to admit the waiters that now fit.
func (s *Slots[T]) SetLimit(n int) error {
	if err := checkLimit(n); err != nil {
		return err
	}
	s.limit = n
	s.setThresholds()
	return nil
}

func expired(deadline, now time.Time) bool {
	return !deadline.IsZero() && !deadline.After(now)
}

// sweep moves every expired waiter (and CoDel's victims) from the queue to
// s.expired, keeping the order of the rest, and recomputes minDeadline.
func (s *Slots[T]) sweep(now time.Time) {
	if s.n == 0 {
		s.hasMin = false
		s.noteEmpty(now)
		return
	}
	codel := s.disc.CoDel && s.Standing(now)
	if codel {
		// Arrivals are in time order within a class, so CoDel's victims
		// are at the front of each ring.
		for c := range s.classes {
			r := &s.classes[c]
			for r.n > 0 && now.Sub(r.at(0).arrival) > s.disc.Target {
				s.expired = append(s.expired, r.popFront().t)
				s.n--
			}
		}
	}
	if !s.hasMin || now.Before(s.minDeadline) {
		s.noteEmpty(now)
		return
	}
	var lo time.Time
	hasMin := false
	for c := range s.classes {
		r := &s.classes[c]
		w := 0
		for i := 0; i < r.n; i++ {
			e := r.at(i)
			if expired(e.deadline, now) {
				s.expired = append(s.expired, e.t)
				continue
			}
			if !e.deadline.IsZero() && (!hasMin || e.deadline.Before(lo)) {
				lo, hasMin = e.deadline, true
			}
			if w != i {
				*r.ptr(w) = e
			}
			w++
		}
		for i := w; i < r.n; i++ {
			*r.ptr(i) = slotEntry[T]{}
		}
		s.n -= r.n - w
		r.n = w
	}
	s.minDeadline, s.hasMin = lo, hasMin
	s.noteEmpty(now)
}
