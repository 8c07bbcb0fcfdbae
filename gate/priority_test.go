// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The reserve's thresholds, T_c = L + ⌈r·L·(n−1−c)/(n−1)⌉, by hand.
func TestSlotsReserveThresholds(t *testing.T) {
	for _, c := range []struct {
		limit, classes int
		r              float64
		want           []int
	}{
		{20, 2, 0.1, []int{22, 20}},
		{20, 3, 0.1, []int{22, 21, 20}},
		{100, 5, 0.2, []int{120, 115, 110, 105, 100}},
		{3, 2, 0.1, []int{4, 3}},  // ⌈0.3⌉ = 1: a small limit still gets a slot of room
		{1, 2, 0.5, []int{2, 1}},  // ⌈0.5⌉ = 1
		{20, 2, 0, []int{20, 20}}, // no reserve
		{20, 1, 0.5, []int{20}},   // one class: the limit
		{10, 2, 0.99, []int{20, 10}},
	} {
		s, err := NewClassSlots[int](c.limit, 10, c.classes)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetReserve(c.r); err != nil {
			t.Fatal(err)
		}
		for cl, want := range c.want {
			if got := s.Threshold(cl); got != want {
				t.Errorf("L=%d n=%d r=%v: T_%d = %d, want %d", c.limit, c.classes, c.r, cl, got, want)
			}
		}
		if got := s.Threshold(99); got != c.want[len(c.want)-1] {
			t.Errorf("out-of-range class: T = %d, want the lowest class's %d", got, c.want[len(c.want)-1])
		}
	}
	s, _ := NewClassSlots[int](10, 0, 2)
	for _, bad := range []float64{-0.1, 1, 2} {
		if err := s.SetReserve(bad); err == nil {
			t.Errorf("SetReserve(%v) accepted", bad)
		}
	}
}

// Without a queue (the peers' reject-at-once limits): the lowest class is
// refused at the limit while the higher class still gets the reserve's
// room; a higher class is refused only when the lower one already is.
func TestSlotsReserveRejectAtOnce(t *testing.T) {
	s, _ := NewClassSlots[int](10, 0, 2)
	if err := s.SetReserve(0.2); err != nil { // T = {12, 10}
		t.Fatal(err)
	}
	admitted := func(c int) bool {
		o, _, _ := s.ArriveClass(t0, 0, c, time.Time{})
		return o == Admitted
	}
	for i := range 10 {
		if !admitted(1) {
			t.Fatalf("low request %d refused below the limit", i)
		}
	}
	if admitted(1) {
		t.Fatal("low admitted at the limit")
	}
	for i := range 2 {
		if !admitted(0) {
			t.Fatalf("high request %d refused in the reserve", i)
		}
	}
	if admitted(0) || admitted(1) {
		t.Fatal("admitted beyond the reserve")
	}
	// Releases: down to 11 held, the free slot is above the limit: high only.
	s.Release(t0)
	if admitted(1) {
		t.Fatal("low took a slot above the limit")
	}
	if !admitted(0) {
		t.Fatal("high refused a slot of the reserve")
	}
}

