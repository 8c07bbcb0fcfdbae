// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/retry"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
)

// The chain figures (docs/hops.md, docs/experiments.md): overload in
// a chain of services, the way it turns into a metastable failure, and
// what stops it. This file is the part both drivers share: the chain, its
// parameters, the rows, the records a run produces, the metrics computed
// from them and the expectations.
//
// The chain: a client population → tier 1 → tier 2 → a backend of
// capacity C (Workers FIFO servers, service times from Service; the work
// of a request is done even when its caller has left, as a real server
// does it). Each tier calls the next hop once per request it serves, with
// its own retries. Live, each tier is its own process (`sluice-lab
// testbed tier`), and so are the backend and every sluice proxy.
//
// graph: the clients send Load·C user requests per second (evenly spaced
// by default), each with a deadline of Deadline; the trigger divides the
// backend's capacity by TriggerFactor for TriggerLen from Warm (each
// request arriving then costs TriggerFactor times its work).
//
// graph-crowd: two client populations, the high-priority class
// (HighShare of Load·C) and the low one (the rest), and for CrowdLen from
// Warm a crowd of the low class at CrowdX times its rate; the backend's
// capacity does not change.
//
// Every row gives every client and hop a timeout and up to Attempts
// attempts; what bounds the retries, and what else a hop does, is the
// row's:
//
//   - naive: no control. Clients and tiers retry every failure a retry
//     can help (transport failure or the attempt's timeout, 429, 502,
//     503, 504) after Backoff, each attempt bounded by its hop's timeout
//     (ClientTimeout, Tier1Timeout, Tier2Timeout), the user's by
//     Deadline; a tier stops when its caller leaves (Go's request
//     context), nobody carries a deadline. The retry policy is package
//     retry's Naive, the same object in both drivers.
//   - budget: the same, every retry within a per-destination retry budget
//     (Finagle's RetryBudget, Envoy's retry budget: BudgetRatio of the
//     calls plus BudgetMinPerSecond over BudgetWindow; package client's
//     budget with its throttle off: retry.Budget).
//   - grpc-throttle: the same, retries allowed while grpc-go's token
//     count per destination (MaxTokens, TokenRatio) is above half
//     (gRFC A6; retry.Throttle).
//   - proxy: naive clients and tiers, unchanged, with `sluice proxy` in
//     front of every hop (tier 1, tier 2 and the backend): one stage,
//     controller auto told SLO, the proxy's defaults otherwise (its
//     upstream client side does not retry). Nobody sends a deadline, so
//     the proxies have none to hold requests to.
//   - inprocess: sluice in every process: the clients send through
//     sluice's client side (client.Transport, its defaults: the deadline
//     and the priority carried in headers, adaptive throttling, up to
//     Attempts attempts within a 10 % retry budget, jittered back-off,
//     Retry-After honoured); each tier serves behind sluice's middleware
//     (one stage, auto told SLO, classes high and low) and calls the next
//     hop through the client side with the request's context, so the
//     deadline (what is left of the user's) and the priority travel to
//     the backend. A hop's timeout is the deadline it was given.
//
// In graph-crowd the high and low classes are two client populations,
// each with its own client-side state (a device's prefetcher and its user
// interface are different clients), and the class travels in
// X-Sluice-Class, which the tiers pass on (naive rows) and the edge
// classifies by (the sluice rows; in-process, what travels on is the
// priority the edge decided).

// The rows of the chain figures.
const (
	GraphNaive     = "naive"
	GraphBudget    = "budget"
	GraphThrottle  = "grpc-throttle"
	GraphProxy     = "proxy"
	GraphInProcess = "inprocess"
	// GraphInProcessWindow is the in-process row with the clients'
	// throttle as the SRE book has it (client.ForgetWindow): the row
	// before the accept run (graph-recover).
	GraphInProcessWindow = "inprocess-window"
)

// GraphRows are the rows of graph, in table order.
var GraphRows = []string{GraphNaive, GraphBudget, GraphThrottle, GraphProxy, GraphInProcess}

// GraphCrowdRows are the default rows of graph-crowd: the sluice rows.
var GraphCrowdRows = []string{GraphProxy, GraphInProcess}

// GraphRowLabel describes a row for tables and reports.
func GraphRowLabel(row string) string {
	return map[string]string{
		GraphNaive:           "no control, naive retries",
		GraphBudget:          "retry budgets alone (Finagle/Envoy)",
		GraphThrottle:        "grpc-go retry throttling",
		GraphProxy:           "sluice proxy at every hop, naive services",
		GraphInProcess:       "sluice in-process at every hop (middleware + client side)",
		GraphInProcessWindow: "sluice in-process at every hop, the throttle's window as the SRE book has it (throttle.forget: window)",
	}[row]
}

