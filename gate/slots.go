package gate

import (
	"fmt"
	"time"
)

// Outcome is what happened to an arrival at a Slots.
type Outcome uint8

const (
	// Admitted means the arrival got a slot at once.
	Admitted Outcome = iota + 1
	// Queued means the arrival waits in the FIFO queue for a slot.
	Queued
	// Rejected means the queue was full (or maxQueue is 0 and no slot was
	// free): the arrival is refused.
	Rejected
)

// String returns "admitted", "queued" or "rejected".
func (o Outcome) String() string {
	switch o {
	case Admitted:
		return "admitted"
	case Queued:
		return "queued"
	case Rejected:
		return "rejected"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// slotEntry is one waiter in the queue.
type slotEntry[T comparable] struct {
	t        T
	deadline time.Time // zero: never expires
}

// Slots is a concurrency limit with a bounded FIFO wait queue: at most
// Limit requests hold a slot at once; an arrival that finds no free slot
// waits in a queue of at most maxQueue entries (the papers' listen queue),
// and each freed slot goes to the oldest waiter whose deadline has not
// passed. T identifies a request (an id in the simulator, a waiter pointer
// in Limiter).
//
// Slots is the deterministic core shared by the simulator and Limiter: it
// never blocks, reads no clock and starts no goroutine; time is an argument.
// A waiter expires when its deadline ≤ now; a zero deadline never expires.
// Expired waiters are removed by Expire, and also by Release, Next and a
// full-queue Arrive when they meet them; those three keep the removed
// waiters aside until the next Expire reports them, so a caller that uses
// deadlines must call Expire after Release and Next (the simulator does it
// at every event). Expired waiters still in the queue count in QueueLen.
//
// Lowering the limit never revokes a held slot: InFlight may exceed Limit
// until enough releases happen. Raising it frees slots for waiters, which
// the caller pulls with Next.
//
// The queue is a ring buffer that grows by doubling up to maxQueue and is
// then reused, so there is no allocation per operation in steady state.
// Remove is O(distance to the nearer end of the queue); everything else is
// O(1) amortised, except Expire, which scans the queue when some waiter may
// have expired.
//
// The zero value is not usable; use NewSlots. Slots is not safe for
// concurrent use: it belongs to one goroutine (or to a caller's lock).
type Slots[T comparable] struct {
	limit    int
	maxQueue int
	inFlight int

	buf  []slotEntry[T] // ring; len(buf) is its capacity
	head int            // index in buf of the oldest waiter
	n    int            // number of waiters

	// minDeadline is a lower bound of the non-zero deadlines in the queue
	// (valid when hasMin); Expire skips its scan while now < minDeadline.
	minDeadline time.Time
	hasMin      bool

	// expired holds waiters removed as expired by Release, Next or Arrive,
	// to be reported by the next Expire.
	expired []T
}

// NewSlots returns an empty Slots with the given concurrency limit (≥ 1)
// and queue bound (≥ 0; 0 means arrivals that find no free slot are
// rejected at once). The error names the bad parameter and its value.
func NewSlots[T comparable](limit, maxQueue int) (*Slots[T], error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if maxQueue < 0 {
		return nil, fmt.Errorf("gate: maxQueue = %d: must be >= 0", maxQueue)
	}
	return &Slots[T]{limit: limit, maxQueue: maxQueue}, nil
}

func checkLimit(limit int) error {
	if limit < 1 {
		return fmt.Errorf("gate: limit = %d: must be >= 1", limit)
	}
	return nil
}

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

// PendingExpired returns the number of expired waiters removed from the
// queue by Release, Next or Arrive that the next Expire will report.
func (s *Slots[T]) PendingExpired() int { return len(s.expired) }

// TryAdmit takes a slot if one is free and nobody waits (no barging past
// the queue), and reports whether it did.
func (s *Slots[T]) TryAdmit() bool {
	if s.n == 0 && s.inFlight < s.limit {
		s.inFlight++
		return true
	}
	return false
}

// Arrive offers request t at now. It is Admitted if a slot is free and the
// queue is empty; otherwise it is Queued behind the waiters already there
// with the given deadline (zero: no deadline), or Rejected if the queue is
// full. Before rejecting, Arrive removes expired waiters (kept for Expire)
// to make room.
func (s *Slots[T]) Arrive(now time.Time, t T, deadline time.Time) Outcome {
	if s.TryAdmit() {
		return Admitted
	}
	if s.n >= s.maxQueue {
		s.sweep(now)
		if s.n >= s.maxQueue {
			return Rejected
		}
	}
	s.push(slotEntry[T]{t: t, deadline: deadline})
	if !deadline.IsZero() && (!s.hasMin || deadline.Before(s.minDeadline)) {
		s.minDeadline, s.hasMin = deadline, true
	}
	return Queued
}

// Release frees one slot at now and, if that leaves a slot free, admits the
// oldest waiter whose deadline is after now and returns it with ok = true.
// Expired waiters met on the way are removed and kept for Expire. A Release
// with no slot held does nothing and returns ok = false.
func (s *Slots[T]) Release(now time.Time) (next T, ok bool) {
	if s.inFlight == 0 {
		return next, false
	}
	s.inFlight--
	return s.Next(now)
}

// Next admits the oldest unexpired waiter at now if a slot is free, and
// returns it with ok = true; otherwise it returns ok = false. After raising
// the limit with SetLimit, call Next until it returns false. Expired waiters
// met on the way are removed and kept for Expire.
func (s *Slots[T]) Next(now time.Time) (next T, ok bool) {
	for s.inFlight < s.limit && s.n > 0 {
		e := s.pop()
		if expired(e.deadline, now) {
			s.expired = append(s.expired, e.t)
			continue
		}
		s.inFlight++
		return e.t, true
	}
	return next, false
}

// Expire removes every waiter whose deadline ≤ now and calls fn for each
// (fn may be nil to discard them), after first reporting the expired
// waiters already removed by Release, Next or Arrive. Waiters are reported
// oldest first within each group. fn must not call methods of s.
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

// Remove takes waiter t (the oldest entry equal to t) out of the queue, or
// out of the expired waiters not yet reported, and reports whether it found
// it. It is how a cancelled request leaves; false means t is not waiting
// (for example it was already admitted).
func (s *Slots[T]) Remove(t T) bool {
	for i := 0; i < s.n; i++ {
		if s.at(i).t == t {
			s.removeAt(i)
			return true
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
	return nil
}

func expired(deadline, now time.Time) bool {
	return !deadline.IsZero() && !deadline.After(now)
}

// sweep moves every expired waiter from the queue to s.expired, keeping
// the order of the rest, and recomputes minDeadline.
func (s *Slots[T]) sweep(now time.Time) {
	if !s.hasMin || s.n == 0 || now.Before(s.minDeadline) {
		if s.n == 0 {
			s.hasMin = false
		}
		return
	}
	var lo time.Time
	hasMin := false
	w := 0
	for i := 0; i < s.n; i++ {
		e := s.at(i)
		if expired(e.deadline, now) {
			s.expired = append(s.expired, e.t)
			continue
		}
		if !e.deadline.IsZero() && (!hasMin || e.deadline.Before(lo)) {
			lo, hasMin = e.deadline, true
		}
		if w != i {
			*s.ptr(w) = e
		}
		w++
	}
	for i := w; i < s.n; i++ {
		*s.ptr(i) = slotEntry[T]{}
	}
	s.n = w
	s.minDeadline, s.hasMin = lo, hasMin
}

// ptr returns the address of the i-th oldest waiter (0 ≤ i < len(s.buf)).
func (s *Slots[T]) ptr(i int) *slotEntry[T] {
	j := s.head + i
	if j >= len(s.buf) {
		j -= len(s.buf)
	}
	return &s.buf[j]
}

func (s *Slots[T]) at(i int) slotEntry[T] { return *s.ptr(i) }

func (s *Slots[T]) push(e slotEntry[T]) {
	if s.n == len(s.buf) {
		s.grow()
	}
	*s.ptr(s.n) = e
	s.n++
}

func (s *Slots[T]) pop() slotEntry[T] {
	p := s.ptr(0)
	e := *p
	*p = slotEntry[T]{}
	s.head++
	if s.head == len(s.buf) {
		s.head = 0
	}
	s.n--
	return e
}

// grow doubles the ring (at least 8 entries, at most maxQueue), keeping the
// order of the waiters.
func (s *Slots[T]) grow() {
	c := 2 * len(s.buf)
	if c < 8 {
		c = 8
	}
	if c > s.maxQueue {
		c = s.maxQueue
	}
	buf := make([]slotEntry[T], c)
	for i := 0; i < s.n; i++ {
		buf[i] = s.at(i)
	}
	s.buf, s.head = buf, 0
}

// removeAt removes the i-th oldest waiter, shifting the shorter side.
func (s *Slots[T]) removeAt(i int) {
	if i < s.n/2 {
		for j := i; j > 0; j-- {
			*s.ptr(j) = s.at(j - 1)
		}
		s.pop()
		return
	}
	for j := i; j < s.n-1; j++ {
		*s.ptr(j) = s.at(j + 1)
	}
	*s.ptr(s.n - 1) = slotEntry[T]{}
	s.n--
}
