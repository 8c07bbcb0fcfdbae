// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/lab/benchgrpc"
)

// newBenchCmd builds `sluice-lab bench`: cost comparisons of the proxy.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Cost comparisons of the proxy beside a plain Go reverse proxy",
	}
	cmd.AddCommand(newBenchGRPCCmd(), newPlainH2CCmd())
	return cmd
}

// newBenchGRPCCmd builds `sluice-lab bench grpc-proxy`.
func newBenchGRPCCmd() *cobra.Command {
	var cfg benchgrpc.Config
	cmd := &cobra.Command{
		Use:   "grpc-proxy",
		Short: "gRPC unary calls direct, through a plain h2c ReverseProxy and through sluice proxy, in one run",
		Long: `grpc-proxy starts a trivial grpc-go interop TestService (h2c), a plain
net/http/httputil.ReverseProxy speaking h2c on both sides and
` + "`sluice proxy`" + ` (h2c, one stage on the test service), each proxy a child
process of this binary, and drives UnaryCall closed-loop with --streams
concurrent calls on one HTTP/2 connection against each in turn, for
--rounds rounds (the order rotated each round). Per run it prints the
load average, calls/s (OK answers), p99 and the proxy's CPU per call
(the utime+stime its process gained over the run, /proc/PID/stat, 10 ms
ticks); then the medians and sluice's ratios to the plain proxy. Only the
ratios mean anything across machines.`,
		Example: `  sluice-lab bench grpc-proxy
  sluice-lab bench grpc-proxy --rounds 5 --duration 20s --controller auto`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Exe, cfg.Log = exe, cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			rep, err := benchgrpc.Bench(ctx, cfg)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "median of the rounds\tcalls/s\tp99\tCPU/call")
			for _, t := range []string{benchgrpc.Direct, benchgrpc.Plain, benchgrpc.Sluice} {
				m := rep.Median[t]
				per := "—"
				if t != benchgrpc.Direct {
					per = m.PerCall.String()
				}
				fmt.Fprintf(tw, "%s\t%.0f\t%v\t%s\n", t, m.Rate, m.P99.Round(time.Microsecond), per)
			}
			cpu, rate := rep.Ratios()
			fmt.Fprintf(tw, "sluice / plain\t%.2f×\t\t%.2f×\n", rate, cpu)
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Rounds, "rounds", 3, "rounds of every target")
	fl.DurationVar(&cfg.Duration, "duration", 10*time.Second, "length of one target's run")
	fl.IntVar(&cfg.Streams, "streams", 64, "concurrent calls (closed-loop callers, no think time)")
	fl.StringVar(&cfg.Profile, "profile", "", "write a CPU profile of sluice proxy over its first run to this file")
	fl.StringVar(&cfg.Controller, "controller", "static-rate", "the stage's controller in sluice's configuration (static-rate: at 1e9/s, nothing shed)")
	return cmd
}

// newPlainH2CCmd builds the hidden `sluice-lab bench plain-h2c`: the
// comparison's baseline proxy as a process of its own.
func newPlainH2CCmd() *cobra.Command {
	var listen, backend, pprofAddr string
	cmd := &cobra.Command{
		Use:    "plain-h2c",
		Short:  "A plain httputil.ReverseProxy speaking h2c on both sides (grpc-proxy's baseline)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen == "" || backend == "" {
				return cli.Usagef("plain-h2c: --listen and --backend are required")
			}
			srv, err := benchgrpc.NewPlainH2C(listen, backend)
			if err != nil {
				return cli.Usage(err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			if pprofAddr != "" {
				mux := http.NewServeMux()
				mux.HandleFunc("/debug/pprof/", pprof.Index)
				mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
				ps := &http.Server{Addr: pprofAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = ps.ListenAndServe() }()
				defer ps.Close()
			}
			go func() {
				<-ctx.Done()
				_ = srv.Close()
			}()
			if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on")
	cmd.Flags().StringVar(&backend, "backend", "", "the h2c backend's URL, http://HOST:PORT")
	cmd.Flags().StringVar(&pprofAddr, "pprof", "", "serve net/http/pprof on this address")
	return cmd
}
