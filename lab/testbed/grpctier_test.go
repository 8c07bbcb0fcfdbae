// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/internal/grpctest"
	"github.com/sluicehq/sluice/policy"
)

// grpcHop is the next hop of a tier under test: it answers fail's
// status (nil: OK) and remembers what it saw.
type grpcHop struct {
	testpb.UnimplementedTestServiceServer
	calls atomic.Int64
	fail  error
	mu    sync.Mutex
	md    metadata.MD
	left  time.Duration
}

func (h *grpcHop) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	h.calls.Add(1)
	h.mu.Lock()
	h.md, _ = metadata.FromIncomingContext(ctx)
	if d, ok := ctx.Deadline(); ok {
		h.left = time.Until(d)
	}
	h.mu.Unlock()
	return &testpb.SimpleResponse{}, h.fail
}

// serveGRPCHop serves svc (a TestService) over h2c on a loopback port.
func serveGRPCHop(t *testing.T, svc testpb.TestServiceServer, g *grpc.Server) string {
	t.Helper()
	if g == nil {
		g = grpc.NewServer()
		testpb.RegisterTestServiceServer(g, svc)
	}
	return grpctest.Serve(t, g)
}

func dialGRPCHop(t *testing.T, addr string) testpb.TestServiceClient {
	t.Helper()
	return testpb.NewTestServiceClient(grpctest.Dial(t, addr))
}

// In grpc-go mode the tier's calls are retried by grpc-go as it ships:
// UNAVAILABLE is retried up to maxAttempts while retryThrottling's tokens
// last (10, −1 a failure, retries only above 5), then never; the status
// comes back as it was; the lab's metadata and the deadline travel.
func TestGRPCTierGoRetryThrottling(t *testing.T) {
	hop := &grpcHop{fail: status.Error(codes.Unavailable, "down")}
	tier, err := NewGRPCTier(GRPCTierConfig{Next: serveGRPCHop(t, hop, nil), Mode: GRPCTierGo, MaxAttempts: 3, MaxTokens: 10, TokenRatio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	tc := dialGRPCHop(t, serveGRPCHop(t, nil, tier.Server()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-lab-deadline", "123", "x-sluice-class", "low", "x-other", "dropped")
	for range 20 {
		if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("%v, want UNAVAILABLE relayed", err)
		}
	}
	// 3 attempts, then 2 (the tokens reach 5), then one each: 23.
	if n := hop.calls.Load(); n != 23 {
		t.Errorf("the next hop saw %d attempts for 20 calls, want 23 (grpc-go's retry throttling)", n)
	}
	hop.mu.Lock()
	defer hop.mu.Unlock()
	if got := strings.Join(hop.md.Get("x-lab-deadline"), ",") + "|" + strings.Join(hop.md.Get("x-sluice-class"), ",") + "|" +
		strings.Join(hop.md.Get("x-other"), ","); got != "123|low|" {
		t.Errorf("forwarded metadata %q, want x-lab-deadline and x-sluice-class only", got)
	}
	if hop.left <= 0 || hop.left > 5*time.Second {
		t.Errorf("the deadline left at the next hop: %v", hop.left)
	}
}

// In sluice mode grpcsluice's server interceptors admit the tier's calls
// (a refused one never reaches the next hop, RESOURCE_EXHAUSTED) and its
// client interceptors carry them on with the deadline.
func TestGRPCTierSluice(t *testing.T) {
	var pc policy.Config
	if err := yaml.Unmarshal([]byte(`stages: [{name: tier, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 0.001}, burst: 1}]`), &pc); err != nil {
		t.Fatal(err)
	}
	pc.SetDefaults()
	hop := &grpcHop{}
	tier, err := NewGRPCTier(GRPCTierConfig{Next: "http://" + serveGRPCHop(t, hop, nil), Mode: TierSluice, Policy: pc, Client: client.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer tier.Close()
	tc := dialGRPCHop(t, serveGRPCHop(t, nil, tier.Server()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("over the stage's rate: %v, want RESOURCE_EXHAUSTED", err)
	}
	if n := hop.calls.Load(); n != 1 {
		t.Errorf("the next hop saw %d calls, want 1", n)
	}
	hop.mu.Lock()
	defer hop.mu.Unlock()
	if hop.left <= 0 || hop.left > 5*time.Second {
		t.Errorf("the deadline left at the next hop: %v", hop.left)
	}
	if _, err := NewGRPCTier(GRPCTierConfig{Next: "http://10.0.0.1:1", Mode: TierSluice}); err == nil {
		t.Error("a next hop off loopback accepted")
	}
	if _, err := NewGRPCTier(GRPCTierConfig{Next: "127.0.0.1:1", Mode: "naive"}); err == nil || !strings.Contains(err.Error(), "grpc-go, sluice") {
		t.Errorf("mode naive: %v", err)
	}
}

// Handler serves the tier's calls and /healthz on one h2c port.
func TestGRPCTierHandler(t *testing.T) {
	hop := &grpcHop{}
	tier, err := NewGRPCTier(GRPCTierConfig{Next: serveGRPCHop(t, hop, nil), Mode: GRPCTierGo, MaxAttempts: 2, MaxTokens: 10, TokenRatio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	addr := serveH2C(t, tier.Handler())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := dialGRPCHop(t, addr).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || hop.calls.Load() != 1 {
		t.Errorf("/healthz %s, next hop %d calls", res.Status, hop.calls.Load())
	}
}
