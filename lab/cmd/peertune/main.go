// SPDX-License-Identifier: Apache-2.0

// Command peertune tunes the research's peers (Breakwater, DAGOR,
// Rajomon, TopFull; package lab/peers) on the chain of the graph figures
// in virtual time, and compares each at its best with sluice's in-process
// row on the same chain: for each scenario (graph: the backend's capacity
// divided by 3 for 10 s; graph-crowd: a 12× crowd of the low class) and
// each peer, a grid over the peer's main parameters then a pattern
// search around its best (package lab/tune), scored by the answers
// within the deadline per second over the event and the 10 s after it,
// in graph-crowd times the high class's success during the crowd
// (simulated.StormScore), averaged over the seeds.
//
//	go run ./cmd/peertune -out /tmp/peertune
//
// It writes, under -out, one search table per scenario and peer
// (<scenario>-<peer>.csv, best first) and best.csv (the best of each
// peer, sluice, and the peers at their defaults), and prints best.csv.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/lab/figure/simulated"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/tune"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "peertune:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("peertune", flag.ContinueOnError)
	out := fs.String("out", "", "directory for the tables (required)")
	scenarios := fs.String("scenarios", "graph,graph-crowd", "scenarios, comma-separated: graph, graph-crowd")
	peerList := fs.String("peers", "breakwater,dagor,rajomon,topfull", "peers to tune, comma-separated")
	nseeds := fs.Int("seeds", 2, "seeds per point (1…n)")
	refine := fs.Int("refine", 12, "pattern-search passes after the grid")
	parallel := fs.Int("parallel", 2, "points evaluated at once")
	after := fs.String("after", "15s", "time measured after the event (the figures' after)")
	extra := fs.String("set", "", "more chain parameters, comma-separated (warm=10s,load=0.8), as sluice-lab sim --set")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *nseeds < 1 {
		fs.Usage()
		return fmt.Errorf("-out is required and -seeds must be ≥ 1")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	seeds := make([]uint64, *nseeds)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	metrics := []string{"goodput_before_rps", "goodput_trigger_rps", "goodput_after_rps", "recovery_s", "wasted_fraction",
		"high_success_fraction", "low_goodput_rps"}
	best := report.NewTable(append([]string{"scenario", "row", "params", "score", "storm_goodput_rps"}, metrics...)...)
	add := func(scn, row, params string, score float64, m map[string]float64) error {
		vals := []any{scn, row, params, score, m["storm_goodput_rps"]}
		for _, k := range metrics {
			v, ok := m[k]
			if !ok {
				vals = append(vals, "")
				continue
			}
			vals = append(vals, v)
		}
		return best.Append(vals...)
	}
	for _, scn := range strings.Split(*scenarios, ",") {
		crowd := scn == "graph-crowd"
		if !crowd && scn != "graph" {
			return fmt.Errorf("unknown scenario %q", scn)
		}
		sets := []string{"after=" + *after}
		if *extra != "" {
			sets = append(sets, strings.Split(*extra, ",")...)
		}
		c, err := simulated.ChainParams(crowd, sets)
		if err != nil {
			return err
		}
		score, m, err := simulated.SluiceResult(crowd, sets, seeds)
		if err != nil {
			return err
		}
		if err := add(scn, "sluice (inprocess)", "auto, slo="+c.SLO.String(), score, m); err != nil {
			return err
		}
		names := []string{"none"}
		if *peerList != "" {
			names = append(names, strings.Split(*peerList, ",")...)
		}
		for _, name := range names {
			space, err := simulated.PeerSpace(name)
			if err != nil {
				return err
			}
			if space == nil {
				score, m, err := simulated.PeerResult(name, c, nil, seeds)
				if err != nil {
					return err
				}
				if err := add(scn, name, "", score, m); err != nil {
					return err
				}
				continue
			}
			score, m, err := simulated.PeerResult(name, c, tune.Point{}, seeds)
			if err != nil {
				return err
			}
			if err := add(scn, name+" (defaults)", "paper defaults", score, m); err != nil {
				return err
			}
			r, err := tune.Search(space, simulated.PeerObjective(name, c, seeds), tune.Options{Refine: *refine, Parallel: *parallel})
			if err != nil {
				return fmt.Errorf("%s on %s: %w", name, scn, err)
			}
			tab, err := r.Table()
			if err != nil {
				return err
			}
			if err := tab.WriteFile(filepath.Join(*out, scn+"-"+name+".csv")); err != nil {
				return err
			}
			if err := add(scn, name+" (tuned)", pointText(r.Best.Point), r.Best.Score, r.Best.Metrics); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%s %s: %d points, best %.2f at %s\n", scn, name, len(r.Evals), r.Best.Score, pointText(r.Best.Point))
		}
	}
	if err := best.WriteFile(filepath.Join(*out, "best.csv")); err != nil {
		return err
	}
	return best.WriteCSV(os.Stdout)
}

func pointText(p tune.Point) string {
	ks := make([]string, 0, len(p))
	for k := range p {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, report.FormatFloat(p[k]))
	}
	return b.String()
}
