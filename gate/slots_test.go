// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// slotOp is one scripted call on a Slots[int].
type slotOp struct {
	at       int    // milliseconds after t0
	op       string // arrive, release, next, expire, remove, limit
	id       int    // request for arrive/remove; new limit for limit
	deadline int    // for arrive: ms after t0, 0 = none
	want     string // expected outcome, admitted id, expired ids, ...
}

func TestSlotsScripts(t *testing.T) {
	tests := []struct {
		name            string
		limit, maxQueue int
		ops             []slotOp
		inFlight, queue int
	}{
		{"FIFO order", 2, 10, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, want: "admitted"},
			{op: "arrive", id: 3, want: "queued"},
			{op: "arrive", id: 4, want: "queued"},
			{op: "arrive", id: 5, want: "queued"},
			{op: "release", want: "3"},
			{op: "release", want: "4"},
			{op: "release", want: "5"},
			{op: "release", want: "none"},
			{op: "arrive", id: 6, want: "admitted"},
		}, 2, 0},
		{"queue bound and maxQueue 0", 1, 0, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, want: "rejected"},
			{op: "release", want: "none"},
			{op: "arrive", id: 3, want: "admitted"},
		}, 1, 0},
		{"full queue rejects", 1, 2, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, want: "queued"},
			{op: "arrive", id: 3, want: "queued"},
			{op: "arrive", id: 4, want: "rejected"},
		}, 1, 2},
		{"expiry by Expire", 1, 10, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, deadline: 100, want: "queued"},
			{op: "arrive", id: 3, deadline: 300, want: "queued"},
			{op: "arrive", id: 4, deadline: 200, want: "queued"},
			{op: "arrive", id: 5, want: "queued"}, // no deadline
			{at: 99, op: "expire", want: ""},
			{at: 200, op: "expire", want: "2,4"}, // deadline ≤ now
			{at: 250, op: "release", want: "3"},
			{at: 10_000, op: "expire", want: ""},
			{at: 10_000, op: "release", want: "5"},
		}, 1, 0},
		{"Release skips expired waiters and Expire reports them", 1, 10, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, deadline: 100, want: "queued"},
			{op: "arrive", id: 3, deadline: 100, want: "queued"},
			{op: "arrive", id: 4, deadline: 500, want: "queued"},
			{op: "arrive", id: 5, deadline: 150, want: "queued"},
			{at: 200, op: "release", want: "4"},
			{at: 200, op: "pending", want: "2"},
			{at: 200, op: "remove", id: 3, want: "true"}, // pending expired waiters can be removed
			{at: 200, op: "expire", want: "2,5"},
			{at: 200, op: "pending", want: "0"},
		}, 1, 0},
		{"full queue sweeps expired waiters to make room", 1, 2, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, deadline: 50, want: "queued"},
			{op: "arrive", id: 3, want: "queued"},
			{at: 10, op: "arrive", id: 4, want: "rejected"},
			{at: 50, op: "arrive", id: 5, want: "queued"},
			{at: 50, op: "expire", want: "2"},
			{at: 60, op: "release", want: "3"},
			{at: 70, op: "release", want: "5"},
		}, 1, 0},
		{"removal from head, middle and tail", 1, 10, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, want: "queued"},
			{op: "arrive", id: 3, want: "queued"},
			{op: "arrive", id: 4, want: "queued"},
			{op: "arrive", id: 5, want: "queued"},
			{op: "arrive", id: 6, want: "queued"},
			{op: "remove", id: 3, want: "true"}, // near the head
			{op: "remove", id: 5, want: "true"}, // near the tail
			{op: "remove", id: 2, want: "true"}, // the head
			{op: "remove", id: 6, want: "true"}, // the tail
			{op: "remove", id: 9, want: "false"},
			{op: "remove", id: 1, want: "false"}, // admitted, not waiting
			{op: "release", want: "4"},
			{op: "release", want: "none"},
		}, 0, 0},
		{"limit lowered revokes nothing", 3, 10, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, want: "admitted"},
			{op: "arrive", id: 3, want: "admitted"},
			{op: "limit", id: 1},
			{op: "arrive", id: 4, want: "queued"},
			{op: "release", want: "none"}, // 2 in flight > limit 1
			{op: "release", want: "none"},
			{op: "release", want: "4"},
		}, 1, 0},
		{"limit raised: Next admits the oldest waiters that fit", 1, 10, []slotOp{
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, deadline: 10, want: "queued"},
			{op: "arrive", id: 3, want: "queued"},
			{op: "arrive", id: 4, want: "queued"},
			{op: "arrive", id: 5, want: "queued"},
			{op: "limit", id: 3},
			{op: "arrive", id: 6, want: "queued"}, // no barging before Next
			{at: 20, op: "next", want: "3"},
			{at: 20, op: "next", want: "4"},
			{at: 20, op: "next", want: "none"},
			{at: 20, op: "expire", want: "2"},
		}, 3, 2},
		{"release with nothing in flight", 2, 2, []slotOp{
			{op: "release", want: "none"},
			{op: "arrive", id: 1, want: "admitted"},
			{op: "arrive", id: 2, want: "admitted"},
		}, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSlots[int](tt.limit, tt.maxQueue)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range tt.ops {
				now := ms(o.at)
				var got string
				switch o.op {
				case "arrive":
					var dl time.Time
					if o.deadline != 0 {
						dl = ms(o.deadline)
					}
					got = s.Arrive(now, o.id, dl).String()
				case "release", "next":
					var id int
					var ok bool
					if o.op == "release" {
						id, ok = s.Release(now)
					} else {
						id, ok = s.Next(now)
					}
					got = "none"
					if ok {
						got = itoa(id)
					}
				case "expire":
					var ids []string
					s.Expire(now, func(id int) { ids = append(ids, itoa(id)) })
					got = joinComma(ids)
				case "remove":
					got = "false"
					if s.Remove(o.id) {
						got = "true"
					}
				case "pending":
					got = itoa(s.PendingExpired())
				case "limit":
					if err := s.SetLimit(o.id); err != nil {
						t.Fatal(err)
					}
					got = o.want
				default:
					t.Fatalf("bad op %q", o.op)
				}
				if got != o.want {
					t.Fatalf("op %d (%s %d at %dms) = %q, want %q", i, o.op, o.id, o.at, got, o.want)
				}
			}
			if s.InFlight() != tt.inFlight || s.QueueLen() != tt.queue {
				t.Errorf("end: InFlight %d QueueLen %d, want %d and %d", s.InFlight(), s.QueueLen(), tt.inFlight, tt.queue)
			}
		})
	}
}

