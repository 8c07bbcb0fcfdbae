// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func expireAll(s *Slots[int], now time.Time) []int {
	var out []int
	s.Expire(now, func(id int) { out = append(out, id) })
	return out
}

func TestSlotsClassPriority(t *testing.T) {
	s, err := NewClassSlots[int](1, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	if o, _, _ := s.ArriveClass(ms(0), 1, 2, time.Time{}); o != Admitted {
		t.Fatalf("first arrival %v", o)
	}
	for _, a := range []struct{ id, class int }{{2, 2}, {3, 1}, {4, 0}, {5, 1}, {6, 9}} {
		if o, _, _ := s.ArriveClass(ms(1), a.id, a.class, time.Time{}); o != Queued {
			t.Fatalf("arrival %d: %v", a.id, o)
		}
	}
	if got := s.Ahead(0); got != 1 {
		t.Errorf("Ahead(0) = %d, want 1", got)
	}
	if got := s.Ahead(1); got != 3 {
		t.Errorf("Ahead(1) = %d, want 3", got)
	}
	if got := s.Ahead(5); got != 5 { // out of range = lowest class
		t.Errorf("Ahead(5) = %d, want 5", got)
	}
	var order []int
	for {
		id, ok := s.Release(ms(2))
		if !ok {
			break
		}
		order = append(order, id)
	}
	if want := []int{4, 3, 5, 2, 6}; !slices.Equal(order, want) {
		t.Errorf("service order %v, want %v (class 0 first, FIFO within a class)", order, want)
	}
}

func TestSlotsEvictsLowerClassWhenFull(t *testing.T) {
	s, _ := NewClassSlots[int](1, 2, 2)
	s.ArriveClass(ms(0), 1, 0, time.Time{})
	s.ArriveClass(ms(1), 2, 1, time.Time{})
	s.ArriveClass(ms(2), 3, 1, time.Time{})
	// Full: a class-1 arrival is rejected, a class-0 one evicts the newest
	// class-1 waiter.
	if o, _, ev := s.ArriveClass(ms(3), 4, 1, time.Time{}); o != Rejected || ev {
		t.Fatalf("low arrival into a full queue: %v evicted=%v", o, ev)
	}
	o, victim, ev := s.ArriveClass(ms(3), 5, 0, time.Time{})
	if o != Queued || !ev || victim != 3 {
		t.Fatalf("high arrival: %v victim %d evicted=%v, want queued evicting 3", o, victim, ev)
	}
	if s.QueueLen() != 2 {
		t.Fatalf("queue %d, want 2", s.QueueLen())
	}
	if id, ok := s.Release(ms(5)); !ok || id != 5 {
		t.Fatalf("release gave %d %v, want the class-0 waiter 5", id, ok)
	}
	s.ArriveClass(ms(5), 7, 0, time.Time{}) // queue: 7 (class 0), 2 (class 1)
	if o, victim, ev := s.ArriveClass(ms(6), 8, 0, time.Time{}); o != Queued || !ev || victim != 2 {
		t.Fatalf("arrival 8: %v victim %d evicted=%v, want queued evicting 2", o, victim, ev)
	}
	// Full of class 0: nothing lower to evict.
	if o, _, ev := s.ArriveClass(ms(7), 9, 0, time.Time{}); o != Rejected || ev {
		t.Fatalf("arrival 9: %v evicted=%v, want rejected", o, ev)
	}
}

func TestSlotsAdaptiveLIFO(t *testing.T) {
	s, _ := NewSlots[int](1, 10)
	s.SetDiscipline(Discipline{LIFO: true, Interval: 100 * time.Millisecond})
	s.Arrive(ms(0), 1, time.Time{})
	s.Arrive(ms(10), 2, time.Time{})
	s.Arrive(ms(20), 3, time.Time{})
	// The queue has not been empty for only 10 ms: FIFO.
	if id, _ := s.Release(ms(20)); id != 2 {
		t.Fatalf("young queue served %d, want 2 (FIFO)", id)
	}
	s.Arrive(ms(30), 4, time.Time{})
	s.Arrive(ms(40), 5, time.Time{})
	// Not empty since t = 10 ms: standing from 110 ms on, newest first.
	if !s.Standing(ms(120)) {
		t.Fatal("queue not standing after 110 ms without emptying")
	}
	if id, _ := s.Release(ms(120)); id != 5 {
		t.Errorf("standing queue served %d, want the newest, 5", id)
	}
	if id, _ := s.Release(ms(121)); id != 4 {
		t.Errorf("standing queue served %d, want 4", id)
	}
	if id, _ := s.Release(ms(122)); id != 3 {
		t.Errorf("standing queue served %d, want 3", id)
	}
	// Emptied at 122 ms: young again.
	s.Arrive(ms(130), 6, time.Time{})
	s.Arrive(ms(131), 7, time.Time{})
	if s.Standing(ms(140)) {
		t.Error("queue standing 8 ms after it emptied")
	}
	if id, _ := s.Release(ms(140)); id != 6 {
		t.Errorf("young queue served %d, want 6", id)
	}
}

func TestSlotsCoDelDropsStandingQueue(t *testing.T) {
	s, _ := NewSlots[int](1, 100)
	s.SetDiscipline(Discipline{CoDel: true, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond})
	s.Arrive(ms(0), 0, time.Time{}) // holds the slot
	// A burst that drains within the interval is a good queue: nobody is
	// dropped even after 50 ms of waiting.
	for i := 1; i <= 3; i++ {
		s.Arrive(ms(1), i, ms(1000))
	}
	if got := expireAll(s, ms(60)); len(got) != 0 {
		t.Fatalf("young queue dropped %v", got)
	}
	// The queue has not emptied since 0 ms: at 101 ms it is standing, and
	// every waiter older than 5 ms is dropped.
	s.Arrive(ms(98), 4, ms(1000))
	if got := expireAll(s, ms(101)); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("standing queue dropped %v, want [1 2 3]", got)
	}
	// New waiters in a standing queue get the target as their deadline.
	s.Arrive(ms(102), 5, ms(1000))
	if got := expireAll(s, ms(104)); !slices.Equal(got, []int{4}) {
		t.Fatalf("dropped %v at 104 ms, want [4] (6 ms old)", got)
	}
	if got := expireAll(s, ms(106)); len(got) != 0 {
		t.Fatalf("dropped %v before 5's deadline", got)
	}
	if got := expireAll(s, ms(107)); !slices.Equal(got, []int{5}) {
		t.Fatalf("dropped %v, want [5] (its deadline is the target)", got)
	}
	// The queue emptied at 107 ms: at 120 ms it is a good queue again.
	s.Arrive(ms(108), 6, time.Time{})
	s.Arrive(ms(120), 7, time.Time{})
	if id, ok := s.Release(ms(120)); !ok || id != 6 {
		t.Fatalf("release gave %d %v, want 6 (young queue, FIFO)", id, ok)
	}
	// Not empty since 108 ms: at 210 ms Release skips (and reports) 7,
	// 90 ms old, and grants 8.
	s.Arrive(ms(210), 8, time.Time{})
	if id, ok := s.Release(ms(210)); !ok || id != 8 {
		t.Fatalf("release gave %d %v, want 8", id, ok)
	}
	if got := expireAll(s, ms(210)); !slices.Equal(got, []int{7}) {
		t.Fatalf("reported %v, want [7]", got)
	}
}