// GraphRetryKind returns the retry policy of a row's clients and tiers:
// Naive for the naive and proxy rows, Budget, Throttle; "" for the
// in-process row (sluice's client side).
func GraphRetryKind(row string) retry.Kind {
	switch row {
	case GraphNaive, GraphProxy:
		return retry.Naive
	case GraphBudget:
		return retry.Budget
	case GraphThrottle:
		return retry.Throttle
	}
	return ""
}

// GraphParams are the chain figures' parameters, declared once
// (DeclareGraph) for both drivers.
type GraphParams struct {
	// Crowd says which figure: graph (false) or graph-crowd (true);
	// Recover says graph-recover (graph_recover.go).
	Crowd, Recover bool
	// Workers FIFO servers with service times from Service make the
	// backend: C = Workers / mean(Service).
	Workers int
	Service dist.Dist
	// Load is the offered load, × C.
	Load float64
	// Deadline is every user request's deadline: goodput counts answers
	// within it; the client gives up then.
	Deadline time.Duration
	// SLO is the objective: every sluice stage's auto is told it, and the
	// high class's p99 is held to it in graph-crowd.
	SLO time.Duration
	// ClientTimeout, Tier1Timeout and Tier2Timeout bound each attempt of
	// the naive, budget and grpc-throttle clients and tiers.
	ClientTimeout, Tier1Timeout, Tier2Timeout time.Duration
	// Attempts is the most attempts of a call at every hop.
	Attempts int
	// Backoff is the wait before a retry of the lab's policies.
	Backoff time.Duration
	// Budget and Throttle rows.
	BudgetRatio, BudgetMinPerSecond float64
	BudgetWindow                    time.Duration
	MaxTokens, TokenRatio           float64
	// Warm is the time before the trigger (or the crowd), After the time
	// measured after it.
	Warm, After time.Duration
	// TriggerLen and TriggerFactor: the capacity is C/TriggerFactor for
	// TriggerLen (graph).
	TriggerLen    time.Duration
	TriggerFactor float64
	// HighShare, CrowdX and CrowdLen: graph-crowd's classes and crowd.
	HighShare float64
	CrowdX    float64
	CrowdLen  time.Duration
	// CrowdLoad (× C) and Gap: graph-recover's crowd, whose length is
	// CrowdLen, and the time at Load between its end and the capacity
	// drop (TriggerFactor for TriggerLen).
	CrowdLoad float64
	Gap       time.Duration
	// Arrivals is "constant" (evenly spaced) or "poisson".
	Arrivals string
	// Transport is the chain's protocol, live only (not a parameter: the
	// experiment's --transport): "" for HTTP, or "grpc", every hop a gRPC
	// service, the rows GraphGRPCRows.
	Transport string
	// Rows are the rows to run.
	Rows []string
	// Admission, Throttle, RetryBudget and PerTry take the in-process
	// row apart (the ablation of docs/experiments.md): Admission puts
	// the middleware's stage in front of every tier, Throttle and
	// RetryBudget switch the client side's adaptive throttling and retry
	// budget, and PerTry is its per-try timeout (0: none, the default).
	// They are the simulator's (`sluice-lab sim graph --set
	// admission=false`); the live experiment runs the defaults.
	Admission, Throttle, RetryBudget bool
	PerTry                           time.Duration
	// CollapseHold is how long the naive row's goodput must stay below
	// CollapseFraction of its level before after the trigger.
	CollapseHold     time.Duration
	CollapseFraction float64
}

