// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/lab/figure/live"
	"github.com/sluicehq/sluice/proxy"
)

// demoFlags holds the flags of `sluice-lab demo`.
type demoFlags struct {
	seed  uint64
	out   string
	admin string
}

// newDemoCmd builds `sluice-lab demo`.
func newDemoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A flash crowd on a bookstore: no control vs auto vs SEDA vs Yaksha (about 100 s)",
		Long: `demo needs nothing beyond this binary. On 127.0.0.1 it starts a TPC-W-like
bookstore on SQLite (in a temporary directory) and the sluice proxy in
front of it, measures the bookstore's capacity, and hits it with a flash
crowd from 0.5× to 10× that capacity four times: without admission
control, with auto (sluice's default, told only the 250 ms target as its
SLO), with SEDA (90th-percentile target) and with Yaksha (mean target).

It prints, for each run, the goodput (pages answered within the 250 ms
target, per second), the p90 response time, the fraction rejected and the
errors, and writes a report folder (default ./out/demo) with report.html,
summary.json, timeseries.csv and the plot. Progress goes to stderr.

While it runs, the proxy's live dashboard is at http://127.0.0.1:9901/ui
(--admin; a free port when that one is taken): open it to watch the flash
crowd, the controller's decisions and the rejections as they happen.
It takes about 100 s; run it on an otherwise quiet machine.`,
		Example: `  sluice-lab demo
  sluice-lab demo --out /tmp/demo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := f.out
			if dir == "" {
				dir = filepath.Join("out", "demo")
			}
			admin, err := demoAdminAddr(f.admin)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "sluice-lab demo: live dashboard at http://%s/ui while it runs\n", admin)
			ctx, stop := runContext(cmd.Context())
			defer stop()
			o, err := live.RunExperiment(ctx, live.DemoExperiment(), live.Options{Seed: f.seed, Out: dir,
				Progress: cmd.ErrOrStderr(), AdminAddr: admin})
			if err != nil {
				return err
			}
			return printDemo(cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().Uint64Var(&f.seed, "seed", 1, "seed of the load generator")
	cmd.Flags().StringVar(&f.out, "out", "", "report folder (default ./out/demo)")
	cmd.Flags().StringVar(&f.admin, "admin", proxy.DefaultAdminAddr, "admin listener of the demo's proxy, with the live dashboard at /ui (loopback; a free port when taken)")
	return cmd
}

// demoAdminAddr returns addr when it is a loopback address that can be
// bound now, else a free port on the same host: the demo's proxies bind
// it one after the other, so that the dashboard keeps its address.
func demoAdminAddr(addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--admin %q is invalid: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("--admin %q is invalid: must be a loopback address such as 127.0.0.1:9901", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			return "", fmt.Errorf("--admin %q: %v", addr, err)
		}
	}
	got := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", err
	}
	return got, nil
}

// printDemo prints the demo's table and the report's path.
func printDemo(w io.Writer, o *live.Outcome) error {
	s := o.Summary
	fmt.Fprintf(w, "\nsluice-lab demo: a bookstore with capacity %.0f pages/s, flash crowd of %.0f → %.0f users (0.5× → 10× capacity), %s\n\n",
		s.Metric("capacity_rps"), s.Metric("users_low"), s.Metric("users_high"), o.Elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "run\tgoodput (≤ %s)\tp90\trejected\terrors\n", live.DemoTarget)
	for _, run := range live.DemoRuns {
		fmt.Fprintf(tw, "%s\t%.1f pages/s\t%s\t%.1f%%\t%s\n", run, s.Metric("goodput_rps_"+run), fmtMillis(s.Metric("p90_ms_"+run)),
			100*s.Metric("reject_fraction_"+run), strconv.FormatFloat(s.Metric("errors_"+run), 'f', 0, 64))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	met, total := o.Passed()
	fmt.Fprintf(w, "\n%d of %d checks met (controlled runs beat no control on p90 and goodput)\n", met, total)
	for _, c := range o.Checks {
		if !c.Pass {
			fmt.Fprintf(w, "  NOT met: %s (%s)\n", c.Claim, c.Measured)
		}
	}
	fmt.Fprintf(w, "report: %s\n", filepath.Join(o.Dir, "report.html"))
	return nil
}

// fmtMillis formats a latency given in milliseconds.
func fmtMillis(ms float64) string {
	if ms != ms { // NaN
		return "n/a"
	}
	if ms >= 10000 {
		return fmt.Sprintf("%.1f s", ms/1000)
	}
	return fmt.Sprintf("%.0f ms", ms)
}
