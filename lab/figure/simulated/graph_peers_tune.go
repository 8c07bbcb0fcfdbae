// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/lab/peers/breakwater"
	"github.com/sluicehq/sluice/lab/peers/dagor"
	"github.com/sluicehq/sluice/lab/peers/rajomon"
	"github.com/sluicehq/sluice/lab/peers/topfull"
	"github.com/sluicehq/sluice/lab/tune"
)

// The peers' rows of the chain, tuned: each peer's main parameters, the
// grid a search starts from, how a point becomes the peer, and the score.

// PeerNames are the peers that RunGraphPeer can run by name ("none" is
// the chain without control).
var PeerNames = []string{"none", "breakwater", "dagor", "rajomon", "topfull"}

// StormSettle is how long after the event the storm score keeps
// counting: the recovery is part of it.
const StormSettle = 10 * time.Second

// PeerSpace returns the main parameters of a peer on the chain and their
// grid (none for "none"). Durations are in milliseconds, and their
// refinement is multiplicative and may go 4× beyond the grid.
func PeerSpace(name string) ([]tune.Dim, error) {
	ms := func(n string, v ...float64) tune.Dim {
		return tune.Dim{Name: n, Values: v, Log: true, Min: v[0] / 4, Max: v[len(v)-1] * 4}
	}
	switch name {
	case "none":
		return nil, nil
	case "breakwater":
		// Target delay (the AQM at twice it, as in the paper), the
		// decrease β, the client's queue expiry and the RTT.
		return []tune.Dim{ms("target_delay_ms", 1, 2, 5, 10, 20, 50, 100),
			{Name: "md", Values: []float64{0.02, 0.1, 0.5}, Log: true, Min: 0.005, Max: 1},
			ms("client_delay_ms", 10, 100, 500), ms("rtt_ms", 2, 10)}, nil
	case "dagor":
		// The overload threshold, the window, α and β.
		return []tune.Dim{ms("queue_threshold_ms", 1, 2, 5, 10, 20, 50), ms("window_ms", 100, 250, 1000),
			{Name: "alpha", Values: []float64{0.05, 0.1, 0.25}, Log: true, Min: 0.01, Max: 0.9},
			{Name: "beta", Values: []float64{0.01, 0.05, 0.1}, Log: true, Min: 0.001, Max: 1}}, nil
	case "rajomon":
		// The latency threshold, the price update's period, the price
		// step, the end users' token budget (one token every
		// token_interval) and the price strategy (0 step, 1
		// proportional).
		return []tune.Dim{ms("latency_threshold_ms", 1, 2, 5, 10, 20, 50), ms("price_update_ms", 2, 10, 50),
			{Name: "price_step", Values: []float64{1, 5}, Log: true, Int: true, Min: 1, Max: 200},
			ms("token_interval_ms", 10, 30, 100, 300),
			{Name: "proportional", Values: []float64{0, 1}, Int: true}}, nil
	case "topfull":
		// The SLO on the p95, the overload threshold, the steps and the
		// controller's interval.
		return []tune.Dim{ms("slo_ms", 50, 100, 200, 400, 800),
			{Name: "alpha", Values: []float64{0.5, 0.7, 0.8, 0.9}, Min: 0.3, Max: 0.99},
			{Name: "decrease", Values: []float64{0.05, 0.1, 0.2}, Log: true, Min: 0.01, Max: 0.5},
			{Name: "increase", Values: []float64{0.01, 0.05}, Log: true, Min: 0.001, Max: 0.5},
			ms("interval_ms", 500, 1000)}, nil
	}
	return nil, fmt.Errorf("unknown peer %q (known: %v)", name, PeerNames)
}

// NewChainPeer builds the named peer for the chain c from a point of its
// space (a parameter the point lacks keeps its default); "none" is nil.
// The deployment facts are the chain's, not tuned: Breakwater's cores
// and initial credits are the backend's workers, DAGOR's and TopFull's
// business priorities rank the classes (high above low), TopFull's paths
// are the chain's.
func NewChainPeer(name string, c figure.GraphParams, p tune.Point) (peers.Peer, error) {
	switch name {
	case "none":
		return nil, nil
	case "breakwater":
		cfg := breakwater.DefaultConfig()
		cfg.Cores, cfg.InitialCredits = c.Workers, c.Workers
		figure.PointBreakwater(&cfg, p)
		return &breakwater.Peer{Config: cfg}, cfg.Validate()
	case "dagor":
		cfg := dagor.DefaultConfig()
		cfg.Business = make(map[string]int)
		for i, cl := range c.Classes() {
			cfg.Business[PeerAPI(cl)] = i + 1
		}
		figure.PointDAGOR(&cfg, p)
		return &dagor.Peer{Config: cfg}, cfg.Validate()
	case "rajomon":
		cfg := rajomon.DefaultConfig()
		figure.PointRajomon(&cfg, p)
		return &rajomon.Peer{Config: cfg}, cfg.Validate()
	case "topfull":
		cfg := topfull.DefaultConfig()
		cfg.Paths = PeerPaths(c)
		cfg.Business = make(map[string]int)
		for i, cl := range c.Classes() {
			cfg.Business[PeerAPI(cl)] = len(c.Classes()) - i // higher is more important
		}
		figure.PointTopFull(&cfg, p)
		return &topfull.Peer{Config: cfg}, cfg.Validate()
	}
	return nil, fmt.Errorf("unknown peer %q (known: %v)", name, PeerNames)
}

