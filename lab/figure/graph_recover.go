// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/lab/report"
)

// graph-recover: the chain of graph.go after a storm, with a backend of
// 8 workers (C = 400 req/s). The clients send Load·C (0.5·C = 200) user
// requests per second, CrowdLoad·C (3·C) for CrowdLen
// from Warm (the crowd), Load·C again for Gap, then the backend's capacity
// is divided by TriggerFactor for TriggerLen (the capacity drop, at the
// same Load·C), and After is measured after it. What it asks is what
// users of every adaptive limiter report missing (Netflix's
// concurrency-limits and Envoy's adaptive concurrency: limits that do not
// come back): once the storm is over, whatever remembers it — a
// caller's adaptive throttle, a hop's concurrency limit, a queue — must
// let the load through as soon as the destination accepts it again. Its
// expectation: goodput ≥ RecoverRatio × offered in every full second
// after the crowd ends and after the capacity drop ends, the first one
// included, for every sluice row. One class (high): the storm is
// everybody's.

// GraphRecoverRows are graph-recover's default rows: the sluice rows,
// and the in-process row with the SRE book's throttle window.
var GraphRecoverRows = []string{GraphProxy, GraphInProcess, GraphInProcessWindow}

// GraphRecoverGRPCRows are graph-recover's rows over gRPC.
var GraphRecoverGRPCRows = []string{GraphInProcess, GraphInProcessWindow}

// RecoverRatio is the share of each second's offered requests that
// graph-recover's sluice rows must answer within the deadline after each
// event.
const RecoverRatio = 0.95

// DeclareGraphRecover declares graph-recover's parameters on ps.
func DeclareGraphRecover(ps *Params, c *GraphParams) {
	c.Recover = true
	ps.Int(&c.Workers, "workers", 8, 1, 1000, "backend workers (FIFO servers); 8, twice graph's, so that each second after an event counts 200 requests: what a storm's memory costs is a number of requests per event, and at 100 a second one request is 1 % of the bar")
	ps.DurationDist(&c.Service, "service", "uniform:10ms,30ms", "backend service time per request (mean 20 ms: C = 400 req/s with 8 workers)")
	ps.Float(&c.Load, "load", 0.5, 0.01, 100, "offered load before and after each event, × C")
	ps.Float(&c.CrowdLoad, "crowd_load", 3, 0.01, 1000, "offered load during the crowd, × C")
	ps.Duration(&c.Deadline, "deadline", 500*time.Millisecond, time.Millisecond, time.Hour, "every user request's deadline (the clients give up then): goodput counts answers within it")
	ps.Duration(&c.SLO, "slo", 250*time.Millisecond, time.Millisecond, time.Hour, "the objective every sluice stage's auto is told")
	ps.Duration(&c.ClientTimeout, "client_timeout", 500*time.Millisecond, time.Millisecond, time.Hour, "naive, budget and grpc-throttle rows: each client attempt's timeout")
	ps.Duration(&c.Tier1Timeout, "tier1_timeout", 400*time.Millisecond, time.Millisecond, time.Hour, "… each attempt of tier 1 to tier 2")
	ps.Duration(&c.Tier2Timeout, "tier2_timeout", 300*time.Millisecond, time.Millisecond, time.Hour, "… each attempt of tier 2 to the backend")
	ps.Int(&c.Attempts, "attempts", 3, 1, 10, "most attempts of a call, at every client and hop")
	ps.Duration(&c.Backoff, "backoff", 0, 0, time.Hour, "naive, budget and grpc-throttle rows: wait before a retry (0: at once)")
	ps.Float(&c.BudgetRatio, "budget_ratio", 0.2, 0.001, 1, "budget row: retries per call")
	ps.Float(&c.BudgetMinPerSecond, "budget_min_per_second", 10, 0, 1e6, "budget row: retries per second always allowed")
	ps.Duration(&c.BudgetWindow, "budget_window", 10*time.Second, time.Millisecond, time.Hour, "budget row: how far back calls and retries count")
	ps.Float(&c.MaxTokens, "max_tokens", 10, 0.001, 1000, "grpc-throttle row: maxTokens of retryThrottling")
	ps.Float(&c.TokenRatio, "token_ratio", 0.1, 0.001, 1000, "grpc-throttle row: tokenRatio of retryThrottling")
	ps.Duration(&c.Warm, "warm", 10*time.Second, 2*time.Second, time.Hour, "time before the crowd; its second half is the level before")
	ps.Duration(&c.CrowdLen, "crowd_len", 10*time.Second, time.Second, time.Hour, "length of the crowd")
	ps.Duration(&c.Gap, "gap", 15*time.Second, 2*time.Second, time.Hour, "time at the load between the crowd's end and the capacity drop (measured second by second)")
	ps.Duration(&c.TriggerLen, "trigger_len", 10*time.Second, time.Second, time.Hour, "length of the capacity drop")
	ps.Float(&c.TriggerFactor, "trigger_factor", 3, 1, 1000, "the backend's capacity during the drop is C divided by this")
	ps.Duration(&c.After, "after", 15*time.Second, 2*time.Second, time.Hour, "time measured after the capacity drop (second by second)")
	ps.Subset(&c.Rows, "rows", GraphRecoverRows, append(slices.Clone(GraphRows), GraphInProcessWindow), "rows to run (the checks are proxy's and inprocess's; inprocess-window is the in-process row with the SRE book's throttle window, for comparison)")
	ps.Bool(&c.Admission, "admission", true, "inprocess row: the middleware's stage in front of every tier (false: none, an ablation)")
	ps.Bool(&c.Throttle, "throttle", true, "inprocess row: the client side's adaptive throttling (false: off, an ablation)")
	ps.Bool(&c.RetryBudget, "retry_budget", true, "inprocess row: the client side's retry budget (false: unbounded, an ablation)")
	ps.Duration(&c.PerTry, "per_try", 0, 0, time.Hour, "inprocess row: the client side's per-try timeout (0: none, its default)")
	ps.Choice(&c.Arrivals, "arrivals", "constant", []string{"constant", "poisson"}, "user arrivals: evenly spaced, or Poisson")
}