func itoa(n int) string { return strconvFloat(float64(n)) }

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func TestSlotsInvalid(t *testing.T) {
	for _, c := range []struct {
		limit, maxQueue int
		field, value    string
	}{
		{0, 5, "limit", "0"},
		{-2, 5, "limit", "-2"},
		{3, -1, "maxQueue", "-1"},
	} {
		_, err := NewSlots[int](c.limit, c.maxQueue)
		if err == nil {
			t.Errorf("NewSlots(%d, %d): no error", c.limit, c.maxQueue)
			continue
		}
		checkErr(t, err, c.field, c.value)
	}
	s, _ := NewSlots[int](4, 4)
	if err := s.SetLimit(0); err == nil {
		t.Error("SetLimit(0): no error")
	} else {
		checkErr(t, err, "limit", "0")
	}
	if s.Limit() != 4 {
		t.Errorf("rejected SetLimit changed the limit to %d", s.Limit())
	}
	if Outcome(0).String() != "Outcome(0)" {
		t.Errorf("Outcome(0).String() = %q", Outcome(0).String())
	}
}

// slotsModel is an obviously correct, slow Slots: plain slices.
type slotsModel struct {
	limit, maxQueue, inFlight int
	queue                     []slotEntry[int]
	expired                   []int
}

func (m *slotsModel) sweep(now time.Time) {
	kept := m.queue[:0:0]
	for _, e := range m.queue {
		if expired(e.deadline, now) {
			m.expired = append(m.expired, e.t)
		} else {
			kept = append(kept, e)
		}
	}
	m.queue = kept
}

func (m *slotsModel) arrive(now time.Time, id int, dl time.Time) Outcome {
	if len(m.queue) == 0 && m.inFlight < m.limit {
		m.inFlight++
		return Admitted
	}
	if len(m.queue) >= m.maxQueue {
		m.sweep(now)
		if len(m.queue) >= m.maxQueue {
			return Rejected
		}
	}
	m.queue = append(m.queue, slotEntry[int]{t: id, arrival: now, deadline: dl})
	return Queued
}

