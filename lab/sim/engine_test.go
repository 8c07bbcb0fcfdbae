// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHeapOrderingAndTies(t *testing.T) {
	e := New(1)
	r := rand.New(rand.NewPCG(1, 1))
	type key struct {
		at  time.Duration
		ord int
	}
	var want, got []key
	for i := range 2000 {
		at := time.Duration(r.IntN(50)) * time.Millisecond // many ties
		k := key{at, i}
		want = append(want, k)
		e.Schedule(at, func() {
			if e.Now() != k.at {
				t.Errorf("event %d ran at %v, scheduled for %v", k.ord, e.Now(), k.at)
			}
			got = append(got, k)
		})
	}
	slices.SortStableFunc(want, func(a, b key) int { return int(a.at - b.at) })
	e.Run(Forever)
	if !slices.Equal(got, want) {
		t.Fatal("events did not run in (time, insertion) order")
	}
	if e.Processed() != 2000 || e.Pending() != 0 {
		t.Errorf("processed %d, pending %d", e.Processed(), e.Pending())
	}
}

func TestEventsScheduledFromEvents(t *testing.T) {
	e := New(1)
	var order []string
	e.Schedule(time.Second, func() {
		order = append(order, "a")
		e.After(0, func() { order = append(order, "c") })           // same time, after b
		e.Schedule(0, func() { order = append(order, "d") })        // in the past: runs now, after c
		e.After(time.Second, func() { order = append(order, "e") }) // at 2 s
	})
	e.Schedule(time.Second, func() { order = append(order, "b") })
	e.Run(10 * time.Second)
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if e.Now() != 10*time.Second {
		t.Errorf("Now() = %v after Run(10s)", e.Now())
	}
}

func TestTimerStop(t *testing.T) {
	e := New(1)
	ran := map[string]bool{}
	a := e.After(time.Second, func() { ran["a"] = true })
	b := e.After(2*time.Second, func() { ran["b"] = true })
	c := e.After(3*time.Second, func() { ran["c"] = true })
	if !b.Pending() || !b.Stop() || b.Stop() || b.Pending() {
		t.Error("Stop on a pending timer: want true once, then false")
	}
	if when, ok := c.When(); !ok || when != 3*time.Second {
		t.Errorf("c.When() = %v, %v", when, ok)
	}
	e.Run(time.Second)
	if a.Stop() {
		t.Error("Stop after the event ran returned true")
	}
	// a's event is recycled for d; the stale handle must not cancel d.
	d := e.After(time.Second, func() { ran["d"] = true })
	if a.Stop() || !d.Pending() {
		t.Error("a stale timer cancelled a reused event")
	}
	var zero Timer
	if zero.Stop() || zero.Pending() {
		t.Error("zero Timer is pending")
	}
	e.Run(Forever)
	if !ran["a"] || ran["b"] || !ran["c"] || !ran["d"] {
		t.Errorf("ran %v, want a, c, d", ran)
	}
}

func TestTimerStopManyRandom(t *testing.T) {
	e := New(1)
	r := rand.New(rand.NewPCG(2, 2))
	var timers []Timer
	fired := map[int]bool{}
	for i := range 5000 {
		timers = append(timers, e.After(time.Duration(r.IntN(1000)), func() { fired[i] = true }))
	}
	stopped := map[int]bool{}
	for i := range timers {
		if r.IntN(2) == 0 {
			stopped[i] = timers[i].Stop()
		}
	}
	var last time.Duration
	for e.Step() {
		if e.Now() < last {
			t.Fatal("time went backwards after removals")
		}
		last = e.Now()
	}
	for i := range timers {
		if stopped[i] == fired[i] {
			t.Fatalf("timer %d: stopped %v, fired %v", i, stopped[i], fired[i])
		}
	}
}

func TestEvery(t *testing.T) {
	e := New(1)
	e.Run(500 * time.Millisecond)
	var ticks []time.Duration
	var tk *Ticker
	tk, err := e.Every(time.Second, func() {
		ticks = append(ticks, e.Now())
		if len(ticks) == 3 {
			tk.Stop()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Run(time.Minute)
	want := []time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond, 3500 * time.Millisecond}
	if !slices.Equal(ticks, want) {
		t.Errorf("ticks %v, want %v", ticks, want)
	}
	if _, err := e.Every(0, func() {}); err == nil {
		t.Error("Every(0) accepted")
	}
}

func TestRunStopAndTime(t *testing.T) {
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	e := NewAt(1, base)
	n := 0
	if _, err := e.Every(time.Second, func() {
		n++
		if n == 5 {
			e.Stop()
		}
	}); err != nil {
		t.Fatal(err)
	}
	e.Run(time.Hour)
	if n != 5 || e.Now() != 5*time.Second {
		t.Errorf("after Stop: %d ticks, Now %v", n, e.Now())
	}
	if got := e.Time(); !got.Equal(base.Add(5 * time.Second)) {
		t.Errorf("Time() = %v", got)
	}
	e.Run(10 * time.Second)
	if n != 10 {
		t.Errorf("resumed run: %d ticks, want 10 (the tick at exactly until runs)", n)
	}
	if New(1).Time() != DefaultBase {
		t.Error("default base is not the Unix epoch")
	}
}

func TestStreams(t *testing.T) {
	a, b := New(7), New(7)
	a.Stream("x") // creating other streams must not perturb
	s1, s2, s3 := a.Stream("users"), b.Stream("users"), b.Stream("open")
	s4 := New(8).Stream("users")
	for range 10 {
		x, y, z, w := s1.Uint64(), s2.Uint64(), s3.Uint64(), s4.Uint64()
		if x != y {
			t.Fatal("same seed and name gave different streams")
		}
		if x == z || x == w {
			t.Fatal("different names or seeds gave equal draws")
		}
	}
	if first, second := a.streamName("open", ""), a.streamName("open", ""); first == second {
		t.Errorf("unnamed streams are not distinct: %q twice", first)
	}
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want time.Duration
	}{{0.02, 20 * time.Millisecond}, {-1, 0}, {1e300, Forever}, {1.5e-9, 2}} {
		if got := Seconds(tc.in); got != tc.want {
			t.Errorf("Seconds(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
