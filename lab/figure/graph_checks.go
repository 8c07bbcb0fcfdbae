// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/lab/report"
)

// GraphChecks are the figures' expectations, checked on either driver's
// summary, for the rows it has.
//
// graph: the naive row collapses — goodput below
// CollapseFraction of its level before for CollapseHold after the
// trigger (or all of After, if shorter); the proxy row reproduces the
// independent check (recovery ≤ 1 s, goodput during the trigger ≥ 90 %
// of the reduced capacity); the in-process row does at least as well and
// removes the waste: recovery ≤ 1 s, goodput during the trigger ≥ 95 %
// of the reduced capacity, amplification ≤ 1.05 over the run, wasted
// backend work ≤ 1 %, no backend call after its deadline, recovery no
// later than the proxy row's (within 0.2 s, two steps of the recovery's
// 100 ms measurement) and goodput during the trigger at least the proxy
// row's (within 1 %); and the moonshot, no second below the reduced
// capacity from the trigger on.
//
// graph-crowd (point 5), for each sluice row: the high class keeps
// ≥ 99.4 % of its requests answered within the deadline during the crowd
// with its p99 within the SLO, and the low class gets ≥ 80 % of the rest
// of the capacity.
func GraphChecks(s *report.Summary, c GraphParams) []Check {
	if c.Recover {
		return c.recoverChecks(s)
	}
	has := func(row string) bool { _, ok := s.Get(GraphMetric("users", row)); return ok }
	var cs []Check
	if c.Crowd {
		high := c.Load * c.Capacity() * c.HighShare
		for _, row := range []string{GraphProxy, GraphInProcess} {
			if !has(row) {
				continue
			}
			cs = append(cs,
				AtLeast(s, fmt.Sprintf("%s: under a %g× crowd of the low class, the high class keeps ≥ 99.4 %% of its requests answered within the deadline (Netflix: 99.4 %%)", row, c.CrowdX),
					GraphMetric("high_success_fraction", row), 0.994),
				AtMost(s, fmt.Sprintf("%s: … with its p99 within the objective (%v), across both hops", row, c.SLO),
					GraphMetric("high_p99_ms", row), ms(c.SLO)),
				AtLeast(s, fmt.Sprintf("%s: the low class gets the rest of the capacity, not zero (≥ 80 %% of C − the high class's rate)", row),
					GraphMetric("low_goodput_rps", row), 0.8*(c.Capacity()-high)))
		}
		return cs
	}
	reduced := c.ReducedCapacity()
	if has(GraphNaive) {
		hold := math.Min(c.CollapseHold.Seconds(), c.After.Seconds())
		cs = append(cs, AtLeast(s, fmt.Sprintf("naive: the chain collapses and stays collapsed (goodput < %g %% of its level before) for ≥ %g s after the trigger ends", 100*c.CollapseFraction, hold),
			GraphMetric("collapse_s", GraphNaive), hold))
	}
	if has(GraphProxy) {
		cs = append(cs,
			AtMost(s, "proxy: sluice's proxy at every hop recovers within 1 s after the trigger (the independent check)", GraphMetric("recovery_s", GraphProxy), 1),
			AtLeast(s, "proxy: … with goodput during the trigger near the reduced capacity (≥ 90 %)", GraphMetric("goodput_trigger_rps", GraphProxy), 0.9*reduced))
	}
	if has(GraphInProcess) {
		row := GraphInProcess
		cs = append(cs,
			AtMost(s, "inprocess: recovery ≤ 1 s after the trigger ends", GraphMetric("recovery_s", row), 1),
			AtLeast(s, "inprocess: goodput during the trigger ≥ 95 % of the reduced capacity", GraphMetric("goodput_trigger_rps", row), 0.95*reduced),
			AtMost(s, "inprocess: amplification (backend calls per user request) ≤ 1.05 over the run", GraphMetric("amplification", row), 1.05),
			AtMost(s, "inprocess: backend work wasted on callers that had gone ≤ 1 %", GraphMetric("wasted_fraction", row), 0.01),
			AtMost(s, "inprocess: no backend call after its deadline", GraphMetric("late_calls", row), 0))
		if has(GraphProxy) {
			cs = append(cs,
				AtMost(s, "inprocess: recovers at least as fast as the proxy row (within 0.2 s, two steps of the measurement)", GraphMetric("recovery_s", row), s.Metric(GraphMetric("recovery_s", GraphProxy))+0.2),
				AtLeast(s, "inprocess: goodput during the trigger at least the proxy row's (within 1 %)", GraphMetric("goodput_trigger_rps", row), 0.99*s.Metric(GraphMetric("goodput_trigger_rps", GraphProxy))))
		}
		cs = append(cs, AtLeast(s, "inprocess (moonshot): no second below the reduced capacity from the trigger on", GraphMetric("min_goodput_rps", row), reduced))
	}
	return cs
}
