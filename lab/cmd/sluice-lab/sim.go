// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/figure/record"
	"github.com/sluicehq/sluice/lab/figure/simulated"
	"github.com/sluicehq/sluice/lab/report"
)

// simFlags holds the flags of `sluice-lab sim`.
type simFlags struct {
	list   bool
	params bool
	seed   uint64
	seeds  string
	out    string
	set    []string
	record string
}

// newSimCmd builds `sluice-lab sim`.
func newSimCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim [SCENARIO]",
		Short: "Run a paper's experiment in virtual time with the real controllers",
		Long: `sim runs a named scenario in the discrete-event simulator: the real
controllers and gates, driven in virtual time, so a 1000-second experiment
takes a moment and repeats exactly for a given seed.

Each run writes a folder (default ./out/sim/SCENARIO-SEED) with
summary.json (scenario, mode "sim", seed and the metrics), timeseries.csv
(one row per control period) and PNG plots drawn like the paper's figure.

  --list            list the scenarios with a one-line description
  --params          list the scenario's parameters, defaults and docs
  --set key=value   override a parameter (repeatable; e.g. --set ti=0.1)
  --seeds 1-40      run once per seed (a range, a list, or both: 1-10,15)
                    into --out/seed-N, write --out/seeds.csv (one row per
                    seed: expectations met and every metric) and print
                    how many seeds met each expectation`,
		Example: `  sluice-lab sim --list
  sluice-lab sim kihl-step
  sluice-lab sim kihl-step --set ti=0.1 --seed 2
  sluice-lab sim kihl-distribution --set service=det --out /tmp/md1
  sluice-lab sim seda-spike --params
  sluice-lab sim adaptive --set service=lognormal --seeds 1-40 --out /tmp/sweep`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if f.list {
				if len(args) > 0 {
					return cli.Usagef("sim: --list takes no scenario")
				}
				return listScenarios(out)
			}
			if len(args) == 0 {
				return cli.Usagef("sim: name a scenario (see 'sluice-lab sim --list')")
			}
			p, err := simulated.Prepare(args[0])
			if err != nil {
				return cli.Usagef("sim: %v", err)
			}
			if f.params {
				return listParams(out, p)
			}
			if err := p.Set(f.set...); err != nil {
				return cli.Usagef("sim: %v", err)
			}
			if f.seeds != "" {
				if cmd.Flags().Changed("seed") {
					return cli.Usagef("sim: --seed and --seeds: give one")
				}
				seeds, err := parseSeeds(f.seeds)
				if err != nil {
					return cli.Usagef("sim: %v", err)
				}
				dir := f.out
				if dir == "" {
					dir = filepath.Join("out", "sim", args[0]+"-seeds")
				}
				return runError(runSeeds(out, p, seeds, dir))
			}
			dir := f.out
			if dir == "" {
				dir = filepath.Join("out", "sim", args[0]+"-"+strconv.FormatUint(f.seed, 10))
			}
			rec := record.New(p.Scenario.Name, figure.Sim, f.seed, time.Now())
			res, err := p.Run(f.seed)
			if err != nil {
				return runError(err)
			}
			if _, err := res.Write(dir); err != nil {
				return err
			}
			if err := printRun(out, res, dir); err != nil {
				return err
			}
			return writeRecord(cmd, f.record, rec, res.Checks)
		},
	}
	cmd.Flags().BoolVar(&f.list, "list", false, "list the scenarios")
	cmd.Flags().BoolVar(&f.params, "params", false, "list the scenario's parameters")
	cmd.Flags().Uint64Var(&f.seed, "seed", 1, "seed of every random stream of the run")
	cmd.Flags().StringVar(&f.seeds, "seeds", "", "run once per seed, e.g. 1-40 or 1-10,15 (a folder per seed under --out, seeds.csv, and how many seeds met each expectation)")
	cmd.Flags().StringVar(&f.out, "out", "", "result folder (default ./out/sim/SCENARIO-SEED, or ./out/sim/SCENARIO-seeds with --seeds)")
	cmd.Flags().StringArrayVar(&f.set, "set", nil, "override a parameter: key=value (repeatable)")
	addRecordFlag(cmd, &f.record)
	return cmd
}

// runError is a run's error as the command returns it: parameters valid
// one by one but inconsistent together (simulated.ParamError) are a usage
// error, anything else a runtime failure.
func runError(err error) error {
	var pe *simulated.ParamError
	if errors.As(err, &pe) {
		return cli.Usagef("sim: %v", err)
	}
	return err
}

func listScenarios(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range simulated.All() {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
	}
	return tw.Flush()
}

func listParams(w io.Writer, p *simulated.Prepared) error {
	fmt.Fprintf(w, "%s: %s\n\nparameters (--set name=value):\n", p.Scenario.Name, p.Scenario.Description)
	for _, d := range p.Params.List() {
		fmt.Fprintf(w, "  %s = %s  (%s)\n      %s\n", d.Name, d.Default, d.Type, d.Doc)
	}
	return nil
}

func printRun(w io.Writer, res *figure.Result, dir string) error {
	s := res.Summary
	fmt.Fprintf(w, "%s (seed %d)\n", s.Scenario, s.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range res.Key {
		fmt.Fprintf(tw, "  %s\t%s\n", k, report.FormatFloat(s.Metric(k)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more := len(s.Names()) - len(res.Key); more > 0 {
		fmt.Fprintf(w, "  (%d more metrics in summary.json)\n", more)
	}
	if met, total := res.Passed(); total > 0 {
		fmt.Fprintf(w, "%d of %d expectations met (expectations.csv)\n", met, total)
	}
	fmt.Fprintf(w, "results: %s (%s)\n", dir, strings.Join(res.Files(), ", "))
	return nil
}