func (m *slotsModel) next(now time.Time) (int, bool) {
	for m.inFlight < m.limit && len(m.queue) > 0 {
		e := m.queue[0]
		m.queue = m.queue[1:]
		if expired(e.deadline, now) {
			m.expired = append(m.expired, e.t)
			continue
		}
		m.inFlight++
		return e.t, true
	}
	return 0, false
}

func (m *slotsModel) remove(id int) bool {
	for i, e := range m.queue {
		if e.t == id {
			m.queue = slices.Delete(m.queue, i, i+1)
			return true
		}
	}
	if i := slices.Index(m.expired, id); i >= 0 {
		m.expired = slices.Delete(m.expired, i, i+1)
		return true
	}
	return false
}

// TestSlotsMatchesModel drives Slots (ring buffer, shifting removal,
// deadline bound) and the slice model with the same random operations.
func TestSlotsMatchesModel(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 1))
		limit, maxQueue := 1+rng.IntN(4), rng.IntN(40)
		s, err := NewSlots[int](limit, maxQueue)
		if err != nil {
			t.Fatal(err)
		}
		m := &slotsModel{limit: limit, maxQueue: maxQueue}
		now := t0
		nextID := 0
		for step := range 5000 {
			now = now.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
			switch k := rng.IntN(100); {
			case k < 45:
				nextID++
				var dl time.Time
				if rng.IntN(3) > 0 {
					dl = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
				}
				if got, want := s.Arrive(now, nextID, dl), m.arrive(now, nextID, dl); got != want {
					t.Fatalf("seed %d step %d: Arrive = %v, model %v", seed, step, got, want)
				}
			case k < 80:
				var gotID, wantID int
				var gotOK, wantOK bool
				gotID, gotOK = s.Release(now)
				if m.inFlight > 0 {
					m.inFlight--
					wantID, wantOK = m.next(now)
				}
				if gotID != wantID || gotOK != wantOK {
					t.Fatalf("seed %d step %d: Release = %d,%v, model %d,%v", seed, step, gotID, gotOK, wantID, wantOK)
				}
			case k < 88:
				id := 1 + rng.IntN(nextID+1)
				if got, want := s.Remove(id), m.remove(id); got != want {
					t.Fatalf("seed %d step %d: Remove(%d) = %v, model %v", seed, step, id, got, want)
				}
			case k < 95:
				var got []int
				s.Expire(now, func(id int) { got = append(got, id) })
				m.sweep(now)
				want := m.expired
				m.expired = nil
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d: Expire reported %v, model %v", seed, step, got, want)
				}
			default:
				n := 1 + rng.IntN(5)
				if err := s.SetLimit(n); err != nil {
					t.Fatal(err)
				}
				m.limit = n
				for {
					gotID, gotOK := s.Next(now)
					wantID, wantOK := m.next(now)
					if gotID != wantID || gotOK != wantOK {
						t.Fatalf("seed %d step %d: Next = %d,%v, model %d,%v", seed, step, gotID, gotOK, wantID, wantOK)
					}
					if !gotOK {
						break
					}
				}
			}
			if s.InFlight() != m.inFlight || s.QueueLen() != len(m.queue) || s.PendingExpired() != len(m.expired) {
				t.Fatalf("seed %d step %d: in flight %d queue %d pending %d, model %d %d %d", seed, step,
					s.InFlight(), s.QueueLen(), s.PendingExpired(), m.inFlight, len(m.queue), len(m.expired))
			}
		}
	}
}

func TestSlotsSteadyStateAllocs(t *testing.T) {
	s, err := NewSlots[int](2, 16)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	for i := range 20 { // grow the ring to its final size
		s.Arrive(now, i, now.Add(time.Second))
	}
	id := 100
	allocs := testing.AllocsPerRun(1000, func() {
		id++
		now = now.Add(time.Millisecond)
		s.Arrive(now, id, now.Add(time.Second))
		s.Release(now)
		s.Expire(now, nil)
	})
	if allocs != 0 {
		t.Errorf("steady state allocates %v per op, want 0", allocs)
	}
}