// TestLimiterCoDelDropsAtOnce checks, in virtual time, that a live waiter
// dropped by CoDel gets its error when it is dropped, not at its timeout.
func TestLimiterCoDelDropsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := NewLimiter(1, 10, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l.SetDiscipline(Discipline{CoDel: true, LIFO: true, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond})
		ctx := context.Background()
		if err := l.Acquire(ctx, 0); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		type res struct {
			err error
			at  time.Duration
		}
		old := make(chan res, 1)
		go func() {
			err := l.Acquire(ctx, 0)
			old <- res{err, time.Since(start)}
		}()
		time.Sleep(150 * time.Millisecond) // the queue now stands
		young := acquireAsync(ctx, l)
		synctest.Wait()
		l.Release() // standing: LIFO serves the young waiter, CoDel drops the old one
		if err := <-young; err != nil {
			t.Fatalf("young waiter: %v", err)
		}
		r := <-old
		if !errors.Is(r.err, ErrQueueTimeout) {
			t.Fatalf("old waiter: %v, want ErrQueueTimeout", r.err)
		}
		if r.at != 150*time.Millisecond {
			t.Errorf("old waiter dropped after %v, want 150ms (at the release, not at its 1s timeout)", r.at)
		}
		l.Release()
		if l.InFlight() != 0 || l.QueueLen() != 0 {
			t.Errorf("in flight %d queue %d", l.InFlight(), l.QueueLen())
		}
	})
}