// DeclareGraph declares the chain figures' parameters on ps (crowd:
// graph-crowd's defaults).
func DeclareGraph(ps *Params, c *GraphParams, crowd bool) {
	c.Crowd = crowd
	ps.Int(&c.Workers, "workers", 4, 1, 1000, "backend workers (FIFO servers)")
	ps.DurationDist(&c.Service, "service", "uniform:10ms,30ms", "backend service time per request (mean 20 ms: C = 200 req/s with 4 workers); a narrow distribution, so that the backend's own noise does not decide a 95 % bar over 10 s")
	ps.Float(&c.Load, "load", 0.7, 0.01, 100, "offered load, × C (graph-crowd: of both classes before the crowd)")
	ps.Duration(&c.Deadline, "deadline", time.Second, time.Millisecond, time.Hour, "every user request's deadline: goodput counts answers within it")
	ps.Duration(&c.SLO, "slo", 250*time.Millisecond, time.Millisecond, time.Hour, "the objective every sluice stage's auto is told; graph-crowd holds the high class's p99 to it")
	ps.Duration(&c.ClientTimeout, "client_timeout", 500*time.Millisecond, time.Millisecond, time.Hour, "naive, budget and grpc-throttle rows: each client attempt's timeout (the user's deadline bounds the call)")
	ps.Duration(&c.Tier1Timeout, "tier1_timeout", 400*time.Millisecond, time.Millisecond, time.Hour, "… each attempt of tier 1 to tier 2")
	ps.Duration(&c.Tier2Timeout, "tier2_timeout", 300*time.Millisecond, time.Millisecond, time.Hour, "… each attempt of tier 2 to the backend")
	ps.Int(&c.Attempts, "attempts", 3, 1, 10, "most attempts of a call, at every client and hop")
	ps.Duration(&c.Backoff, "backoff", 0, 0, time.Hour, "naive, budget and grpc-throttle rows: wait before a retry (0: at once)")
	ps.Float(&c.BudgetRatio, "budget_ratio", retry.DefaultBudgetRatio, 0.001, 1, "budget row: retries per call (Finagle's percentCanRetry)")
	ps.Float(&c.BudgetMinPerSecond, "budget_min_per_second", retry.DefaultBudgetMinPerSecond, 0, 1e6, "budget row: retries per second always allowed (Finagle's minRetriesPerSec)")
	ps.Duration(&c.BudgetWindow, "budget_window", retry.DefaultBudgetWindow, time.Millisecond, time.Hour, "budget row: how far back calls and retries count (Finagle's ttl)")
	ps.Float(&c.MaxTokens, "max_tokens", retry.DefaultMaxTokens, 0.001, 1000, "grpc-throttle row: maxTokens of retryThrottling")
	ps.Float(&c.TokenRatio, "token_ratio", retry.DefaultTokenRatio, 0.001, 1000, "grpc-throttle row: tokenRatio of retryThrottling")
	ps.Duration(&c.Warm, "warm", 20*time.Second, 2*time.Second, time.Hour, "time before the trigger (the crowd); its second half is the level before")
	if crowd {
		ps.Duration(&c.After, "after", 20*time.Second, time.Second, time.Hour, "time measured after the crowd")
		ps.Float(&c.HighShare, "high_share", 0.5, 0.01, 0.99, "the high class's share of the load before the crowd")
		ps.Float(&c.CrowdX, "crowd", 12, 1, 1000, "the low class's rate during the crowd, × its rate before (Netflix's prefetch spike: 12×)")
		ps.Duration(&c.CrowdLen, "crowd_len", 20*time.Second, time.Second, time.Hour, "length of the crowd")
		c.TriggerFactor = 1
		ps.Subset(&c.Rows, "rows", GraphCrowdRows, GraphRows, "rows to run")
	} else {
		ps.Duration(&c.After, "after", 40*time.Second, time.Second, time.Hour, "time measured after the trigger")
		ps.Duration(&c.TriggerLen, "trigger_len", 10*time.Second, time.Second, time.Hour, "length of the trigger")
		ps.Float(&c.TriggerFactor, "trigger_factor", 3, 1, 1000, "the backend's capacity during the trigger is C divided by this")
		ps.Duration(&c.CollapseHold, "collapse_hold", 30*time.Second, time.Second, time.Hour, "the naive row must stay collapsed this long after the trigger (or all of after, if shorter)")
		ps.Float(&c.CollapseFraction, "collapse_fraction", 0.2, 0.01, 1, "collapsed: goodput below this fraction of its level before")
		ps.Subset(&c.Rows, "rows", GraphRows, GraphRows, "rows to run")
	}
	ps.Bool(&c.Admission, "admission", true, "inprocess row: the middleware's stage in front of every tier (false: none, an ablation)")
	ps.Bool(&c.Throttle, "throttle", true, "inprocess row: the client side's adaptive throttling (false: off, an ablation)")
	ps.Bool(&c.RetryBudget, "retry_budget", true, "inprocess row: the client side's retry budget (false: unbounded, an ablation)")
	ps.Duration(&c.PerTry, "per_try", 0, 0, time.Hour, "inprocess row: the client side's per-try timeout (0: none, its default; an ablation: a timed-out attempt is sent again while the destination still works on it)")
	ps.Choice(&c.Arrivals, "arrivals", "constant", []string{"constant", "poisson"}, "user arrivals: evenly spaced, or Poisson (whose ±8 % per second at 140 req/s would decide a per-second 95 % bar by chance)")
}