// StormGoodput is the score of a row in a chain result: its answers
// within the deadline per second (by send time, timeseries.csv's
// goodput_rps) over the event (the trigger, or the crowd) and the
// StormSettle after it.
func StormGoodput(res *figure.Result, c figure.GraphParams, row string) (float64, error) {
	t := res.Table("timeseries.csv")
	if t == nil {
		return 0, fmt.Errorf("no timeseries.csv")
	}
	from, to := c.EventStart().Seconds(), (c.EventEnd() + StormSettle).Seconds()
	sum, n := 0.0, 0
	for i := range t.Len() {
		r, _ := t.Cell(i, "row")
		if r != row {
			continue
		}
		ts, _ := t.Cell(i, "time_s")
		g, _ := t.Cell(i, "goodput_rps")
		sec, err1 := strconv.ParseFloat(ts, 64)
		good, err2 := strconv.ParseFloat(g, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("timeseries.csv row %d: %q, %q", i, ts, g)
		}
		if sec >= from && sec < to {
			sum += good
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("row %s has no seconds in [%g, %g)", row, from, to)
	}
	return sum / float64(n), nil
}

// StormScore is the score a search maximizes: StormGoodput, and in
// graph-crowd that times the high class's success fraction during the
// crowd (the figure's first goal is that class: a row that lets the
// crowd take its place scores that much less).
func StormScore(res *figure.Result, c figure.GraphParams, row string) (float64, error) {
	s, err := StormGoodput(res, c, row)
	if err != nil || !c.Crowd {
		return s, err
	}
	hs, ok := res.Summary.Get(figure.GraphMetric("high_success_fraction", row))
	if !ok || math.IsNaN(hs) {
		return 0, fmt.Errorf("row %s has no high_success_fraction", row)
	}
	return s * hs, nil
}

// chainMetrics are the metrics of a row reported beside its score.
var chainMetrics = []string{"goodput_before_rps", "goodput_trigger_rps", "goodput_after_rps", "recovery_s",
	"wasted_fraction", "high_success_fraction", "low_goodput_rps"}

// PeerResult runs a peer's row (built from point p) with each seed and
// returns the mean score (StormScore) and the mean of its metrics.
func PeerResult(name string, c figure.GraphParams, p tune.Point, seeds []uint64) (float64, map[string]float64, error) {
	return meanOverSeeds(seeds, func(seed uint64) (float64, map[string]float64, error) {
		peer, err := NewChainPeer(name, c, p)
		if err != nil {
			return 0, nil, err
		}
		run, err := RunGraphPeer(seed, c, peer, GraphPeerOptions{})
		if err != nil {
			return 0, nil, err
		}
		res := figure.NewResult("graph-peers", figure.Sim, seed)
		if err := figure.GraphResult(res, c, []*figure.GraphRun{run}); err != nil {
			return 0, nil, err
		}
		return stormResult(res, c, run.Row)
	})
}

// stormResult returns a row's storm score in a chain result (StormScore),
// its metrics and its storm goodput (StormGoodput).
func stormResult(res *figure.Result, c figure.GraphParams, row string) (float64, map[string]float64, error) {
	s, err := StormScore(res, c, row)
	if err != nil {
		return 0, nil, err
	}
	m := make(map[string]float64)
	for _, k := range chainMetrics {
		if v, ok := res.Summary.Get(figure.GraphMetric(k, row)); ok && !math.IsNaN(v) {
			m[k] = v
		}
	}
	m[tune.StormMetric], _ = StormGoodput(res, c, row)
	return s, m, nil
}

// meanOverSeeds calls one with each seed and returns the mean of the
// scores and of each metric (a metric a seed lacks counts as 0 there).
func meanOverSeeds(seeds []uint64, one func(seed uint64) (float64, map[string]float64, error)) (float64, map[string]float64, error) {
	var score float64
	m := make(map[string]float64)
	for _, seed := range seeds {
		s, sm, err := one(seed)
		if err != nil {
			return 0, nil, err
		}
		score += s / float64(len(seeds))
		for k, v := range sm {
			m[k] += v / float64(len(seeds))
		}
	}
	return score, m, nil
}

// PeerObjective is the search's objective for a peer on the chain c: the
// storm score, the mean over seeds.
func PeerObjective(name string, c figure.GraphParams, seeds []uint64) tune.Objective {
	return func(p tune.Point) (float64, map[string]float64, error) { return PeerResult(name, c, p, seeds) }
}

// ChainParams returns the chain's parameters, graph's (crowd false) or
// graph-crowd's, with the --set overrides sets ("after=15s").
func ChainParams(crowd bool, sets []string) (figure.GraphParams, error) {
	name := "graph"
	if crowd {
		name = "graph-crowd"
	}
	var c figure.GraphParams
	ps := figure.NewParams(name)
	figure.DeclareGraph(ps, &c, crowd)
	if err := ps.Err(); err != nil {
		return c, err
	}
	return c, ps.SetAll(sets)
}

// SluiceResult runs sluice's in-process row of the chain (graph, or
// graph-crowd, with the --set overrides sets, as ChainParams) with each
// seed and returns its mean storm score and metrics, from the same
// records and the same code as the peers'.
func SluiceResult(crowd bool, sets []string, seeds []uint64) (float64, map[string]float64, error) {
	c, err := ChainParams(crowd, sets)
	if err != nil {
		return 0, nil, err
	}
	name := "graph"
	if crowd {
		name = "graph-crowd"
	}
	return meanOverSeeds(seeds, func(seed uint64) (float64, map[string]float64, error) {
		pr, err := Prepare(name)
		if err != nil {
			return 0, nil, err
		}
		if err := pr.Set(append(append([]string{}, sets...), "rows="+figure.GraphInProcess)...); err != nil {
			return 0, nil, err
		}
		res, err := pr.Run(seed)
		if err != nil {
			return 0, nil, err
		}
		return stormResult(res, c, figure.GraphInProcess)
	})
}