// Fair queueing: within a class, waiters are served by tag (equal tags in
// arrival order), Ahead counts only the waiters a tag follows, and a full
// queue evicts the largest tag of the arrival's class when it exceeds the
// arrival's.
func TestSlotsFair(t *testing.T) {
	now := time.Unix(0, 0)
	s := fairSlots(t, 4, 2)
	// heavy's tags 1, 2, 3; light's 1 arrives last.
	arriveTagged(t, s, now, []taggedWaiter{{"h1", 1}, {"h2", 2}, {"h3", 3}, {"l1", 1}})
	for _, c := range []struct {
		class int
		tag   float64
		want  int
		why   string
	}{{0, 1, 2, "h1 and l1"}, {0, 2.5, 3, "h1, l1 and h2"}, {1, 0, 4, "every class-0 waiter"}} {
		if got := s.AheadTagged(c.class, c.tag); got != c.want {
			t.Errorf("AheadTagged(%d, %g) = %d, want %d (%s)", c.class, c.tag, got, c.want, c.why)
		}
	}
	// The queue is full: a light arrival with tag 2 evicts h3 (tag 3); one
	// with tag 9 is refused.
	o, victim, evicted := s.ArriveTagged(now, "l2", 0, 2, time.Time{})
	if o != Queued || !evicted || victim != "h3" {
		t.Errorf("full queue, tag 2: %v, victim %q (%v); want queued evicting h3", o, victim, evicted)
	}
	if o, _, evicted := s.ArriveTagged(now, "x", 0, 9, time.Time{}); o != Rejected || evicted {
		t.Errorf("full queue, tag 9: %v (evicted %v); want rejected", o, evicted)
	}
	if got, want := releaseAll(t, s, now, 4), []string{"h1", "l1", "h2", "l2"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v (by tag, equal tags in arrival order)", got, want)
	}
	s.SetFair(false)
	if s.Fair() {
		t.Error("SetFair(false) left it on")
	}
}

// fairSlots returns one slot, taken, and a queue of queue places over
// classes classes with fair queueing on: every arrival waits.
func fairSlots(t *testing.T, queue, classes int) *Slots[string] {
	t.Helper()
	s, err := NewClassSlots[string](1, queue, classes)
	if err != nil {
		t.Fatal(err)
	}
	s.SetFair(true)
	if !s.TryAdmit() {
		t.Fatal("the first request found no slot")
	}
	return s
}

// taggedWaiter is a class-0 arrival with its fair-queueing tag.
type taggedWaiter struct {
	id  string
	tag float64
}

// arriveTagged queues ws in order and fails unless each is queued.
func arriveTagged(t *testing.T, s *Slots[string], now time.Time, ws []taggedWaiter) {
	t.Helper()
	for i, w := range ws {
		if o, _, _ := s.ArriveTagged(now, w.id, 0, w.tag, time.Time{}); o != Queued {
			t.Fatalf("waiter %d (%s): %v", i, w.id, o)
		}
	}
}

// releaseAll releases n waiters and returns them in the order served.
func releaseAll(t *testing.T, s *Slots[string], now time.Time, n int) []string {
	t.Helper()
	var order []string
	for range n {
		next, ok := s.Release(now)
		if !ok {
			t.Fatal("no waiter served")
		}
		order = append(order, next)
	}
	return order
}

// Retag rewrites the tags of a class's waiters, and the serving order
// follows the new tags; without fair queueing it does nothing.
func TestSlotsRetag(t *testing.T) {
	now := time.Unix(0, 0)
	s := fairSlots(t, 8, 1)
	arriveTagged(t, s, now, []taggedWaiter{{"a1", 1}, {"b1", 2}, {"a2", 3}, {"b2", 4}})
	// a's waiters move back by 2.5: a1 3.5, a2 5.5.
	s.Retag(0, func(id string, tag float64) float64 {
		if id[0] == 'a' {
			return tag + 2.5
		}
		return tag
	})
	if got, want := releaseAll(t, s, now, 4), []string{"b1", "a1", "b2", "a2"}; !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}
	s.SetFair(false)
	s.ArriveTagged(now, "x", 0, 1, time.Time{})
	called := false
	s.Retag(0, func(string, float64) float64 { called = true; return 0 })
	if called {
		t.Error("Retag ran without fair queueing")
	}
}
