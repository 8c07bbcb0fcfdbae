// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/figure/simulated"
	"github.com/sluicehq/sluice/lab/report"
)

// maxSeeds bounds one sweep: a sweep is for a distribution, and a
// mistyped range (1-100000) should be an error, not an afternoon.
const maxSeeds = 10000

// parseSeeds reads --seeds: a range A-B, a comma-separated list, or both
// (1-10,15), each seed at most once, in the order given.
func parseSeeds(s string) ([]uint64, error) {
	var seeds []uint64
	seen := map[uint64]bool{}
	add := func(v uint64) error {
		if seen[v] {
			return fmt.Errorf("--seeds %q: seed %d twice", s, v)
		}
		if len(seeds) == maxSeeds {
			return fmt.Errorf("--seeds %q: more than %d seeds", s, maxSeeds)
		}
		seen[v] = true
		seeds = append(seeds, v)
		return nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %q is not a seed or a range A-B of seeds", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("--seeds %q: %q is not a range A-B with A ≤ B", s, part)
			}
			if b-a >= maxSeeds {
				return nil, fmt.Errorf("--seeds %q: more than %d seeds", s, maxSeeds)
			}
		}
		for v := a; ; v++ {
			if err := add(v); err != nil {
				return nil, err
			}
			if v == b {
				break
			}
		}
	}
	return seeds, nil
}

// seedRun is one seed's result in a sweep.
type seedRun struct {
	seed       uint64
	summary    *report.Summary
	checks     []figure.Check
	met, total int // expectations met, of total
}

// runSeeds runs the prepared scenario once per seed, writes each run to
// dir/seed-N, and writes dir/seeds.csv (one row per seed: the
// expectations met and every metric) and prints how many seeds met each
// expectation: what a single seed cannot say, how often a bound holds
// over the scenario's random draws.
func runSeeds(w io.Writer, p *simulated.Prepared, seeds []uint64, dir string) error {
	runs := make([]seedRun, 0, len(seeds))
	for _, seed := range seeds {
		res, err := p.Run(seed)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		if _, err := res.Write(filepath.Join(dir, "seed-"+strconv.FormatUint(seed, 10))); err != nil {
			return err
		}
		met, total := res.Passed()
		runs = append(runs, seedRun{seed: seed, summary: res.Summary, checks: res.Checks, met: met, total: total})
	}
	if err := writeSeedsCSV(filepath.Join(dir, "seeds.csv"), runs); err != nil {
		return err
	}
	return printSeeds(w, p.Scenario.Name, runs, dir)
}

// writeSeedsCSV writes one row per seed: seed, expectations_met,
// expectations_total, then every metric any run reported (sorted by
// name; empty where a run lacks it).
func writeSeedsCSV(path string, runs []seedRun) error {
	seen := map[string]bool{}
	var names []string
	for _, r := range runs {
		for _, n := range r.summary.Names() {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write(append([]string{"seed", "expectations_met", "expectations_total"}, names...))
	for _, r := range runs {
		row := []string{strconv.FormatUint(r.seed, 10), strconv.Itoa(r.met), strconv.Itoa(r.total)}
		for _, n := range names {
			v := ""
			if x, ok := r.summary.Get(n); ok {
				v = strconv.FormatFloat(x, 'g', 6, 64)
			}
			row = append(row, v)
		}
		_ = cw.Write(row)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printSeeds prints, for every expectation in the order the scenario
// states them, how many seeds met it and which did not (the first ten).
func printSeeds(w io.Writer, scenario string, runs []seedRun, dir string) error {
	type tally struct {
		met, total int
		missed     []uint64
	}
	var claims []string
	count := map[string]*tally{}
	for _, r := range runs {
		for _, c := range r.checks {
			t := count[c.Claim]
			if t == nil {
				t = &tally{}
				count[c.Claim] = t
				claims = append(claims, c.Claim)
			}
			t.total++
			if c.Pass {
				t.met++
			} else {
				t.missed = append(t.missed, r.seed)
			}
		}
	}
	fmt.Fprintf(w, "%s: %d seeds\n", scenario, len(runs))
	width := len(strconv.Itoa(len(runs)))
	for _, c := range claims {
		t := count[c]
		fmt.Fprintf(w, "  %*d of %d  %s\n", width, t.met, t.total, c)
		if len(t.missed) > 0 {
			var s []string
			for _, seed := range t.missed[:min(len(t.missed), 10)] {
				s = append(s, strconv.FormatUint(seed, 10))
			}
			if len(t.missed) > 10 {
				s = append(s, "…")
			}
			fmt.Fprintf(w, "  %*s     missed by seeds %s\n", 2*width, "", strings.Join(s, " "))
		}
	}
	fmt.Fprintf(w, "results: %s (seeds.csv, seed-N/ for each seed)\n", dir)
	return nil
}