// GraphGRPCRows are the rows a chain over gRPC has: grpc-go's own retry
// throttling (a service config, the library as it ships) and sluice
// in-process (grpcsluice's interceptors at every hop).
var GraphGRPCRows = []string{GraphThrottle, GraphInProcess}

// DefaultGraph returns the defaults of graph (crowd false) or
// graph-crowd.
func DefaultGraph(crowd bool) GraphParams {
	var c GraphParams
	name := "graph"
	if crowd {
		name = "graph-crowd"
	}
	DeclareGraph(NewParams(name), &c, crowd)
	return c
}

// Capacity returns C, req/s.
func (c GraphParams) Capacity() float64 { return float64(c.Workers) / c.Service.Mean() }

// ReducedCapacity returns the capacity during the trigger, req/s.
func (c GraphParams) ReducedCapacity() float64 { return c.Capacity() / c.TriggerFactor }

// EventStart is the trigger's (the crowd's) start; EventEnd its end; End
// the end of the load.
func (c GraphParams) EventStart() time.Duration { return c.Warm }

// EventEnd returns the end of the trigger (the crowd).
func (c GraphParams) EventEnd() time.Duration {
	if c.Crowd || c.Recover {
		return c.Warm + c.CrowdLen
	}
	return c.Warm + c.TriggerLen
}

// End returns the end of the load.
func (c GraphParams) End() time.Duration {
	if c.Recover {
		return c.DropEnd() + c.After
	}
	return c.EventEnd() + c.After
}

// Classes returns the class names of the user requests: one ("high")
// in graph, high and low in graph-crowd.
func (c GraphParams) Classes() []string {
	if c.Crowd {
		return []string{"high", "low"}
	}
	return []string{"high"}
}

// Rates returns class cl's offered rate over time, req/s from the start
// of the load.
func (c GraphParams) Rates(cl int) (dist.Schedule, error) {
	total := c.Load * c.Capacity()
	if c.Recover {
		return dist.NewSchedule(dist.Segment{Start: 0, Rate: total},
			dist.Segment{Start: c.Warm, Rate: c.CrowdLoad * c.Capacity()}, dist.Segment{Start: c.EventEnd(), Rate: total})
	}
	if !c.Crowd {
		return dist.ConstantSchedule(total)
	}
	if cl == 0 {
		return dist.ConstantSchedule(total * c.HighShare)
	}
	low := total * (1 - c.HighShare)
	return dist.NewSchedule(dist.Segment{Start: 0, Rate: low},
		dist.Segment{Start: c.Warm, Rate: low * c.CrowdX}, dist.Segment{Start: c.EventEnd(), Rate: low})
}

// ArrivalsOf returns class cl's arrival process.
func (c GraphParams) ArrivalsOf(cl int) (dist.Arrivals, error) {
	s, err := c.Rates(cl)
	if err != nil {
		return nil, err
	}
	if c.Arrivals == "poisson" {
		return dist.Poisson{Rate: s}, nil
	}
	return dist.Constant{Rate: s}, nil
}

// Retry returns the retry policy of row's clients and tiers with the
// attempt timeout of a hop (zero Kind for the in-process row).
func (c GraphParams) Retry(row string, perTry time.Duration) retry.Config {
	k := GraphRetryKind(row)
	if k == "" {
		return retry.Config{}
	}
	cfg := retry.Config{Kind: k, MaxAttempts: c.Attempts, Backoff: c.Backoff, PerTry: perTry,
		BudgetRatio: c.BudgetRatio, BudgetMinPerSecond: c.BudgetMinPerSecond, BudgetWindow: c.BudgetWindow,
		MaxTokens: c.MaxTokens, TokenRatio: c.TokenRatio}
	cfg.SetDefaults()
	return cfg
}

// SluiceClient returns the in-process row's client side, at the clients
// and at every tier: sluice's defaults (client.DefaultConfig), with the
// throttle off unless Throttle, and the retry budget unbounded (a ratio
// of 1 retry per call and 10⁹ retries per second) unless RetryBudget,
// and PerTry as its per-try timeout.
func (c GraphParams) SluiceClient() client.Config {
	cfg := client.DefaultConfig()
	cfg.Retry.PerTryTimeout = c.PerTry
	if !c.Throttle {
		off := false
		cfg.Throttle.Enabled = &off
	}
	if !c.RetryBudget {
		cfg.Retry.BudgetRatio, cfg.Retry.BudgetMinPerSecond = 1, 1e9
	}
	return cfg
}

