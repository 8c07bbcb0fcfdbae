// SPDX-License-Identifier: Apache-2.0

package gate

// SetHold gives a fair-queueing Slots (SetFair) a test of the waiters that
// may not take a slot now (nil: none; the default), for a caller that
// bounds what one group of requests holds: stage's slot share among
// tenants (stage.Tenants.SlotShare) holds back the waiters of a tenant
// already at its share of the limit. A held waiter stays in the queue, in
// its place by tag, and is passed over: a freed slot goes to the waiter
// with the smallest tag among those not held in the highest class with
// waiters, or stays free when every waiter of that class is held (the
// slot share is not work-conserving: a slot kept for a tenant that is
// not using it stays free until its share changes or the held tenant
// releases one of its own). A new arrival takes a free slot when every
// waiter ahead of it is held, unless it is held itself (ArriveTagged).
// hold is called under the caller's lock, must not call methods of s,
// and must change its answer only through the caller (who then calls
// Next until it returns false to grant the waiters it freed). Without
// fair queueing it is ignored.
func (s *Slots[T]) SetHold(hold func(T) bool) { s.hold = hold }

// holding reports whether a hold test is in force.
func (s *Slots[T]) holding() bool { return s.fair && s.hold != nil }

// held reports whether t may not take a slot now.
func (s *Slots[T]) held(t T) bool { return s.holding() && s.hold(t) }

// onlyHeld reports whether every waiter of classes 0..c is held, so an
// arrival of class c that is not held takes a free slot without barging
// past anyone who could have it. It costs O(waiters) when they are all
// held, and stops at the first that is not. It is left linear, as the
// fair queue's grant already is (minTag and minTagFree scan the class,
// Retag shifts it): it runs only with a hold test, for an arrival that is
// not held while a slot is free and others wait, and its bound is the
// queue's (BenchmarkSlotsHeldQueue: about 0.1 µs per held waiter per scan,
// no allocation). Making it O(1) needs what only the caller knows — whose
// answers change when a tenant takes or releases a slot — so a count of
// the waiters not held would have to be kept by the caller per class, in
// step with the queue's removals (expiry, eviction, trimming).
func (s *Slots[T]) onlyHeld(c int) bool {
	if !s.holding() {
		return false
	}
	for i := 0; i <= c; i++ {
		a, b := s.classes[i].segs()
		for _, seg := range [][]slotEntry[T]{a, b} {
			for j := range seg {
				if !s.hold(seg[j].t) {
					return false
				}
			}
		}
	}
	return true
}

// minTagFree is minTag over r's waiters that are not held (-1: none).
func (s *Slots[T]) minTagFree(r *ring[T]) int {
	if !s.holding() {
		return r.minTag()
	}
	a, b := r.segs()
	best, found := -1, false
	var bt float64
	for k, seg := range [][]slotEntry[T]{a, b} {
		off := 0
		if k == 1 {
			off = len(a)
		}
		for j := range seg {
			if (!found || seg[j].tag < bt) && !s.hold(seg[j].t) {
				best, bt, found = off+j, seg[j].tag, true
			}
		}
	}
	return best
}