// With a queue: a low waiter at the limit keeps waiting while a high
// arrival takes the reserve's room at once; releases below the limit go
// to the low waiter.
func TestSlotsReserveWithQueue(t *testing.T) {
	s, _ := NewClassSlots[int](2, 10, 2)
	if err := s.SetReserve(0.5); err != nil { // T = {3, 2}
		t.Fatal(err)
	}
	for id := 1; id <= 2; id++ {
		if o, _, _ := s.ArriveClass(t0, id, 1, time.Time{}); o != Admitted {
			t.Fatalf("low %d: %v", id, o)
		}
	}
	if o, _, _ := s.ArriveClass(t0, 3, 1, time.Time{}); o != Queued {
		t.Fatalf("low 3 at the limit: %v, want queued", o)
	}
	if _, ok := s.Next(t0); ok {
		t.Fatal("Next granted a low waiter the reserve")
	}
	if o, _, _ := s.ArriveClass(t0, 4, 0, time.Time{}); o != Admitted {
		t.Fatalf("high past a blocked low waiter: %v, want admitted", o)
	}
	// 3 held: releases down to 1 held let the low waiter in.
	if _, ok := s.Release(t0); ok { // 2 held: the low waiter is at T_1 = 2
		t.Fatal("granted the low waiter with 2 held")
	}
	if w, ok := s.Release(t0); !ok || w != 3 { // 1 held
		t.Fatalf("Release = %d, %v; want the low waiter 3", w, ok)
	}
	// A high waiter is served before a low one, and beyond the limit.
	s2, _ := NewClassSlots[int](2, 10, 2)
	_ = s2.SetReserve(0.5) // T = {3, 2}
	for id := 1; id <= 3; id++ {
		s2.ArriveClass(t0, id, 0, time.Time{})
	}
	s2.ArriveClass(t0, 4, 1, time.Time{})
	s2.ArriveClass(t0, 5, 0, time.Time{})
	if w, ok := s2.Release(t0); !ok || w != 5 {
		t.Fatalf("Release = %d, %v; want the high waiter 5", w, ok)
	}
	if _, ok := s2.Release(t0); ok {
		t.Fatal("the low waiter got a slot with 2 held (T_1 = 2)")
	}
	if w, ok := s2.Release(t0); !ok || w != 4 {
		t.Fatalf("Release = %d, %v; want the low waiter 4", w, ok)
	}
}

// Raising the reserve (or the limit) lets blocked high waiters in
// through Next.
func TestSlotsReserveRaised(t *testing.T) {
	s, _ := NewClassSlots[int](2, 10, 2)
	s.ArriveClass(t0, 1, 1, time.Time{})
	s.ArriveClass(t0, 2, 1, time.Time{})
	s.ArriveClass(t0, 3, 0, time.Time{})
	if _, ok := s.Next(t0); ok {
		t.Fatal("granted at the limit")
	}
	_ = s.SetReserve(0.5)
	if w, ok := s.Next(t0); !ok || w != 3 {
		t.Fatalf("Next = %d, %v after the reserve was raised", w, ok)
	}
}

// A low-priority crowd against a reject-at-once limit with the reserve:
// the high class, offered a third of the capacity, keeps nearly all its
// requests while the low class takes the rest of the limit; with no
// reserve the high class loses about as many as the low. Virtual time,
// fixed service times, a seeded source.
func TestSlotsReserveCrowd(t *testing.T) {
	run := func(reserve float64) (highOK, lowOK float64) {
		const limit, service = 30, 100 * time.Millisecond // capacity 300 req/s
		s, _ := NewClassSlots[int](limit, 0, 2)
		if err := s.SetReserve(reserve); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var ends []time.Time // completion times of held slots
		var offered, admitted [2]int
		now := t0
		for now.Before(t0.Add(60 * time.Second)) {
			// Poisson arrivals: high 100 req/s, low 12 × 300 req/s.
			now = now.Add(time.Duration(rng.ExpFloat64() / 3700 * 1e9))
			kept := ends[:0]
			for _, e := range ends {
				if e.After(now) {
					kept = append(kept, e)
				} else {
					s.Release(now)
				}
			}
			ends = kept
			c := 1
			if rng.Float64() < 100.0/3700 {
				c = 0
			}
			offered[c]++
			if o, _, _ := s.ArriveClass(now, 0, c, time.Time{}); o == Admitted {
				admitted[c]++
				ends = append(ends, now.Add(service))
			}
		}
		return float64(admitted[0]) / float64(offered[0]), float64(admitted[1]) / float64(offered[1])
	}
	high, low := run(0.3)
	t.Logf("reserve 0.3: high %.4f admitted, low %.1f req/s", high, low*3600)
	if high < 0.994 {
		t.Errorf("reserve 0.3: high priority admitted %.4f, want ≥ 0.994", high)
	}
	// The low class gets the limit the high one leaves: at least 190 of
	// the 200 req/s, never zero.
	if low*3600 < 190 {
		t.Errorf("reserve 0.3: low priority admitted %.1f req/s, want ≥ 190 of the 200 left", low*3600)
	}
	high0, _ := run(0)
	t.Logf("no reserve: high %.4f admitted", high0)
	if high0 > 0.5 {
		t.Errorf("no reserve: high priority admitted %.4f: the test does not need the reserve", high0)
	}
}

