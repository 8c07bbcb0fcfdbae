// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/lab/testbed"
)

func newTestbedHotelCmd(f *testbedFlags) *cobra.Command {
	var config, policyFile, peerFile string
	cmd := &cobra.Command{
		Use:   "hotel",
		Short: "A service of the hotel graph: CPU-bound gRPC handlers, calls to other services",
		Long: `hotel is one service of the graph-hotel experiment's graph (DeathStarBench's
hotelReservation shape): a gRPC service (h2c, grpc-go's own server) with one
unary method per API (google.protobuf.Empty in and out), whose handler waits
for one of its workers, burns the API's CPU time (thread CPU time), then
calls the next services one after the other with the call's context, and
answers. The service hotel.Control (Records, Scale, Busy) answers the lab.

--config is the service's JSON (name, entry, workers, queue_limit, methods
with their api, work and calls, mode, seed), as the experiment writes it;
mode sluice also needs --policy (a policy YAML: grpcsluice's interceptors),
a peer's mode (breakwater, dagor, rajomon, topfull) --peer-config (the
peer's configuration YAML).`,
		Example: `  sluice-lab testbed hotel --listen 127.0.0.1:0 --config rate.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if config == "" {
				return cli.Usagef("testbed hotel: --config is required")
			}
			cfg, err := testbed.LoadHotelServiceConfig(config, policyFile, peerFile)
			if err != nil {
				return cli.Usagef("testbed hotel: %v", err)
			}
			return serveHotel(cmd, f, cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&config, "config", "", "the service's configuration (JSON)")
	fl.StringVar(&policyFile, "policy", "", "mode sluice: the policy's YAML")
	fl.StringVar(&peerFile, "peer-config", "", "a peer's mode: the peer's configuration YAML")
	return cmd
}

// serveHotel serves a hotel service with grpc-go's own server until the
// context ends (Ctrl-C, SIGTERM), printing the listening line the lab's
// child processes are waited for by.
func serveHotel(cmd *cobra.Command, f *testbedFlags, cfg testbed.HotelServiceConfig) error {
	ctx, stop, ln, err := f.serve(cmd, "hotel")
	if err != nil {
		return err
	}
	defer stop()
	defer ln.Close()
	s, err := testbed.NewHotelService(cfg)
	if err != nil {
		return fmt.Errorf("testbed hotel: %w", err)
	}
	defer s.Close()
	served := make(chan error, 1)
	go func() { served <- s.Server().Serve(ln) }()
	start := time.Now()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "testbed hotel listening on http://%s (gRPC over h2c, service %s, mode %s, %d workers)\n",
		ln.Addr(), cfg.Name, cfg.Mode, cfg.Workers)
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	closeErr := s.Close()
	st := s.Stats()
	fmt.Fprintf(out, "testbed hotel %s: served %d calls (%d rejected, %d errors) in %s\n",
		cfg.Name, st.Requests, st.Rejected, st.Errors, time.Since(start).Round(time.Millisecond))
	if serveErr != nil && !errors.Is(serveErr, grpc.ErrServerStopped) {
		return fmt.Errorf("testbed hotel: %w", serveErr)
	}
	return closeErr
}
