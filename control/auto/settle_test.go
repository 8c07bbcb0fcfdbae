// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"
	"strings"
	"testing"
)

// A stage with several classes lets its highest class past a limit that
// rejects at once (stage.Priority's reserve: L + ⌈0.3·L⌉), so under a
// steady flow of that class the number in service never comes down to
// the window's limit. Here it stays at L + 2 behind a service of 200 ms
// (over SLO/4: Little's-law cut territory, and a p99 that leaves no
// queue). Without a bound on settling, the window waited for a drain that
// never came and L stayed where it was for good; with it, the window
// settles after MaxWindow, is measured and judged, and the cut comes.
func TestAutoSettleIsBounded(t *testing.T) {
	a := newAuto(t, func(c *Config) { c.InitialLimit = 8 })
	now := t0
	var why []string
	for range 50 {
		now = now.Add(a.Period())
		m := plant{w: 100, s: 0.2}.step(a.Current().New+2, a.Period())
		m.QueueWaitMean, m.QueueWaitMin = math.NaN(), math.NaN()
		why = append(why, a.Update(now, m).Reason)
	}
	if a.Limit() >= 8 {
		t.Fatalf("limit %g after 5 s in service above it, want the Little's-law cut; last reasons %q", a.Limit(), why[len(why)-3:])
	}
	cut := false
	for _, r := range why {
		cut = cut || strings.Contains(r, "over SLO/4")
	}
	if !cut {
		t.Fatalf("limit %g without a Little's-law cut: %q", a.Limit(), why)
	}
}