// InProcessRow reports whether row is sluice in-process at every hop
// (inprocess, or inprocess-window).
func InProcessRow(row string) bool { return row == GraphInProcess || row == GraphInProcessWindow }

// SluiceClientOf returns row's client side: SluiceClient, with the
// throttle's window as the SRE book has it in the inprocess-window row.
func (c GraphParams) SluiceClientOf(row string) client.Config {
	cfg := c.SluiceClient()
	if row == GraphInProcessWindow {
		cfg.Throttle.Forget = client.ForgetWindow
	}
	return cfg
}

// GraphClassHeader carries a user request's class (high, low) from the
// clients through every tier: the application's own priority, which the
// naive tiers pass on and the sluice rows classify by at every hop (and,
// in-process, the edge's decision travels on as X-Sluice-Priority too).
const GraphClassHeader = "X-Sluice-Class"

// GraphStage is the name of the one stage of every sluice hop.
const GraphStage = "chain"

// GraphPolicy is the admission policy of every sluice hop, the proxies'
// and the middleware's, live and in the simulator: classes high and low
// (high by GraphClassHeader, believed from anyone: the lab's clients
// stand for the edge's own classification; the rest low), the hop in
// front trusted (127.0.0.1: every process of the chain) so that the
// priority the edge decided travels on, and one stage, auto told SLO,
// with the default wait queue.
func (c GraphParams) Policy() (policy.Config, error) {
	return hopPolicy(GraphStage, c.SLO)
}

// hopPolicy is the policy of a sluice hop in the lab's graphs: classes
// high and low, high by GraphClassHeader believed from anyone and the
// rest low, 127.0.0.1 trusted, and one stage named stage for every path,
// auto told slo and nothing else.
func hopPolicy(stage string, slo time.Duration) (policy.Config, error) {
	ac := auto.DefaultConfig()
	ac.SLO = slo
	st := policy.StageConfig{Name: stage, Match: policy.MatchConfig{PathPrefix: "/"}, Control: &ac}
	cfg := policy.Config{
		Classes: policy.ClassesConfig{Order: []string{"high", "low"}, Default: "low",
			Rules:          []policy.ClassRule{{Class: "high", Header: &policy.HeaderMatch{Name: GraphClassHeader, Value: "high", Trust: "any"}}},
			TrustedProxies: []string{"127.0.0.1"}},
		Stages: []policy.StageConfig{st},
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return policy.Config{}, err
	}
	return cfg, nil
}

// GraphUser is one user request as the client population saw it. Times
// are offsets from the start of the load.
type GraphUser struct {
	Class int
	// Sent is the intended send time; Done when the answer (or the
	// client's giving up) came.
	Sent, Done time.Duration
	// Status is the final answer's (0: none).
	Status int
}

// Good reports whether u was answered 200 within deadline.
func (u GraphUser) Good(deadline time.Duration) bool {
	return u.Status == 200 && u.Done-u.Sent <= deadline
}

// GraphCall is one call the backend received (an attempt of tier 2, or
// of the proxy in front of the backend).
type GraphCall struct {
	// Arrival and Finish are offsets from the start of the load; Finish
	// is 0 for a call still unfinished when the run ended (its work is
	// not counted).
	Arrival, Finish time.Duration
	// Demand is the work it cost the backend, seconds.
	Demand float64
	// UserDeadline is the deadline of the user request it serves (an
	// offset; 0: unknown).
	UserDeadline time.Duration
	// Gone says its caller had left when it finished (the attempt's
	// connection was closed).
	Gone bool
}

// Wasted reports whether the backend's work on the call was for nobody:
// its caller had left, or its user's deadline had passed, when it
// finished.
func (c GraphCall) Wasted() bool {
	return c.Finish > 0 && (c.Gone || (c.UserDeadline > 0 && c.Finish > c.UserDeadline))
}

// Late reports whether the call reached the backend after its user's
// deadline.
func (c GraphCall) Late() bool { return c.UserDeadline > 0 && c.Arrival > c.UserDeadline }

