// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"strings"
	"testing"
	"time"
)

// A service of parallelism 8 whose service time goes from 20 to 100 ms
// for 10 s (a backend whose capacity dropped to a fifth, still 8
// workers) and back. While it is slow, R = 100 ms > SLO/4 = 62.5 ms, and
// the Little's-law cut halves L window after window (to 2 here). When it
// is fast again, the latest steps' p99 (40 ms, under SLO/4) undoes the
// cuts at once: L ← min(L₀, n̄·(SLO/4)/p99) takes L from 2 back to the
// limit it was cut from in a few steps (each raise lets more into
// service: 2 in service, 3.1; 3, 4.7; …), where without it the confirmed
// high probes need seconds. A demand that fills only 2 of its limit gets
// nothing back: its limit does not bind.
func TestAutoUncut(t *testing.T) {
	a := newAuto(t, nil)
	now := t0
	fast, slow := plant{w: 8, s: 0.020}, plant{w: 8, s: 0.100}
	drive(a, fast, &now, 60*time.Second)
	before := a.Limit()
	if before < 8 || before > 12.5 {
		t.Fatalf("limit %.3g on W = 8, want within [8, 12.5]", before)
	}
	drive(a, slow, &now, 10*time.Second)
	cut := a.Limit()
	if cut > before/2 || a.Estimates()["cut_from"] != before {
		t.Fatalf("limit %.3g after 10 s at 100 ms (was %.3g; cut_from %v), want it cut", cut, before, a.Estimates()["cut_from"])
	}
	var undo []string
	start := now
	for now.Sub(start) < time.Second && a.Limit() < before {
		d := drive(a, fast, &now, a.Period())
		if strings.Contains(d.Reason, "cut is undone") {
			undo = append(undo, d.Reason)
		}
	}
	if a.Limit() != before || len(undo) == 0 || a.Estimates()["cut_from"] != 0 {
		t.Fatalf("limit %.3g 1 s after the service is fast again (was %.3g before the cuts, %.3g after): %q", a.Limit(), before, cut, undo)
	}
	t.Logf("back to %.3g in %v: %q", a.Limit(), now.Sub(start), undo)

	// A first cut, and then a fast service under a demand of 2 in
	// service, below the cut limit: the limit is not raised.
	c := newAuto(t, nil)
	now = t0
	drive(c, fast, &now, 60*time.Second)
	for i := 0; i < 100 && c.Limit() >= before; i++ {
		drive(c, slow, &now, c.Period())
	}
	low := c.Limit()
	if low >= before || low < 3 {
		t.Fatalf("limit %.3g after the first cut from %.3g", low, before)
	}
	p := capped{fast, 2}
	for end := now.Add(2 * time.Second); now.Before(end); {
		now = now.Add(c.Period())
		c.Update(now, p.step(c.Current().New, c.Period()))
	}
	if c.Limit() > low {
		t.Fatalf("limit %.3g → %.3g under a demand of 2 in service", low, c.Limit())
	}

	// The probes' evidence replaces the cut's: a cut followed by a
	// shrinking low probe is not undone to the pre-cut limit.
	b := newAuto(t, func(c *Config) { c.InitialLimit = 64 })
	now = t0
	drive(b, plant{w: 4, s: 0.010}, &now, 60*time.Second)
	if b.Estimates()["cut_from"] != 0 {
		t.Fatalf("cut_from %v after the probes found W = 4 from 64, want 0", b.Estimates()["cut_from"])
	}
	if l := b.Limit(); l > 7 {
		t.Fatalf("limit %.3g on W = 4 after a cut from 64, want ≤ 7", l)
	}
}
