// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpcsluice"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/policy"
)

// GRPC tier modes.
const (
	// GRPCTierGo is a gRPC service without overload control whose calls
	// are retried by grpc-go itself, as the library ships it: a service
	// config with a retryPolicy and retryThrottling (gRFC A6).
	GRPCTierGo = "grpc-go"
)

// GRPCTierModes lists the gRPC tier's modes.
var GRPCTierModes = []string{GRPCTierGo, TierSluice}

// GRPCTierConfig configures a GRPCTier.
type GRPCTierConfig struct {
	// Next is the next hop's address, host:port (or http://host:port), a
	// loopback one: an h2c gRPC server.
	Next string
	// Mode is grpc-go or sluice (GRPCTierModes).
	Mode string
	// MaxAttempts, MaxTokens and TokenRatio are the grpc-go mode's service
	// config: retryPolicy.maxAttempts (UNAVAILABLE and RESOURCE_EXHAUSTED
	// retried, back-off from 10 ms to 100 ms) and retryThrottling.
	MaxAttempts           int
	MaxTokens, TokenRatio float64
	// Policy is the sluice mode's admission policy (grpcsluice's server
	// interceptors); Client its client side (grpcsluice's client
	// interceptors on the calls to the next hop).
	Policy policy.Config
	Client client.Config
	// Forward lists the metadata passed on to the next hop as it came
	// (lower case; default: x-sluice-class and x-lab-deadline).
	Forward []string
	// Seed seeds the sluice mode's draws.
	Seed uint64
}

// ServiceConfig returns the grpc-go mode's service config (JSON).
func (c GRPCTierConfig) ServiceConfig() string {
	return fmt.Sprintf(`{"methodConfig": [{"name": [{"service": "grpc.testing.TestService"}],
  "retryPolicy": {"maxAttempts": %d, "initialBackoff": "0.01s", "maxBackoff": "0.1s", "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]}}],
 "retryThrottling": {"maxTokens": %g, "tokenRatio": %g}}`, c.MaxAttempts, c.MaxTokens, c.TokenRatio)
}

var _ Backend = (*GRPCTier)(nil)