// GraphRun is one row's run.
type GraphRun struct {
	Row   string
	Users []GraphUser
	Calls []GraphCall
	// State is the sluice elements' state over time (GraphState; live,
	// the proxy row's only).
	State []GraphState
}

// graphMetrics are one row's figures.
type graphMetrics struct {
	before, trigger, after, recovery, collapse, minGood       float64
	amp, ampAfter, wasted, late, calls, users                 float64
	highSuccess, highP99, lowGood, highSuccessAll, lowSuccess float64
}

// bins returns per-second sums over [0, End): good answers (by class,
// by send time), sends, backend arrivals, wasted and all backend work
// (by finish time), late arrivals.
type graphBins struct {
	good       [][]float64 // [class][second]
	sent       [][]float64
	calls      []float64
	wasted     []float64
	work       []float64
	late       []float64
	goodWindow func(from time.Duration) float64
}

func (c GraphParams) bins(run *GraphRun) graphBins {
	n := int(math.Ceil(c.End().Seconds()))
	nc := len(c.Classes())
	b := graphBins{good: make([][]float64, nc), sent: make([][]float64, nc), calls: make([]float64, n),
		wasted: make([]float64, n), work: make([]float64, n), late: make([]float64, n)}
	for i := range nc {
		b.good[i], b.sent[i] = make([]float64, n), make([]float64, n)
	}
	sec := func(d time.Duration) int { return int(d / time.Second) }
	// Good answers by send time in 100 ms steps, for the recovery.
	fine := make([]float64, n*10)
	for _, u := range run.Users {
		i := sec(u.Sent)
		if i < 0 || i >= n || u.Class >= nc {
			continue
		}
		b.sent[u.Class][i]++
		if u.Good(c.Deadline) {
			b.good[u.Class][i]++
			fine[int(u.Sent/(100*time.Millisecond))]++
		}
	}
	for _, k := range run.Calls {
		if i := sec(k.Arrival); i >= 0 && i < n {
			b.calls[i]++
			if k.Late() {
				b.late[i]++
			}
		}
		if i := sec(k.Finish); k.Finish > 0 && i < n {
			b.work[i] += k.Demand
			if k.Wasted() {
				b.wasted[i] += k.Demand
			}
		}
	}
	b.goodWindow = func(from time.Duration) float64 {
		j := int(from / (100 * time.Millisecond))
		s := 0.0
		for k := j; k < j+10 && k < len(fine); k++ {
			s += fine[k]
		}
		return s
	}
	return b
}

// goodTotal returns the good answers of every class in second i.
func (b graphBins) goodTotal(i int) float64 {
	s := 0.0
	for _, g := range b.good {
		s += g[i]
	}
	return s
}

func (c GraphParams) metrics(run *GraphRun) graphMetrics {
	b := c.bins(run)
	var m graphMetrics
	sec := func(d time.Duration) int { return int(d / time.Second) }
	mean := func(from, to int) float64 {
		s := 0.0
		for i := from; i < to; i++ {
			s += b.goodTotal(i)
		}
		return s / float64(max(to-from, 1))
	}
	start, end, last := sec(c.EventStart()), sec(c.EventEnd()), sec(c.End())
	m.before = mean(start/2, start)
	m.trigger = mean(start, end)
	m.after = mean(end, last)
	// Recovery: from the end of the trigger, the first 1 s window (in
	// steps of 100 ms, by send time) whose goodput is ≥ 95 % of the
	// level before.
	m.recovery = math.Inf(1)
	for t := c.EventEnd(); t+time.Second <= c.End(); t += 100 * time.Millisecond {
		if b.goodWindow(t) >= 0.95*m.before {
			m.recovery = (t - c.EventEnd()).Seconds()
			break
		}
	}
	for i := end; i < last && b.goodTotal(i) < c.CollapseFraction*m.before; i++ {
		m.collapse++
	}
	m.minGood = math.Inf(1)
	for i := start; i < last; i++ {
		m.minGood = math.Min(m.minGood, b.goodTotal(i))
	}
	var calls, callsAfter, users, usersAfter, wasted, work, late float64
	for i := range b.calls {
		calls += b.calls[i]
		wasted += b.wasted[i]
		work += b.work[i]
		late += b.late[i]
		for cl := range b.sent {
			users += b.sent[cl][i]
			if i >= start {
				usersAfter += b.sent[cl][i]
			}
		}
		if i >= start {
			callsAfter += b.calls[i]
		}
	}
	m.calls, m.users, m.late = calls, users, late
	m.amp = ratio(calls, users)
	m.ampAfter = ratio(callsAfter, usersAfter)
	m.wasted = ratio(wasted, work)
	if c.Crowd {
		var hs, hg, ls, lg, hsAll, hgAll float64
		var lat []float64
		for _, u := range run.Users {
			in := u.Sent >= c.EventStart() && u.Sent < c.EventEnd()
			good := u.Good(c.Deadline)
			switch {
			case u.Class == 0:
				hsAll++
				if good {
					hgAll++
				}
				if in {
					hs++
					if good {
						hg++
						lat = append(lat, float64(u.Done-u.Sent))
					}
				}
			case in:
				ls++
				if good {
					lg++
				}
			}
		}
		m.highSuccess = ratio(hg, hs)
		m.highSuccessAll = ratio(hgAll, hsAll)
		m.highP99 = monitor.Percentile(lat, 0.99) / float64(time.Millisecond)
		m.lowGood = lg / c.CrowdLen.Seconds()
		m.lowSuccess = ratio(lg, ls)
	}
	return m
}

