// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/figure/live"
	"github.com/sluicehq/sluice/lab/figure/record"
	"github.com/sluicehq/sluice/lab/report"
)

// experimentFlags holds the flags of `sluice-lab experiment`.
type experimentFlags struct {
	list           bool
	quick          bool
	service        string
	transport      string
	medianProbe    bool
	autoKnee       string
	autoBurst      time.Duration
	autoTailPool   int
	backendProcess bool
	proxyProcess   bool
	rows           []string
	sets           []string
	policerKernel  string
	cgiWork        string
	seed           uint64
	out            string
	record         string
}

// newExperimentCmd builds `sluice-lab experiment`.
func newExperimentCmd() *cobra.Command {
	var f experimentFlags
	cmd := &cobra.Command{
		Use:   "experiment [NAME]",
		Short: "Run a paper's experiment live: testbed, proxy and load on 127.0.0.1",
		Long: `experiment runs a paper's experiment on real sockets, on 127.0.0.1 only:
a testbed backend, the sluice proxy with the experiment's configuration,
and the load generator, once without admission control and once (or more)
with it. Runs are time-compressed to at most 3 minutes (about 1 with
--quick); the report says by how much.

Each run writes a folder (default ./out/experiment/NAME-SEED) with
summary.json (the simulator scenario's metric names, mode "live"), CSV
time series, PNG plots drawn like the paper's figures, expectations.csv,
and report.html, a self-contained page that states for every expectation
of the paper whether this run met it, with the measured numbers.

Progress (one line per phase and per second of load) goes to stderr.
Experiments share the machine's CPUs: run one at a time, on an otherwise
quiet machine.`,
		Example: `  sluice-lab experiment --list
  sluice-lab experiment seda-spike --quick
  sluice-lab experiment yaksha-load-sweep --seed 2 --out /tmp/yaksha`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if f.list {
				if len(args) > 0 {
					return cli.Usagef("experiment: --list takes no name")
				}
				return listExperiments(out)
			}
			if len(args) == 0 {
				return cli.Usagef("experiment: name an experiment (see 'sluice-lab experiment --list')")
			}
			if f.transport != "" && f.transport != "http" && f.transport != "grpc" {
				return cli.Usagef("experiment: --transport %q: want http or grpc", f.transport)
			}
			switch f.policerKernel {
			case "", "auto", "on", "off":
			default:
				return cli.Usagef("experiment: --policer-kernel %q: want auto, on or off", f.policerKernel)
			}
			switch f.autoKnee {
			case "", auto.KneeProbes, auto.KneeOvertakes:
			default:
				return cli.Usagef("experiment: --auto-knee %q: want %s or %s", f.autoKnee, auto.KneeProbes, auto.KneeOvertakes)
			}
			if f.autoBurst < 0 || f.autoBurst > time.Minute {
				return cli.Usagef("experiment: --auto-burst-window %v: want a duration within [0, 1m] (0: auto's default, off)", f.autoBurst)
			}
			if f.autoTailPool != 0 && (f.autoTailPool < 100 || f.autoTailPool > 1000000) {
				return cli.Usagef("experiment: --auto-tail-pool %d: want service times within [100, 1000000] (0: auto's default, off)", f.autoTailPool)
			}
			switch f.cgiWork {
			case "", live.CGIWorkCPUTime, live.CGIWorkCount:
			default:
				return cli.Usagef("experiment: --cgi-work %q: want %s or %s", f.cgiWork, live.CGIWorkCPUTime, live.CGIWorkCount)
			}
			e, err := live.Lookup(args[0])
			if err != nil {
				return cli.Usagef("experiment: %v", err)
			}
			dir := f.out
			if dir == "" {
				dir = filepath.Join("out", "experiment", e.Name+"-"+strconv.FormatUint(f.seed, 10))
			}
			ctx, stop := runContext(cmd.Context())
			defer stop()
			rec := record.New(e.Name, figure.Live, f.seed, time.Now())
			rec.Quick = f.quick
			res, err := live.RunExperiment(ctx, e, live.Options{Quick: f.quick, Seed: f.seed, Out: dir, Service: f.service,
				Transport: f.transport, AutoMedianProbe: f.medianProbe, AutoKnee: f.autoKnee, AutoBurstWindow: f.autoBurst, AutoTailPool: f.autoTailPool, BackendProcess: f.backendProcess, ProxyProcess: f.proxyProcess, Rows: f.rows, PolicerKernel: f.policerKernel, CGIWork: f.cgiWork, Sets: f.sets, Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			if err := printOutcome(out, res); err != nil {
				return err
			}
			return writeRecord(cmd, f.record, rec, res.Checks)
		},
	}
	cmd.Flags().BoolVar(&f.list, "list", false, "list the experiments")
	cmd.Flags().BoolVar(&f.quick, "quick", false, "run the shortened form (about a minute)")
	cmd.Flags().BoolVar(&f.medianProbe, "auto-median-probe", false, "adaptive only: turn on auto's median_probe option (a named option, off by default)")
	cmd.Flags().BoolVar(&f.backendProcess, "backend-process", true, "adaptive only: run each backend as a child process (sluice-lab testbed queue --control); =false runs them in the lab's process, beside the load generator")
	cmd.Flags().BoolVar(&f.proxyProcess, "proxy-process", true, "adaptive only: run the sluice rows' proxy as a child process (sluice-lab proxy --config FILE; its stage sampled over the admin /state), as nginx and HAProxy run; =false runs it in the lab's process, beside the load generator")
	cmd.Flags().StringVar(&f.autoKnee, "auto-knee", "", "adaptive only: auto's knee option, probes (auto's default) or overtakes (a named option: the knee read from requests overtaking earlier ones)")
	cmd.Flags().DurationVar(&f.autoBurst, "auto-burst-window", 0, "adaptive only: auto's burst_window option (a named option, off by default; e.g. 1s): how long into an overload a standing queue keeps a burst's wait")
	cmd.Flags().IntVar(&f.autoTailPool, "auto-tail-pool", 0, "adaptive only: auto's tail_pool option (a named option, off by default; e.g. 2000): how many of the latest service times the wait queue's p99 estimate pools")
	cmd.Flags().StringVar(&f.service, "service", "", "adaptive only: service-time variant exp, lognormal (σ 1.5) or pareto (α 1.5, capped at 50× the mean); default exp")
	cmd.Flags().StringVar(&f.transport, "transport", "", "graph, graph-crowd and graph-recover only: grpc runs the chain with every hop a gRPC service (rows grpc-throttle and inprocess; graph-recover: inprocess and inprocess-window); default http")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "graph-hotel and costly only: a parameter as key=value (repeatable), as sluice-lab sim --set (graph-hotel: scenarios, rows, phases' lengths, peer_params, policy; costly: factors, warm, length, throttle_scope)")
	cmd.Flags().StringSliceVar(&f.rows, "rows", nil, "peers, adaptive, graph-hotel and costly only: run only these rows (comma-separated; costly: requests, service_time, service_time_share, reported; peers: uncontrolled, nginx, haproxy, seda, yaksha; adaptive: none, nginx, haproxy, seda, yaksha, gradient2, envoy-gradient, bbr, auto; graph-hotel: none, breakwater, dagor, rajomon, topfull, sluice), each on a fresh backend, proxy and load generator")
	cmd.Flags().StringVar(&f.policerKernel, "policer-kernel", "", "voigt-sweep and voigt-step only: the connection policer's policer.kernel, auto (drop excess SYNs in the kernel when it can), on or off (reset at accept in user space); default auto")
	cmd.Flags().StringVar(&f.cgiWork, "cgi-work", "", "the CPU experiments (voigt-sweep, voigt-step, kihl-step, kihl-distribution): what a request's CPU demand is on the pinned CGI backend, cpu-time (burn the demand's CPU time, however fast the shared CPU runs) or count (sum the calibrated count of random numbers); default cpu-time")
	cmd.Flags().Uint64Var(&f.seed, "seed", 1, "seed of the load generator and the backends")
	cmd.Flags().StringVar(&f.out, "out", "", "report folder (default ./out/experiment/NAME-SEED)")
	addRecordFlag(cmd, &f.record)
	return cmd
}

func listExperiments(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range live.All() {
		fmt.Fprintf(tw, "%s\t%s\n", e.Name, e.Description)
	}
	return tw.Flush()
}

// printOutcome prints the expectations, the headline metrics and where
// the report is.
func printOutcome(w io.Writer, o *live.Outcome) error {
	met, total := o.Passed()
	form := "full"
	if o.Summary.Metric("quick") == 1 {
		form = "quick"
	}
	fmt.Fprintf(w, "%s (seed %d, %s form, %s): %d of %d expectations met\n", o.Experiment.Name, o.Summary.Seed, form,
		o.Elapsed.Round(100*time.Millisecond), met, total)
	for _, c := range o.Checks {
		mark := "met    "
		if !c.Pass {
			mark = "NOT met"
		}
		fmt.Fprintf(w, "  %s  %s\n           %s\n", mark, c.Claim, c.Measured)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range o.Key {
		fmt.Fprintf(tw, "  %s\t%s\n", k, report.FormatFloat(o.Summary.Metric(k)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.Dir != "" {
		fmt.Fprintf(w, "report: %s\n", filepath.Join(o.Dir, "report.html"))
	}
	return nil
}

// runContext is the context of a command: cancelled by Ctrl-C or SIGTERM.
func runContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
