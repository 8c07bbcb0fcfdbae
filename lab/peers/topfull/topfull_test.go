// SPDX-License-Identifier: Apache-2.0

package topfull

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/internal/testclock"
	"github.com/sluicehq/sluice/lab/peers"
)

var t0, ms = testclock.T0, testclock.Ms

func newEntry(t *testing.T, paths map[string][]string, business map[string]int) *Entry {
	t.Helper()
	c := DefaultConfig()
	c.SLO, c.Paths, c.Business = 100*time.Millisecond, paths, business
	e, err := NewEntry(c)
	if err != nil {
		t.Fatal(err)
	}
	e.Update(t0)
	return e
}

// traffic sends n calls of api at at, answers ok of them with latency lat
// and the rest with latency late (failed), and returns how many went.
func traffic(e *Entry, api string, at time.Time, n, ok int, lat, late time.Duration) int {
	sent := 0
	for i := range n {
		c := &peers.Call{Method: api}
		if e.Send(at, c).Verdict != peers.Send {
			continue
		}
		sent++
		c.Sent = at
		if i < ok {
			e.Received(at.Add(lat), c, nil, peers.OK)
		} else {
			e.Received(at.Add(late), c, nil, peers.Canceled)
		}
	}
	return sent
}

func wantLimit(t *testing.T, e *Entry, api string, limit float64) {
	t.Helper()
	got, _ := e.Limit(api)
	if math.Abs(got-limit) > 1e-9 && !(math.IsInf(got, 1) && math.IsInf(limit, 1)) {
		t.Fatalf("%s's limit %.6g, want %.6g", api, got, limit)
	}
}

// One API through an overloaded service: it comes under control at its
// offered rate, falls 5 % while its p95 is above the SLO, rises 1 % when
// below, is enforced by a token bucket of one second, and is released
// when clean.
func TestSingleAPITimeline(t *testing.T) {
	e := newEntry(t, map[string][]string{"a": {"front", "cart"}, "b": {"front", "product"}}, nil)
	// Interval 1: a: 200 calls, 60 fail at 1 s (p95 1 s > 100 ms); b fine.
	traffic(e, "a", t0.Add(ms(10)), 200, 140, ms(50), time.Second)
	traffic(e, "b", t0.Add(ms(10)), 100, 100, ms(50), 0)
	e.ObserveLoad(t0, "cart", 0.9)
	e.ObserveLoad(t0, "front", 0.5)
	e.ObserveLoad(t0, "product", 0.3)
	e.Update(t0.Add(time.Second))
	// a: limit = 200 (its rate), then −0.05·200 = −10 → 190; b untouched.
	wantLimit(t, e, "a", 190)
	wantLimit(t, e, "b", math.Inf(1))
	// Interval 2: 250 calls at once: the bucket (190, full since the
	// limit was set) lets 190 go; the 60 refused are failures.
	if sent := traffic(e, "a", t0.Add(ms(1500)), 250, 250, ms(50), 0); sent != 190 {
		t.Fatalf("bucket let %d of 250 go, want 190", sent)
	}
	e.Update(t0.Add(2 * time.Second))
	// r 250, f 60 > 25: not clean; p95 50 ms < SLO: +0.01·190 = 1.9.
	wantLimit(t, e, "a", 191.9)
	// Interval 3: 100 calls, all fine: clean (f 0, limit ≥ 100): released.
	traffic(e, "a", t0.Add(ms(2500)), 100, 100, ms(50), 0)
	e.Update(t0.Add(3 * time.Second))
	wantLimit(t, e, "a", math.Inf(1))
	if _, ctl := e.Limit("a"); ctl {
		t.Fatal("a still controlled")
	}
}

// Two APIs sharing the overloaded service form one group: a cut goes to
// the lower priority first, a raise to the higher first, capped at 1.1×
// its offered rate, the rest spilling to the next.
func TestGroupPriorities(t *testing.T) {
	e := newEntry(t, map[string][]string{"a": {"front", "cart"}, "b": {"front", "cart", "product"}},
		map[string]int{"a": 0, "b": 1})
	e.ObserveLoad(t0, "cart", 0.95)
	// a: 100 calls, 50 fail; b: 200, 50 fail; both tails 1 s.
	traffic(e, "a", t0.Add(ms(10)), 100, 50, ms(10), time.Second)
	traffic(e, "b", t0.Add(ms(10)), 200, 150, ms(10), time.Second)
	e.Update(t0.Add(time.Second))
	// Limits 100 and 200; priorities (2, 0) and (2, 1): a is cut by
	// 0.05·100 = 5.
	wantLimit(t, e, "a", 95)
	wantLimit(t, e, "b", 200)
	// Next: tails fine; a still fails (20 > 10 % of 100); b clean. The
	// raise goes to b first: 0.01·200 = 2, within 1.1·200 − 200 = 20.
	traffic(e, "a", t0.Add(ms(1100)), 95, 75, ms(10), ms(20))
	e.ObserveLoad(t0, "cart", 0.95)
	for range 5 {
		e.Send(t0.Add(ms(1100)), &peers.Call{Method: "a"}) // refused: bucket empty
	}
	traffic(e, "b", t0.Add(ms(1100)), 200, 200, ms(10), 0)
	e.Update(t0.Add(2 * time.Second))
	wantLimit(t, e, "a", 95)
	wantLimit(t, e, "b", 202)
	// Next: b offers only 150: its cap 1.1·150 − 202 < 0, so the raise
	// 0.01·202 = 2.02 spills to a (cap 1.1·100 − 95 = 15).
	traffic(e, "a", t0.Add(ms(2100)), 100, 70, ms(10), ms(20))
	traffic(e, "b", t0.Add(ms(2100)), 150, 150, ms(10), 0)
	e.Update(t0.Add(3 * time.Second))
	wantLimit(t, e, "a", 97.02)
	wantLimit(t, e, "b", 202)
}

// A cut never takes a limit below min_rate.
func TestMinRate(t *testing.T) {
	e := newEntry(t, map[string][]string{"a": {"cart"}}, nil)
	e.ObserveLoad(t0, "cart", 1)
	traffic(e, "a", t0.Add(ms(10)), 10, 0, 0, time.Second)
	e.Update(t0.Add(time.Second))
	wantLimit(t, e, "a", 10) // 10 − 0.5 → the floor
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"interval", func(c *Config) { c.Interval = 0 }},
		{"decrease", func(c *Config) { c.Decrease = 1 }},
		{"raise_margin", func(c *Config) { c.RaiseMargin = 0.5 }},
		{"targets.cart", func(c *Config) { c.Targets = map[string]float64{"cart": 2} }},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.field+":") {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
}
