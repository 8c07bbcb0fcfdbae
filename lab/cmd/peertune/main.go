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
	"strings"

	"github.com/sluicehq/sluice/lab/figure/simulated"
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
	var b tune.Bench
	b.Flags(fs, 12, "more chain parameters, comma-separated (warm=10s,load=0.8), as sluice-lab sim --set")
	scenarios := fs.String("scenarios", "graph,graph-crowd", "scenarios, comma-separated: graph, graph-crowd")
	peerList := fs.String("peers", "breakwater,dagor,rajomon,topfull", "peers to tune, comma-separated")
	after := fs.String("after", "15s", "time measured after the event (the figures' after)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := b.Start(fs, []string{"goodput_before_rps", "goodput_trigger_rps", "goodput_after_rps", "recovery_s",
		"wasted_fraction", "high_success_fraction", "low_goodput_rps"}); err != nil {
		return err
	}
	for _, scn := range strings.Split(*scenarios, ",") {
		crowd := scn == "graph-crowd"
		if !crowd && scn != "graph" {
			return fmt.Errorf("unknown scenario %q", scn)
		}
		sets := append([]string{"after=" + *after}, b.Set...)
		c, err := simulated.ChainParams(crowd, sets)
		if err != nil {
			return err
		}
		score, m, err := simulated.SluiceResult(crowd, sets, b.Seeds)
		if err != nil {
			return err
		}
		if err := b.Add(scn, "sluice (inprocess)", "auto, slo="+c.SLO.String(), score, m); err != nil {
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
				score, m, err := simulated.PeerResult(name, c, nil, b.Seeds)
				if err != nil {
					return err
				}
				if err := b.Add(scn, name, "", score, m); err != nil {
					return err
				}
				continue
			}
			score, m, err := simulated.PeerResult(name, c, tune.Point{}, b.Seeds)
			if err != nil {
				return err
			}
			if err := b.Add(scn, name+" (defaults)", "paper defaults", score, m); err != nil {
				return err
			}
			if _, err := b.Tune(scn, name, space, simulated.PeerObjective(name, c, b.Seeds)); err != nil {
				return err
			}
		}
	}
	return b.Finish(os.Stdout)
}