// GraphMetric returns a metric's name for a row: recovery_s_grpc_throttle.
func GraphMetric(base, row string) string {
	return base + "_" + strings.ReplaceAll(row, "-", "_")
}

// GraphResult fills res from the runs of the rows, the same way in both
// drivers: the summary's metrics (GraphMetric names), timeseries.csv
// (per second and row), rows.csv, the plot, the headline metrics and the
// expectations (GraphChecks).
func GraphResult(res *Result, c GraphParams, runs []*GraphRun) error {
	s := res.Summary
	s.Set("capacity_rps", c.Capacity())
	s.Set("load_rps", c.Load*c.Capacity())
	s.Set("deadline_ms", ms(c.Deadline))
	s.Set("slo_ms", ms(c.SLO))
	if !c.Crowd {
		s.Set("reduced_capacity_rps", c.ReducedCapacity())
	}
	if c.Recover {
		s.Set("crowd_load_rps", c.CrowdLoad*c.Capacity())
	}
	rows := report.NewTable("row", "goodput_before_rps", "goodput_trigger_rps", "goodput_after_rps", "recovery_s",
		"collapse_s", "min_goodput_rps", "amplification", "wasted_fraction", "late_calls", "backend_calls", "users",
		"high_success_fraction", "high_p99_ms", "low_goodput_rps")
	series := report.NewTable("row", "time_s", "offered_rps", "goodput_rps", "high_goodput_rps", "low_goodput_rps",
		"backend_calls_rps", "amplification", "wasted_fraction", "late_calls", "goodput_ratio")
	fig := c.figure()
	for _, run := range runs {
		m := c.metrics(run)
		b := c.bins(run)
		if c.Recover {
			c.setRecover(s, run.Row, b)
		}
		set := func(base string, v float64) { s.Set(GraphMetric(base, run.Row), v) }
		set("goodput_before_rps", m.before)
		set("goodput_trigger_rps", m.trigger)
		set("goodput_after_rps", m.after)
		set("recovery_s", m.recovery)
		set("min_goodput_rps", m.minGood)
		set("amplification", m.amp)
		set("amplification_from_trigger", m.ampAfter)
		set("wasted_fraction", m.wasted)
		set("late_calls", m.late)
		set("backend_calls", m.calls)
		set("users", m.users)
		if c.Crowd {
			set("high_success_fraction", m.highSuccess)
			set("high_success_fraction_run", m.highSuccessAll)
			set("high_p99_ms", m.highP99)
			set("low_goodput_rps", m.lowGood)
			set("low_success_fraction", m.lowSuccess)
		} else {
			set("collapse_s", m.collapse)
		}
		if err := rows.Append(run.Row, m.before, m.trigger, m.after, m.recovery, m.collapse, m.minGood, m.amp,
			m.wasted, m.late, m.calls, m.users, m.highSuccess, m.highP99, m.lowGood); err != nil {
			return err
		}
		var xs, good, calls, wasted, ratios []float64
		for i := range b.calls {
			offered, g := 0.0, b.goodTotal(i)
			for cl := range b.sent {
				offered += b.sent[cl][i]
			}
			low := math.NaN()
			if c.Crowd {
				low = b.good[1][i]
			}
			w := ratio(b.wasted[i], b.work[i])
			if err := series.Append(run.Row, float64(i), offered, g, b.good[0][i], low, b.calls[i],
				ratio(b.calls[i], offered), w, b.late[i], ratio(g, offered)); err != nil {
				return err
			}
			xs = append(xs, float64(i)+0.5)
			good, calls, wasted = append(good, g), append(calls, b.calls[i]), append(wasted, w)
			ratios = append(ratios, ratio(g, offered))
		}
		fig.Panels[0].Series = append(fig.Panels[0].Series, report.Series{Label: run.Row, X: xs, Y: good})
		switch {
		case c.Recover:
			fig.Panels[1].Series = append(fig.Panels[1].Series, report.Series{Label: run.Row, X: xs, Y: ratios})
			fig.Panels[2].Series = append(fig.Panels[2].Series, report.Series{Label: run.Row, X: xs, Y: calls})
		case c.Crowd:
			fig.Panels[1].Series = append(fig.Panels[1].Series, report.Series{Label: run.Row, X: xs, Y: b.good[0]})
			fig.Panels[2].Series = append(fig.Panels[2].Series, report.Series{Label: run.Row, X: xs, Y: b.good[1]})
		default:
			fig.Panels[1].Series = append(fig.Panels[1].Series, report.Series{Label: run.Row, X: xs, Y: calls})
			fig.Panels[2].Series = append(fig.Panels[2].Series, report.Series{Label: run.Row, X: xs, Y: wasted})
		}
	}
	res.AddTable("rows.csv", rows)
	res.AddTable("timeseries.csv", series)
	if slices.ContainsFunc(runs, func(r *GraphRun) bool { return r.State != nil }) {
		st, err := stateTable(runs)
		if err != nil {
			return err
		}
		res.AddTable("state.csv", st)
	}
	res.AddFigure("chain.png", fig)
	res.Checks = GraphChecks(s, c)
	for _, row := range c.Rows {
		switch {
		case c.Recover:
			res.Key = append(res.Key, GraphMetric("after_crowd_min_ratio", row), GraphMetric("after_drop_min_ratio", row),
				GraphMetric("after_crowd_short_s", row), GraphMetric("after_drop_short_s", row))
		case c.Crowd:
			res.Key = append(res.Key, GraphMetric("high_success_fraction", row), GraphMetric("high_p99_ms", row), GraphMetric("low_goodput_rps", row))
		default:
			res.Key = append(res.Key, GraphMetric("goodput_trigger_rps", row), GraphMetric("recovery_s", row), GraphMetric("amplification", row), GraphMetric("wasted_fraction", row))
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// figure returns the plot's panels, without series.
func (c GraphParams) figure() *report.Figure {
	if c.Recover {
		return c.recoverFigure()
	}
	ev := []report.RefLine{{Value: c.EventStart().Seconds()}, {Value: c.EventEnd().Seconds()}}
	if c.Crowd {
		high := c.Load * c.Capacity() * c.HighShare
		return &report.Figure{PanelHeight: 3, Panels: []report.Panel{
			{Title: fmt.Sprintf("graph-crowd: a %g× crowd of the low class from %gs to %gs", c.CrowdX, c.EventStart().Seconds(), c.EventEnd().Seconds()),
				XLabel: "time (s, by send time)", YLabel: fmt.Sprintf("answers within %v / s", c.Deadline), YMin: 0, VLines: ev,
				HLines: []report.RefLine{{Value: c.Capacity(), Label: "capacity"}}},
			{XLabel: "time (s)", YLabel: "high class answered / s", YMin: 0, VLines: ev, HLines: []report.RefLine{{Value: high, Label: "high offered"}}},
			{XLabel: "time (s)", YLabel: "low class answered / s", YMin: 0, VLines: ev},
		}}
	}
	return &report.Figure{PanelHeight: 3, Panels: []report.Panel{
		{Title: fmt.Sprintf("graph: capacity ÷ %g from %gs to %gs", c.TriggerFactor, c.EventStart().Seconds(), c.EventEnd().Seconds()),
			XLabel: "time (s, by send time)", YLabel: fmt.Sprintf("answers within %v / s", c.Deadline), YMin: 0, VLines: ev,
			HLines: []report.RefLine{{Value: c.ReducedCapacity(), Label: "reduced capacity"}, {Value: c.Load * c.Capacity(), Label: "offered"}}},
		{XLabel: "time (s)", YLabel: "backend calls / s", YMin: 1, LogY: true, VLines: ev,
			HLines: []report.RefLine{{Value: c.Capacity(), Label: "capacity"}}},
		{XLabel: "time (s, by finish)", YLabel: "backend work wasted (fraction)", YMin: 0, VLines: ev},
	}}
}
