// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/lab/report"
)

// The costly figure: two APIs share a CPU-bound leaf service, one of them
// 10× (and 50×) costlier per call, at 8× the leaf's capacity; a row per
// way of running the leaf's stage (FIFO; fair queueing charged per
// request; fair queueing charged by service time, with and without the
// hog rule; by service time with cancellation off; with the slot share,
// the deadline budget at the leaf, and the leaf's limit bounded near its
// cores). Goodput is counted in
// the leaf's CPU seconds per second of the calls answered within their
// deadline, so that the shares are the cost measure's, and wasted work is
// the leaf's CPU time spent on calls that were not answered in time.

// CostlyAPIs are the figure's APIs (their tenants at the leaf), the light
// one first.
var CostlyAPIs = []string{"light", "costly"}

// CostlyAPI is one API's measurements in one row: rates in CPU seconds per
// second of the calls sent in the measured interval (Offered) and of
// those answered within their deadline (Goodput); the calls sent and
// served, and the served calls' p99 in ms.
type CostlyAPI struct {
	Offered, Goodput float64
	Sent, Served     int
	P99MS            float64
}

// CostlyRun is one row of one run: each API's measurements, the leaf's
// CPU seconds spent on the calls sent in the measured interval (LeafWork)
// and on those of them not answered within their deadline (Wasted), the
// calls answered after their deadline (Late), and the hog rule's
// cancellations.
type CostlyRun struct {
	APIs         []CostlyAPI
	LeafWork     float64
	Wasted       float64
	Late         int
	HogCancelled uint64
}

// costlyChecked are the rows held to the figure's checks: sluice's
// configuration for costly APIs (tenants.cost: service_time), with and
// without the hog rule, with the slot share, the deadline budget and the
// leaf's limit near its cores, and the live figure's reported row
// (tenants.cost: reported, the leaf's CPU time carried back to the
// entry).
var costlyChecked = map[string]bool{"service_time": true, "service_time_hog": true, "service_time_share": true, "reported": true,
	"service_time_share_budget": true, "service_time_share_cores": true, "service_time_share_cores_budget": true}

// CostlyChecks records the row (its name, and factor the costly API's
// cost ÷ the light one's) in s, as <metric>_<row>_x<factor>[_<api>], and
// in tab, and returns the checks and key metrics of the rows sluice is
// held to: the light API keeps ≥ 0.95× its max-min fair share of the
// leaf's cores (over the measured offered demands), the costly one gets
// ≥ 0.8× what is left of its share (the rest, not zero), the light API's
// p99 is within the SLO (ms), the wasted work is ≤ 2 % of the leaf's,
// and no call is answered after its deadline.
func CostlyChecks(s *report.Summary, tab *report.Table, row string, factor, cores, slo float64, r CostlyRun) ([]Check, []string, error) {
	offered := make([]float64, len(r.APIs))
	for i, a := range r.APIs {
		offered[i] = a.Offered
	}
	shares := MaxMinShares(cores, offered)
	k := fmt.Sprintf("%s_x%g", strings.ReplaceAll(row, "-", "_"), factor)
	wasted := 0.0
	if r.LeafWork > 0 {
		wasted = r.Wasted / r.LeafWork
	}
	s.Set("wasted_fraction_"+k, wasted)
	s.Set("late_"+k, float64(r.Late))
	s.Set("hog_cancelled_"+k, float64(r.HogCancelled))
	for i, name := range CostlyAPIs {
		a := r.APIs[i]
		s.Set("goodput_cpu_"+k+"_"+name, a.Goodput)
		s.Set("offered_cpu_"+k+"_"+name, a.Offered)
		s.Set("fair_share_cpu_"+k+"_"+name, shares[i])
		s.Set("p99_ms_"+k+"_"+name, a.P99MS)
		if err := tab.Append(row, factor, name, a.Offered, a.Goodput, shares[i], a.Sent, a.Served, a.P99MS, wasted, r.Late, r.HogCancelled); err != nil {
			return nil, nil, err
		}
	}
	if !costlyChecked[row] {
		return nil, nil, nil
	}
	lk, ck := "goodput_cpu_"+k+"_light", "goodput_cpu_"+k+"_costly"
	checks := []Check{
		AtLeast(s, fmt.Sprintf("%s, costly ×%g: the light API keeps ≥ 0.95× its fair share of the leaf's CPU", row, factor), lk, 0.95*shares[0]),
		AtLeast(s, fmt.Sprintf("%s, costly ×%g: the costly API gets the rest, not zero (≥ 0.8× its share)", row, factor), ck, 0.8*shares[1]),
		AtMost(s, fmt.Sprintf("%s, costly ×%g: the light API's p99 ≤ the SLO", row, factor), "p99_ms_"+k+"_light", slo),
		AtMost(s, fmt.Sprintf("%s, costly ×%g: wasted work ≤ 2 %% of the leaf's", row, factor), "wasted_fraction_"+k, 0.02),
		AtMost(s, fmt.Sprintf("%s, costly ×%g: no call answered after its deadline", row, factor), "late_"+k, 0),
	}
	return checks, []string{lk, ck, "wasted_fraction_" + k}, nil
}

// NewCostlyTable returns the figure's table (costly.csv).
func NewCostlyTable() *report.Table {
	return report.NewTable("row", "factor", "api", "offered_cpu", "goodput_cpu", "fair_share_cpu", "sent", "served", "p99_ms", "wasted_fraction", "late", "hog_cancelled")
}
