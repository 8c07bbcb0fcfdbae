// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/tune"
)

// The search for the peers' best on graph-hotel: a row's score, and the
// objective lab/tune maximizes (lab/cmd/hoteltune runs it).

// hotelScoreMetrics are the metrics of a row reported beside its score.
var hotelScoreMetrics = []string{"storm_goodput_rps", "goodput_event_rps", "goodput_after_rps", "recovery_start_s",
	"recovery_end_s", "p99_ms", "wasted_leaf_fraction", "high_success_fraction", "light_goodput_event_rps",
	"heavy_goodput_event_rps", "late_calls"}

// HotelScore is the score of a row in scenario scn of a result: its
// storm goodput (answers within the SLO per second over the event and
// the 10 s after it), in the crowd times the high class's share
// answered within its deadline during the crowd (the figure's goal for
// that class: a row that lets the crowd take its place scores that much
// less), as the chain's search scores.
func HotelScore(res *figure.Result, scn, row string) (float64, error) {
	s, ok := res.Summary.Get(figure.HotelMetric("storm_goodput_rps", scn, row))
	if !ok || math.IsNaN(s) {
		return 0, fmt.Errorf("%s, %s: no storm goodput", scn, row)
	}
	if scn != figure.HotelCrowd {
		return s, nil
	}
	hs, ok := res.Summary.Get(figure.HotelMetric("high_success_fraction", scn, row))
	if !ok || math.IsNaN(hs) {
		return 0, fmt.Errorf("%s, %s: no high_success_fraction", scn, row)
	}
	return s * hs, nil
}

// HotelRowScore runs a row of scenario scn with each seed (point: a
// peer's, nil for the row's own) and returns its mean score and the
// mean of its metrics.
func HotelRowScore(c figure.HotelParams, g *figure.HotelGraph, scn, row string, point tune.Point, seeds []uint64) (float64, map[string]float64, error) {
	c.Scenarios, c.Rows = []string{scn}, []string{row}
	return meanOverSeeds(seeds, func(seed uint64) (float64, map[string]float64, error) {
		run, err := RunHotel(seed, c, g, scn, row, point)
		if err != nil {
			return 0, nil, err
		}
		res := figure.NewResult("graph-hotel", figure.Sim, seed)
		if err := figure.HotelResult(res, c, g, []*figure.HotelRun{run}); err != nil {
			return 0, nil, err
		}
		sc, err := HotelScore(res, scn, row)
		if err != nil {
			return 0, nil, err
		}
		m := make(map[string]float64)
		for _, k := range hotelScoreMetrics {
			if v, ok := res.Summary.Get(figure.HotelMetric(k, scn, row)); ok && !math.IsNaN(v) {
				m[k] = v
			}
		}
		return sc, m, nil
	})
}

// HotelPeerObjective is the search's objective for a peer in scenario
// scn: HotelRowScore at the point.
func HotelPeerObjective(c figure.HotelParams, g *figure.HotelGraph, scn, peer string, seeds []uint64) tune.Objective {
	return func(p tune.Point) (float64, map[string]float64, error) {
		return HotelRowScore(c, g, scn, peer, p, seeds)
	}
}