// DefaultGraphRecover returns graph-recover's defaults.
func DefaultGraphRecover() GraphParams {
	var c GraphParams
	DeclareGraphRecover(NewParams("graph-recover"), &c)
	return c
}

// DropStart is graph-recover's capacity drop's start; DropEnd its end.
func (c GraphParams) DropStart() time.Duration { return c.Warm + c.CrowdLen + c.Gap }

// DropEnd returns the end of graph-recover's capacity drop.
func (c GraphParams) DropEnd() time.Duration { return c.DropStart() + c.TriggerLen }

// TriggerSpan returns when the backend's capacity is divided by
// TriggerFactor: graph's trigger, graph-recover's drop; false for none.
func (c GraphParams) TriggerSpan() (from, to time.Duration, ok bool) {
	switch {
	case c.TriggerFactor == 1 || c.Crowd:
		return 0, 0, false
	case c.Recover:
		return c.DropStart(), c.DropEnd(), true
	}
	return c.EventStart(), c.EventEnd(), true
}

// recoverMetrics are a row's figures after graph-recover's two events:
// the lowest share of a second's offered requests answered within the
// deadline over the full seconds after the event (min), the first of
// them (first), and the seconds below RecoverRatio (short).
type recoverMetrics struct {
	crowdMin, crowdFirst, crowdShort float64
	dropMin, dropFirst, dropShort    float64
	crowdGood, dropGood              float64
}

// secondRatios returns, for the full seconds in [from, to), each
// second's good answers over its offered requests (by send time).
func (b graphBins) secondRatios(from, to time.Duration) []float64 {
	var out []float64
	first := int(math.Ceil(from.Seconds() - 1e-9))
	last := int(math.Floor(to.Seconds() + 1e-9))
	for i := first; i < last && i < len(b.calls); i++ {
		offered := 0.0
		for cl := range b.sent {
			offered += b.sent[cl][i]
		}
		out = append(out, ratio(b.goodTotal(i), offered))
	}
	return out
}

func (c GraphParams) recoverMetrics(b graphBins) recoverMetrics {
	var m recoverMetrics
	sum := func(rs []float64) (lo, first, short float64) {
		lo, first = math.NaN(), math.NaN()
		for i, r := range rs {
			if i == 0 {
				lo, first = r, r
			}
			lo = math.Min(lo, r)
			if !(r >= RecoverRatio) {
				short++
			}
		}
		return lo, first, short
	}
	m.crowdMin, m.crowdFirst, m.crowdShort = sum(b.secondRatios(c.EventEnd(), c.DropStart()))
	m.dropMin, m.dropFirst, m.dropShort = sum(b.secondRatios(c.DropEnd(), c.End()))
	mean := func(from, to time.Duration) float64 {
		s, n := 0.0, 0
		for i := int(from / time.Second); i < int(to/time.Second) && i < len(b.calls); i++ {
			s += b.goodTotal(i)
			n++
		}
		return s / float64(max(n, 1))
	}
	m.crowdGood = mean(c.EventStart(), c.EventEnd())
	m.dropGood = mean(c.DropStart(), c.DropEnd())
	return m
}

