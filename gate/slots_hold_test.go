// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"testing"
	"time"
)

// SetHold on a hand-worked trace: limit 2, fair queueing, tenant h held.
// Two slots held; h1 (tag 1) and l1 (tag 2) queue. A release grants l1
// although h1's tag is smaller; the next release finds only h1 and keeps
// the slot free. h2, held, queues although a slot is free; l2 arrives
// with only held waiters ahead and takes the free slot at once. With h
// no longer held, a release grants h1, and Next nothing (limit reached).
func TestSlotsHold(t *testing.T) {
	now := time.Unix(0, 0)
	s, err := NewSlots[string](2, 10)
	if err != nil {
		t.Fatal(err)
	}
	s.SetFair(true)
	hold := true
	s.SetHold(func(w string) bool { return hold && w[0] == 'h' })
	for i := range 2 {
		if !s.TryAdmit() {
			t.Fatalf("free slot %d refused", i+1)
		}
	}
	if o, _, _ := s.ArriveTagged(now, "h1", 0, 1, time.Time{}); o != Queued {
		t.Fatalf("h1: %v, want queued", o)
	}
	if o, _, _ := s.ArriveTagged(now, "l1", 0, 2, time.Time{}); o != Queued {
		t.Fatalf("l1: %v, want queued", o)
	}
	if w, ok := s.Release(now); !ok || w != "l1" {
		t.Fatalf("release granted %q %v, want l1 past the held h1", w, ok)
	}
	if w, ok := s.Release(now); ok {
		t.Fatalf("release granted %q, want the slot kept free (only h1 waits)", w)
	}
	if s.InFlight() != 1 || s.QueueLen() != 1 {
		t.Fatalf("in flight %d, queued %d; want 1, 1", s.InFlight(), s.QueueLen())
	}
	if o, _, _ := s.ArriveTagged(now, "h2", 0, 3, time.Time{}); o != Queued {
		t.Fatalf("h2 with a free slot: %v, want queued (held)", o)
	}
	if o, _, _ := s.ArriveTagged(now, "l2", 0, 4, time.Time{}); o != Admitted {
		t.Fatalf("l2 behind held waiters only: %v, want admitted", o)
	}
	hold = false
	if w, ok := s.Release(now); !ok || w != "h1" {
		t.Fatalf("release after the hold ends granted %q %v, want h1", w, ok)
	}
	if w, ok := s.Next(now); ok {
		t.Fatalf("Next granted %q with the limit reached", w)
	}
}
