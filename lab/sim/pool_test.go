// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPoolLeastInFlight works a pool of two one-server FIFOs by hand:
// jobs go to the member with fewer in system, ties in rotation, and a
// member's scale multiplies the work of the jobs it gets.
func TestPoolLeastInFlight(t *testing.T) {
	e, p := twoFIFOs(t)
	if err := p.SetScale(1, 3); err != nil {
		t.Fatal(err)
	}
	var done [5]time.Duration
	// t=0: tie → a (1 s); t=0: b has fewer → b (1 s × 3 = 3 s);
	// t=0.5: tie (1, 1) in rotation → a, waits until 1 s, ends at 2 s;
	// t=2.5: a empty, b busy → a, ends at 3.5 s; t=2.6: tie → b, which
	// frees at 3 s: 3 + 3 = 6 s.
	submitAt(e, p, 0, 1, &done[0])
	submitAt(e, p, 0, 1, &done[1])
	submitAt(e, p, 500*time.Millisecond, 1, &done[2])
	submitAt(e, p, 2500*time.Millisecond, 1, &done[3])
	submitAt(e, p, 2600*time.Millisecond, 1, &done[4])
	e.Schedule(750*time.Millisecond, func() {
		if p.InSystem() != 3 || p.Waiting() != 1 {
			t.Errorf("at 0.75 s: %d in system, %d waiting; want 3 and 1", p.InSystem(), p.Waiting())
		}
	})
	e.Run(time.Minute)
	want := [5]time.Duration{time.Second, 3 * time.Second, 2 * time.Second, 3500 * time.Millisecond, 6 * time.Second}
	if done != want {
		t.Errorf("finish times %v, want %v", done, want)
	}
	// a busy 3 s, b 6 s of the 60 s run, equal weights.
	if got := p.Busy(); got != 4.5 {
		t.Errorf("Busy() = %v, want 4.5 s (the members' mean)", got)
	}
}

// twoFIFOs returns an engine and a pool of two one-server FIFOs of equal
// weight.
func twoFIFOs(t *testing.T) (*Engine, *Pool) {
	t.Helper()
	e := New(1)
	a, _ := NewFIFO(e, FIFOConfig{Servers: 1})
	b, _ := NewFIFO(e, FIFOConfig{Servers: 1})
	p, err := NewPool([]Station{a, b}, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	return e, p
}

// A pool tells a job's request which member it went to (Request.OnRoute),
// for the stage's overtake meter; a job without a request is served alike.
func TestPoolRoutes(t *testing.T) {
	_, p := twoFIFOs(t)
	var got []int
	for range 3 {
		r := &Request{}
		r.OnRoute(func(_ *Request, m int) { got = append(got, m) })
		p.Submit(&Job{Req: r, Work: 1})
	}
	p.Submit(&Job{Work: 1})
	// Ties in rotation (a, b), then the fewer in system: a and b hold
	// one each, a tie again, in rotation → a.
	if want := []int{0, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("routes %v, want %v", got, want)
	}
	if p.InSystem() != 4 {
		t.Errorf("%d in system, want 4", p.InSystem())
	}
}

func TestPoolErrors(t *testing.T) {
	e := New(1)
	f, _ := NewFIFO(e, FIFOConfig{Servers: 1})
	for _, c := range []struct {
		members []Station
		weights []float64
		want    string
	}{
		{nil, nil, "no members"},
		{[]Station{f}, []float64{1, 2}, "2 weights for 1 members"},
		{[]Station{f}, []float64{0}, "weight 0 = 0"},
		{[]Station{nil}, []float64{1}, "member 0 is nil"},
	} {
		if _, err := NewPool(c.members, c.weights); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPool(%v, %v) = %v, want %q", c.members, c.weights, err, c.want)
		}
	}
	p, _ := NewPool([]Station{f}, []float64{1})
	if err := p.SetScale(1, 2); err == nil {
		t.Error("SetScale of member 1 of 1: no error")
	}
	if err := p.SetScale(0, 0); err == nil {
		t.Error("SetScale 0: no error")
	}
}
