// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/lab/peers/breakwater"
	"github.com/sluicehq/sluice/lab/peers/dagor"
	"github.com/sluicehq/sluice/lab/peers/rajomon"
	"github.com/sluicehq/sluice/lab/peers/topfull"
	"github.com/sluicehq/sluice/lab/tune"
)

// The research peers' rows of graph-hotel: each peer's main parameters
// and the grid a search starts from (HotelPeerSpace), how a point
// becomes the peer's configuration with the graph's deployment facts
// (HotelPeerConfig), and the best point the search found per scenario
// (HotelTuned, hotel_tuned.go), which both drivers run.

// HotelPeerSpace returns a peer's main parameters and their grid.
// Durations are in milliseconds, refined multiplicatively up to 4×
// beyond the grid. The parameters are the ones the chain's search tunes
// (docs/algorithms.md, peer tuning), on grids for this graph's service
// times (0.3–16 ms a call, an SLO of 250 ms).
func HotelPeerSpace(name string) ([]tune.Dim, error) {
	ms := func(n string, v ...float64) tune.Dim {
		return tune.Dim{Name: n, Values: v, Log: true, Min: v[0] / 4, Max: v[len(v)-1] * 4}
	}
	switch name {
	case "breakwater":
		return []tune.Dim{ms("target_delay_ms", 1, 3, 10, 30, 100),
			{Name: "md", Values: []float64{0.02, 0.1, 0.5}, Log: true, Min: 0.005, Max: 1},
			ms("client_delay_ms", 10, 100, 500), ms("rtt_ms", 2, 10)}, nil
	case "dagor":
		return []tune.Dim{ms("queue_threshold_ms", 1, 3, 10, 30), ms("window_ms", 100, 250, 1000),
			{Name: "alpha", Values: []float64{0.05, 0.15, 0.4}, Log: true, Min: 0.01, Max: 0.9},
			{Name: "beta", Values: []float64{0.01, 0.05, 0.2}, Log: true, Min: 0.001, Max: 1}}, nil
	case "rajomon":
		return []tune.Dim{ms("latency_threshold_ms", 1, 3, 10, 30), ms("price_update_ms", 2, 10, 50),
			{Name: "price_step", Values: []float64{1, 5}, Log: true, Int: true, Min: 1, Max: 200},
			ms("token_interval_ms", 3, 10, 30, 100),
			{Name: "proportional", Values: []float64{0, 1}, Int: true}}, nil
	case "topfull":
		return []tune.Dim{ms("slo_ms", 50, 100, 250, 500),
			{Name: "alpha", Values: []float64{0.5, 0.7, 0.9}, Min: 0.3, Max: 0.99},
			{Name: "decrease", Values: []float64{0.05, 0.2, 0.5}, Log: true, Min: 0.01, Max: 0.9},
			{Name: "increase", Values: []float64{0.01, 0.05, 0.25}, Log: true, Min: 0.001, Max: 0.9},
			ms("interval_ms", 250, 1000)}, nil
	}
	return nil, fmt.Errorf("unknown peer %q (known: %s)", name, strings.Join(HotelPeers, ", "))
}

// HotelPeerConfig returns the named peer's configuration for graph g
// from a point of its space (a parameter the point lacks keeps the
// paper's value): a *breakwater.Config, *dagor.Config, *rajomon.Config
// or *topfull.Config. The graph's deployment facts are set, not tuned:
// Breakwater's cores and initial credits are a service's workers (the
// largest, if they differ), DAGOR's and TopFull's business priorities
// put the high class's APIs above the low class's, TopFull's paths are
// the APIs' services, Rajomon's call map each API's calls.
func HotelPeerConfig(name string, g *HotelGraph, p tune.Point) (any, error) {
	entry := func(api int) string { return g.Method(api, g.Entry) }
	switch name {
	case "breakwater":
		cfg := breakwater.DefaultConfig()
		for _, s := range g.Services {
			cfg.Cores = max(cfg.Cores, s.Workers)
		}
		cfg.InitialCredits = cfg.Cores
		PointBreakwater(&cfg, p)
		return &cfg, cfg.Validate()
	case "dagor":
		cfg := dagor.DefaultConfig()
		cfg.Business = make(map[string]int)
		for i, a := range g.APIs {
			cfg.Business[entry(i)] = 1
			if a.Low {
				cfg.Business[entry(i)] = 2
			}
		}
		PointDAGOR(&cfg, p)
		return &cfg, cfg.Validate()
	case "rajomon":
		cfg := rajomon.DefaultConfig()
		cfg.CallMap = make(map[string][]string)
		for i, a := range g.APIs {
			var walk func(st HotelStep)
			walk = func(st HotelStep) {
				m := g.Method(i, st.Service)
				for _, c := range st.Calls {
					cfg.CallMap[m] = append(cfg.CallMap[m], g.Method(i, c.Service))
					walk(c)
				}
			}
			walk(a.Root)
		}
		PointRajomon(&cfg, p)
		return &cfg, cfg.Validate()
	case "topfull":
		cfg := topfull.DefaultConfig()
		cfg.Paths = make(map[string][]string)
		cfg.Business = make(map[string]int)
		for i, path := range g.Paths() {
			for _, s := range path {
				cfg.Paths[entry(i)] = append(cfg.Paths[entry(i)], g.Services[s].Name)
			}
			cfg.Business[entry(i)] = 2 // higher is more important
			if g.APIs[i].Low {
				cfg.Business[entry(i)] = 1
			}
		}
		PointTopFull(&cfg, p)
		return &cfg, cfg.Validate()
	}
	return nil, fmt.Errorf("unknown peer %q (known: %s)", name, strings.Join(HotelPeers, ", "))
}

// PeerPoint returns the point a peer's row runs with in scenario scn:
// the search's best (HotelTuned) with peer_params=tuned, else the
// paper's values (an empty point). ok is false when tuned values were
// asked for and the search has none for the pair: the row then runs the
// paper's values, and says so in its params.
func (c HotelParams) PeerPoint(scn, peer string) (p tune.Point, ok bool) {
	if c.PeerParams != "tuned" {
		return tune.Point{}, true
	}
	p, ok = HotelTuned[scn][peer]
	if !ok {
		return tune.Point{}, false
	}
	return p, true
}

// HotelRowParams describes a row's parameters for rows.csv: a peer's
// point, "paper's values", or sluice's objective.
func (c HotelParams) HotelRowParams(scn, row string) string {
	switch row {
	case HotelNone:
		return ""
	case HotelSluice:
		if c.Policy != HotelBuiltinPolicy {
			return "policy " + c.Policy
		}
		return "auto, slo=" + c.SLO.String()
	}
	p, ok := c.PeerPoint(scn, row)
	switch {
	case len(p) > 0:
		return p.String()
	case ok:
		return "paper's values"
	}
	return "paper's values (no tuned point)"
}
