// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpcsluice"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/testbed"
)

// The chain over gRPC (--set transport=grpc): the same figure, spec and
// checks, every hop a gRPC service over h2c. The backend is `sluice-lab
// testbed grpc` with --record and --control (its records and its trigger
// over HTTP on the same port), each tier `sluice-lab testbed tier --grpc`,
// and the clients the load generator's gRPC calls. Two rows
// (figure.GraphGRPCRows): grpc-throttle, where the clients and the tiers
// retry with grpc-go's own retryPolicy and retryThrottling from a service
// config, the library as it ships (no per-attempt timeout: grpc-go has
// none; the deadline travels as grpc-timeout); and inprocess, grpcsluice's
// server interceptors at every tier and its client interceptors on every
// call, clients included.

// runRowGRPC is runRow over gRPC.
func (pl graphPlan) runRowGRPC(ctx context.Context, env *Env, dir, row string, procs *graphProcs) (*figure.GraphRun, error) {
	c := pl.c
	if !slices.Contains(figure.GraphGRPCRows, row) && row != figure.GraphInProcessWindow {
		return nil, fmt.Errorf("row %s has no gRPC form: with transport=grpc the rows are %s", row, strings.Join(append(slices.Clone(figure.GraphGRPCRows), figure.GraphInProcessWindow), ", "))
	}
	be, err := startChildBackend(ctx, env.Executable, nil, "grpc", "--workers", strconv.Itoa(c.Workers),
		"--service", c.Service.String(), "--seed", strconv.FormatUint(env.Seed, 10), "--record", "--control", "--free-gone")
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	procs.closers = append(procs.closers, be.Close)
	next := be.URL
	args := []string{"--mode", testbed.GRPCTierGo, "--attempts", strconv.Itoa(c.Attempts),
		"--max-tokens", fmtF(c.MaxTokens), "--token-ratio", fmtF(c.TokenRatio)}
	if figure.InProcessRow(row) {
		polFile, err := pl.writePolicy(dir)
		if err != nil {
			return nil, err
		}
		args = []string{"--mode", testbed.TierSluice, "--policy", polFile}
	}
	for _, name := range []string{"tier2", "tier1"} {
		t, err := startChildBackend(ctx, env.Executable, nil,
			append([]string{"tier", "--grpc", "--next", next, "--seed", strconv.FormatUint(env.Seed, 10)}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		procs.closers = append(procs.closers, t.Close)
		next = t.URL
	}
	env.Logf("chain over gRPC: clients → %s (backend %s)", next, be.URL)
	return pl.load(ctx, env, row, next, be.URL, nil)
}

// grpcClientOf returns a class's client population over gRPC: grpc-go's
// retry with retryThrottling (grpc-throttle), or grpcsluice's client
// interceptors with the chain's client side (inprocess); either way the
// user's deadline is stamped as x-lab-deadline for the backend's records.
func (pl graphPlan) grpcClientOf(row string, seed uint64) (*loadgen.GRPCConfig, error) {
	c := pl.c
	g := &loadgen.GRPCConfig{Conns: 4}
	if figure.InProcessRow(row) {
		cl, err := grpcsluice.NewClient(c.SluiceClientOf(row), client.Options{Rand: rand.New(rand.NewPCG(seed, 0x636c69656e74))})
		if err != nil {
			return nil, err
		}
		g.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(stampLabDeadline, cl.UnaryInterceptor())}
		return g, nil
	}
	sc := testbed.GRPCTierConfig{MaxAttempts: c.Attempts, MaxTokens: c.MaxTokens, TokenRatio: c.TokenRatio}.ServiceConfig()
	g.DialOptions = []grpc.DialOption{grpc.WithDefaultServiceConfig(sc), grpc.WithChainUnaryInterceptor(stampLabDeadline)}
	return g, nil
}

// stampLabDeadline puts the call's deadline in x-lab-deadline (the lab's
// instrumentation, passed on by every tier to the backend's records).
func stampLabDeadline(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if d, ok := ctx.Deadline(); ok {
		ctx = metadata.AppendToOutgoingContext(ctx, strings.ToLower(testbed.LabDeadlineHeader), strconv.FormatInt(d.UnixNano(), 10))
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}