// GRPCTier is one service of a chain over gRPC: grpc-go's interop
// TestService whose EmptyCall and UnaryCall call the next hop's same
// method once, through the mode's client, with the call's context (its
// deadline, from grpc-timeout, travels as grpc-go makes it), and relay
// the answer or its status. In sluice mode grpcsluice's server
// interceptors admit the calls and its client interceptors carry them on;
// in grpc-go mode nothing admits them and grpc-go's own retry, throttled
// by retryThrottling, retries them.
type GRPCTier struct {
	testpb.UnimplementedTestServiceServer
	cfg    GRPCTierConfig
	srv    *grpc.Server
	cc     *grpc.ClientConn
	next   testpb.TestServiceClient
	pol    *policy.Policy
	ctr    counters
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// NewGRPCTier validates cfg and returns a running GRPCTier; serve its
// Server (or Handler) and Close it when done.
func NewGRPCTier(cfg GRPCTierConfig) (*GRPCTier, error) {
	u, err := loadgen.CheckLoopbackURL("next", "http://"+strings.TrimPrefix(cfg.Next, "http://"))
	if err != nil {
		return nil, fmt.Errorf("grpc tier: %w", err)
	}
	next := u.Host
	if cfg.Forward == nil {
		cfg.Forward = []string{"x-sluice-class", labDeadlineMD}
	}
	t := &GRPCTier{cfg: cfg}
	dopts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	var sopts []grpc.ServerOption
	switch cfg.Mode {
	case GRPCTierGo:
		if cfg.MaxAttempts < 1 || cfg.MaxTokens <= 0 || cfg.TokenRatio <= 0 {
			return nil, fmt.Errorf("grpc tier: grpc-go mode: max attempts %d, max tokens %g, token ratio %g: want ≥ 1, > 0, > 0",
				cfg.MaxAttempts, cfg.MaxTokens, cfg.TokenRatio)
		}
		dopts = append(dopts, grpc.WithDefaultServiceConfig(cfg.ServiceConfig()))
	case TierSluice:
		cl, err := grpcsluice.NewClient(cfg.Client, client.Options{Rand: rand.New(rand.NewPCG(cfg.Seed, 0x74696572))})
		if err != nil {
			return nil, fmt.Errorf("grpc tier: client: %w", err)
		}
		pol, err := policy.New(cfg.Policy, policy.Options{Rand: rand.New(rand.NewPCG(cfg.Seed, 0x706f6c))})
		if err != nil {
			return nil, fmt.Errorf("grpc tier: policy: %w", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.cancel, t.pol = cancel, pol
		t.wg.Go(func() { pol.Run(ctx) })
		s := grpcsluice.NewServer(pol, grpcsluice.ServerOptions{})
		sopts = append(sopts, s.ServerOptions()...)
		dopts = append(dopts, grpc.WithChainUnaryInterceptor(cl.UnaryInterceptor()))
	default:
		return nil, fmt.Errorf("grpc tier: mode %q: want one of %s", cfg.Mode, strings.Join(GRPCTierModes, ", "))
	}
	cc, err := grpc.NewClient(next, dopts...)
	if err != nil {
		t.stopPolicy()
		return nil, fmt.Errorf("grpc tier: %w", err)
	}
	t.cc, t.next = cc, testpb.NewTestServiceClient(cc)
	t.srv = grpc.NewServer(sopts...)
	testpb.RegisterTestServiceServer(t.srv, t)
	return t, nil
}

// Server returns the tier's gRPC server.
func (t *GRPCTier) Server() *grpc.Server { return t.srv }

// Handler serves the tier's gRPC calls and /healthz and /_meta on one
// port (for an http.Server speaking HTTP/1.1 and h2c).
func (t *GRPCTier) Handler() http.Handler { return http.HandlerFunc(t.ServeHTTP) }

// ServeHTTP is Handler's: a gRPC call (HTTP/2, Content-Type
// application/grpc…) goes to the gRPC server (grpc.Server's ServeHTTP),
// /healthz and /_meta are answered, anything else is 404.
func (t *GRPCTier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		t.srv.ServeHTTP(w, r)
		return
	}
	if !serveMeta(w, r, t.Meta) {
		http.NotFound(w, r)
	}
}

// Meta returns the /_meta manifest.
func (t *GRPCTier) Meta() any {
	m := TierMeta{Kind: "tier", Mode: t.cfg.Mode, Next: t.cfg.Next}
	if t.pol != nil {
		for _, st := range t.pol.Stages() {
			m.Stages = append(m.Stages, st.Name())
		}
	}
	return m
}

// Stats returns the calls counted by their answer's HTTP equivalent: OK
// 200, RESOURCE_EXHAUSTED and UNAVAILABLE 503, DEADLINE_EXCEEDED 504,
// others 502.
func (t *GRPCTier) Stats() Stats { return t.ctr.stats() }

// count counts a call that ended with err.
func (t *GRPCTier) count(err error) {
	switch status.Code(err) {
	case codes.OK:
		t.ctr.count(http.StatusOK)
	case codes.ResourceExhausted, codes.Unavailable:
		t.ctr.count(http.StatusServiceUnavailable)
	case codes.DeadlineExceeded:
		t.ctr.count(http.StatusGatewayTimeout)
	default:
		t.ctr.count(http.StatusBadGateway)
	}
}

// Policy returns the sluice mode's policy (nil in grpc-go mode).
func (t *GRPCTier) Policy() *policy.Policy { return t.pol }

// forwarded is ctx with the Forward metadata of the incoming call as
// outgoing metadata.
func (t *GRPCTier) forwarded(ctx context.Context) context.Context {
	var kv []string
	for _, k := range t.cfg.Forward {
		for _, v := range metadata.ValueFromIncomingContext(ctx, k) {
			kv = append(kv, k, v)
		}
	}
	if kv == nil {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// EmptyCall calls the next hop's EmptyCall.
func (t *GRPCTier) EmptyCall(ctx context.Context, in *testpb.Empty) (*testpb.Empty, error) {
	out, err := t.next.EmptyCall(t.forwarded(ctx), in)
	t.count(err)
	return out, err
}

// UnaryCall calls the next hop's UnaryCall.
func (t *GRPCTier) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	out, err := t.next.UnaryCall(t.forwarded(ctx), in)
	t.count(err)
	return out, err
}

func (t *GRPCTier) stopPolicy() {
	if t.cancel != nil {
		t.cancel()
	}
	t.wg.Wait()
}

// Close stops the server, the connection to the next hop and the
// policy's runner. It is idempotent.
func (t *GRPCTier) Close() error {
	var err error
	t.once.Do(func() {
		t.srv.Stop()
		err = t.cc.Close()
		t.stopPolicy()
	})
	return err
}
