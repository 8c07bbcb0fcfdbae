// SPDX-License-Identifier: Apache-2.0

// Command hoteltune tunes the research's peers (Breakwater, DAGOR,
// Rajomon, TopFull; package lab/peers) on graph-hotel in virtual time,
// scenario by scenario, and compares each at its best with sluice's row
// and the graph without control: for each scenario and peer, a grid over
// the peer's main parameters (figure.HotelPeerSpace), then a pattern
// search around its best (package lab/tune), scored by the answers
// within the SLO per second over the event and the 10 s after it, in
// the crowd times the high class's success during it
// (simulated.HotelScore), averaged over the seeds.
//
//	go run ./cmd/hoteltune -out /tmp/hoteltune -emit figure/hotel_tuned.go
//
// It writes, under -out, one search table per scenario and peer
// (<scenario>-<peer>.csv, best first) and best.csv (the best of each
// peer, sluice, none and the peers at their papers' values), prints
// best.csv, and with -emit writes the best points as figure.HotelTuned's
// Go source, which both drivers of graph-hotel then run.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/figure/simulated"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/tune"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hoteltune:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("hoteltune", flag.ContinueOnError)
	var b tune.Bench
	b.Flags(fs, 8, "more graph-hotel parameters, comma-separated (after=10s), as sluice-lab sim --set")
	scenarios := fs.String("scenarios", strings.Join(figure.HotelScenarios, ","), "scenarios, comma-separated")
	peerList := fs.String("peers", strings.Join(figure.HotelPeers, ","), "peers to tune, comma-separated")
	emit := fs.String("emit", "", "write the best points as figure.HotelTuned's Go source to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := b.Start(fs, []string{"goodput_event_rps", "goodput_after_rps", "recovery_start_s", "recovery_end_s", "p99_ms",
		"high_success_fraction", "light_goodput_event_rps", "heavy_goodput_event_rps", "wasted_leaf_fraction"}); err != nil {
		return err
	}
	var c figure.HotelParams
	ps := figure.NewParams("graph-hotel")
	figure.DeclareHotel(ps, &c)
	if b.Set != nil {
		if err := ps.SetAll(b.Set); err != nil {
			return err
		}
	}
	g, err := c.Graph()
	if err != nil {
		return err
	}
	var names []string
	if *peerList != "" {
		names = strings.Split(*peerList, ",")
	}
	for _, n := range names {
		if _, err := figure.HotelPeerSpace(n); err != nil {
			return err
		}
	}
	tuned := map[string]map[string]tune.Point{}
	for _, scn := range strings.Split(*scenarios, ",") {
		if !slices.Contains(figure.HotelScenarios, scn) {
			return fmt.Errorf("unknown scenario %q (valid: %s)", scn, strings.Join(figure.HotelScenarios, ", "))
		}
		for _, row := range []string{figure.HotelSluice, figure.HotelNone} {
			score, m, err := simulated.HotelRowScore(c, g, scn, row, nil, b.Seeds)
			if err != nil {
				return err
			}
			if err := b.Add(scn, row, c.HotelRowParams(scn, row), score, m); err != nil {
				return err
			}
		}
		for _, name := range names {
			space, _ := figure.HotelPeerSpace(name)
			score, m, err := simulated.HotelRowScore(c, g, scn, name, tune.Point{}, b.Seeds)
			if err != nil {
				return err
			}
			if err := b.Add(scn, name+" (paper)", "paper's values", score, m); err != nil {
				return err
			}
			best, err := b.Tune(scn, name, space, simulated.HotelPeerObjective(c, g, scn, name, b.Seeds))
			if err != nil {
				return err
			}
			if tuned[scn] == nil {
				tuned[scn] = map[string]tune.Point{}
			}
			tuned[scn][name] = best
		}
	}
	if err := b.Finish(os.Stdout); err != nil || *emit == "" {
		return err
	}
	src, err := goSource(tuned, len(b.Seeds), b.Options.Refine)
	if err != nil {
		return err
	}
	return os.WriteFile(*emit, src, 0o644)
}

// goSource returns figure.HotelTuned's file for the best points.
func goSource(tuned map[string]map[string]tune.Point, seeds, refine int) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("package figure\n\nimport \"github.com/sluicehq/sluice/lab/tune\"\n\n")
	b.WriteString("// HotelTuned is the best point the search found for each peer in each\n")
	b.WriteString("// scenario of graph-hotel (the hotel graph, virtual time), written by\n")
	fmt.Fprintf(&b, "// lab/cmd/hoteltune (-seeds %d -refine %d; the tables are in\n", seeds, refine)
	b.WriteString("// docs/experiments.md). Both drivers run the peers' rows with it\n")
	b.WriteString("// (peer_params=tuned).\n")
	b.WriteString("var HotelTuned = map[string]map[string]tune.Point{\n")
	for _, scn := range figure.HotelScenarios {
		ps := tuned[scn]
		if len(ps) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\t%q: {\n", scn)
		var peers []string
		for p := range ps {
			peers = append(peers, p)
		}
		sort.Strings(peers)
		for _, p := range peers {
			fmt.Fprintf(&b, "\t\t%q: {", p)
			var ks []string
			for k := range ps[p] {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			for i, k := range ks {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q: %s", k, report.FormatFloat(ps[p][k]))
			}
			b.WriteString("},\n")
		}
		b.WriteString("\t},\n")
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}