// AllowAheadAt: a request may take a token the bucket holds only ahead
// from now; the debt is repaid by later AllowAt requests.
func TestTokenBucketAllowAhead(t *testing.T) {
	b := newBucket(t, 10, 1) // T = 100 ms, τ = 0
	if !b.AllowAt(t0) {
		t.Fatal("full bucket refused")
	}
	if b.AllowAt(t0) {
		t.Fatal("empty bucket admitted")
	}
	if b.AllowAheadAt(t0, 99*time.Millisecond) {
		t.Fatal("admitted 99 ms ahead of a token due in 100 ms")
	}
	if !b.AllowAheadAt(t0, 100*time.Millisecond) || !b.AllowAheadAt(t0, 200*time.Millisecond) {
		t.Fatal("refused within ahead")
	}
	// Two tokens borrowed: AllowAt waits for tat − τ = 300 ms.
	if b.AllowAt(t0.Add(299 * time.Millisecond)) {
		t.Fatal("debt not repaid")
	}
	if !b.AllowAt(t0.Add(300 * time.Millisecond)) {
		t.Fatal("refused once repaid")
	}
	if !b.AllowAheadAt(t0.Add(400*time.Millisecond), -time.Second) {
		t.Fatal("a negative ahead is not AllowAt")
	}
}

// One bucket, two classes: the high class may run 1 s·rate ahead, the
// low one none. Under a low crowd the high class keeps its requests and
// the total stays at the rate.
func TestTokenBucketAheadCrowd(t *testing.T) {
	b := newBucket(t, 100, 5)
	rng := rand.New(rand.NewPCG(3, 4))
	var offered, admitted [2]int
	now := t0
	end := t0.Add(60 * time.Second)
	for now.Before(end) {
		now = now.Add(time.Duration(rng.ExpFloat64() / 1230 * 1e9)) // high 30/s + low 1200/s
		c := 1
		if rng.Float64() < 30.0/1230 {
			c = 0
		}
		offered[c]++
		ok := false
		if c == 0 {
			ok = b.AllowAheadAt(now, 200*time.Millisecond)
		} else {
			ok = b.AllowAt(now)
		}
		if ok {
			admitted[c]++
		}
	}
	high := float64(admitted[0]) / float64(offered[0])
	total := float64(admitted[0]+admitted[1]) / 60
	t.Logf("high %.4f admitted; %.1f req/s in all", high, total)
	if high < 0.994 {
		t.Errorf("high admitted %.4f, want ≥ 0.994", high)
	}
	if total > 100.5 || total < 99 {
		t.Errorf("admitted %.1f req/s in all, want the rate 100", total)
	}
}

func TestDropperAdmitWith(t *testing.T) {
	d := NewDropper(rand.New(rand.NewPCG(5, 6)))
	if err := d.SetProbability(1); err != nil {
		t.Fatal(err)
	}
	if !d.AdmitWith(0) || d.AdmitWith(1) {
		t.Fatal("AdmitWith ignores its p at the bounds")
	}
	n := 0
	for range 10000 {
		if d.AdmitWith(0.25) {
			n++
		}
	}
	if n < 7300 || n > 7700 {
		t.Fatalf("AdmitWith(0.25) admitted %d of 10000", n)
	}
}