// setRecover sets graph-recover's metrics of run's row on s.
func (c GraphParams) setRecover(s *report.Summary, row string, b graphBins) {
	m := c.recoverMetrics(b)
	set := func(base string, v float64) { s.Set(GraphMetric(base, row), v) }
	set("after_crowd_min_ratio", m.crowdMin)
	set("after_crowd_first_ratio", m.crowdFirst)
	set("after_crowd_short_s", m.crowdShort)
	set("after_drop_min_ratio", m.dropMin)
	set("after_drop_first_ratio", m.dropFirst)
	set("after_drop_short_s", m.dropShort)
	set("goodput_crowd_rps", m.crowdGood)
	set("goodput_drop_rps", m.dropGood)
}

// recoverChecks are graph-recover's expectations, for the sluice rows
// the summary has: goodput ≥ RecoverRatio × offered in every full second
// after the crowd (until the drop) and after the drop (to the end), and,
// so that a row that stopped protecting anything does not pass, goodput
// during the crowd ≥ 90 % of C and during the drop ≥ 90 % of the reduced
// capacity.
func (c GraphParams) recoverChecks(s *report.Summary) []Check {
	has := func(row string) bool { _, ok := s.Get(GraphMetric("users", row)); return ok }
	var cs []Check
	for _, row := range []string{GraphProxy, GraphInProcess} {
		if !has(row) {
			continue
		}
		cs = append(cs,
			AtLeast(s, fmt.Sprintf("%s: after the %g× crowd ends, goodput ≥ %g × offered in every full second, the first included", row, c.CrowdLoad, RecoverRatio),
				GraphMetric("after_crowd_min_ratio", row), RecoverRatio),
			AtLeast(s, fmt.Sprintf("%s: after the capacity drop (÷ %g) ends, goodput ≥ %g × offered in every full second, the first included", row, c.TriggerFactor, RecoverRatio),
				GraphMetric("after_drop_min_ratio", row), RecoverRatio),
			AtLeast(s, fmt.Sprintf("%s: during the crowd, goodput ≥ 90 %% of C (the storm is still cut to what the chain serves, not shed whole)", row),
				GraphMetric("goodput_crowd_rps", row), 0.9*c.Capacity()),
			AtLeast(s, fmt.Sprintf("%s: during the capacity drop, goodput ≥ 90 %% of the reduced capacity", row),
				GraphMetric("goodput_drop_rps", row), 0.9*math.Min(c.ReducedCapacity(), c.Load*c.Capacity())))
	}
	return cs
}

// recoverFigure returns graph-recover's panels, without series: goodput,
// goodput over offered, backend calls.
func (c GraphParams) recoverFigure() *report.Figure {
	ev := []report.RefLine{{Value: c.EventStart().Seconds()}, {Value: c.EventEnd().Seconds()},
		{Value: c.DropStart().Seconds()}, {Value: c.DropEnd().Seconds()}}
	return &report.Figure{PanelHeight: 3, Panels: []report.Panel{
		{Title: fmt.Sprintf("graph-recover: a %g× crowd from %gs to %gs, capacity ÷ %g from %gs to %gs, %g× C otherwise",
			c.CrowdLoad, c.EventStart().Seconds(), c.EventEnd().Seconds(), c.TriggerFactor, c.DropStart().Seconds(), c.DropEnd().Seconds(), c.Load),
			XLabel: "time (s, by send time)", YLabel: fmt.Sprintf("answers within %v / s", c.Deadline), YMin: 0, VLines: ev,
			HLines: []report.RefLine{{Value: c.Capacity(), Label: "capacity"}, {Value: c.Load * c.Capacity(), Label: "offered"}}},
		{XLabel: "time (s, by send time)", YLabel: "goodput / offered", YMin: 0, VLines: ev,
			HLines: []report.RefLine{{Value: RecoverRatio, Label: fmt.Sprint(RecoverRatio)}}},
		{XLabel: "time (s)", YLabel: "backend calls / s", YMin: 0, VLines: ev,
			HLines: []report.RefLine{{Value: c.Capacity(), Label: "capacity"}}},
	}}
}
