// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// newClient returns a Client with cfg's changes to the defaults and the
// dial options of its interceptors.
func newClient(t testing.TB, edit func(*client.Config)) (*Client, []grpc.DialOption) {
	t.Helper()
	cfg := client.DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	c, err := NewClient(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c, []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.UnaryInterceptor()), grpc.WithChainStreamInterceptor(c.StreamInterceptor())}
}

// failFirst fails the first n calls with err.
func failFirst(n int64, err error) func(int64) error {
	return func(k int64) error {
		if k <= n {
			return err
		}
		return nil
	}
}

// A shed with a pushback is retried after at least the pushback, through
// a real sluice server: its RetryInfo is what the client reads.
func TestClientHonoursPushback(t *testing.T) {
	pol := newPolicy(t, `
stages: [{name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-concurrency, params: {limit: 1}, queue: {max: 1, timeout: 1ms}}]
reject: {retry_after: 100ms, retry_jitter: 0s}`)
	svc := &service{block: make(chan struct{})}
	c, dopts := newClient(t, nil)
	cc := bufDial(t, NewServer(pol, ServerOptions{}), svc, dopts...)
	tc := testpb.NewTestServiceClient(cc)
	ctx := ctxT(t)
	done := holdSlot(ctx, tc, pol.Stage("api"))
	// The slot is held: this call is shed, then retried after ≥ 100 ms,
	// by which time the slot is free.
	time.AfterFunc(50*time.Millisecond, func() { close(svc.block) })
	start := time.Now()
	if _, err := tc.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatalf("retried call: %v", err)
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("retried after %v, before the pushback of 100ms", el)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n := c.Dest(cc.Target()).Counts()
	if n.Retries < 1 {
		t.Errorf("counts %+v, want a retry", n)
	}
}

// UNAVAILABLE is retried; INTERNAL and RESOURCE_EXHAUSTED without a
// pushback are not; a negative grpc-retry-pushback-ms forbids a retry.
func TestClientRetriesOnlyWhatIsSafe(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		trailer   []string
		wantCalls int64
		wantCode  codes.Code
	}{
		{"unavailable", status.Error(codes.Unavailable, "x"), nil, 2, codes.OK},
		{"internal", status.Error(codes.Internal, "x"), nil, 1, codes.Internal},
		{"exhausted-no-pushback", status.Error(codes.ResourceExhausted, "x"), nil, 1, codes.ResourceExhausted},
		{"exhausted-pushback-trailer", status.Error(codes.ResourceExhausted, "x"), []string{PushbackTrailer, "10"}, 2, codes.OK},
		{"exhausted-negative-pushback", status.Error(codes.ResourceExhausted, "x"), []string{PushbackTrailer, "-1"}, 1, codes.ResourceExhausted},
		{"unavailable-negative-pushback", status.Error(codes.Unavailable, "x"), []string{PushbackTrailer, "-1"}, 1, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &service{}
			svc.fail = func(n int64) error {
				if n > 1 {
					return nil
				}
				return tc.err
			}
			_, dopts := newClient(t, nil)
			srv := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				if err != nil && tc.trailer != nil {
					_ = grpc.SetTrailer(ctx, metadata.Pairs(tc.trailer...))
				}
				return resp, err
			})
			cc := bufDialOpts(t, []grpc.ServerOption{srv}, svc, dopts...)
			_, err := testpb.NewTestServiceClient(cc).UnaryCall(ctxT(t), &testpb.SimpleRequest{})
			if status.Code(err) != tc.wantCode {
				t.Errorf("error %v, want %v", err, tc.wantCode)
			}
			if n := svc.calls.Load(); n != tc.wantCalls {
				t.Errorf("server saw %d calls, want %d", n, tc.wantCalls)
			}
		})
	}
}

// A destination that refuses most calls for overload (RESOURCE_EXHAUSTED)
// is throttled locally: refusals that never reach it, errors that wrap
// client.ErrThrottled; and retries stay within the budget.
func TestClientThrottlesAndBudgets(t *testing.T) {
	svc := &service{fail: func(int64) error { return status.Error(codes.ResourceExhausted, "busy") }}
	c, dopts := newClient(t, nil)
	cc := bufDial(t, nil, svc, dopts...)
	tc := testpb.NewTestServiceClient(cc)
	ctx := ctxT(t)
	const calls = 300
	throttled := 0
	for range calls {
		_, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{})
		if errors.Is(err, client.ErrThrottled) {
			throttled++
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("throttled call's code %v, want RESOURCE_EXHAUSTED", status.Code(err))
			}
		}
	}
	sent := svc.calls.Load()
	if throttled < calls/3 || sent+int64(throttled) != calls {
		t.Errorf("%d throttled, %d sent of %d calls: want at least a third throttled and every other call sent once", throttled, sent, calls)
	}
	if n := c.Dest(cc.Target()).Counts(); n.Retries != 0 {
		t.Errorf("retries %d of answers without a pushback", n.Retries)
	}
}

// The hop's priority and tenant travel as metadata, with the deadline
// (grpc-timeout); an attempt with less than min_remaining left is not
// sent.
func TestClientPropagatesAndRefusesLate(t *testing.T) {
	svc := &service{}
	_, dopts := newClient(t, func(c *client.Config) { c.MinRemaining = 20 * time.Millisecond })
	cc := bufDial(t, nil, svc, dopts...)
	tc := testpb.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(sluice.WithHop(ctxT(t), sluice.Hop{Priority: sluice.Sheddable, Tenant: "acme"}), 5*time.Second)
	defer cancel()
	if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	got := svc.last.Load()
	if p, tn := got.md.Get("x-sluice-priority"), got.md.Get("x-sluice-tenant"); len(p) != 1 || p[0] != sluice.Sheddable || len(tn) != 1 || tn[0] != "acme" {
		t.Errorf("metadata priority %q tenant %q", p, tn)
	}
	if got.deadline <= 0 || got.deadline > 5*time.Second {
		t.Errorf("server's deadline %v left, want ≤ 5s", got.deadline)
	}
	// The caller's own metadata wins.
	own := metadata.AppendToOutgoingContext(ctx, "x-sluice-priority", "CRITICAL")
	if _, err := tc.UnaryCall(own, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if p := svc.last.Load().md.Get("x-sluice-priority"); len(p) != 1 || p[0] != "CRITICAL" {
		t.Errorf("metadata priority %q, want the caller's CRITICAL alone", p)
	}
	late, cancel2 := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel2()
	before := svc.calls.Load()
	_, err := tc.UnaryCall(late, &testpb.SimpleRequest{})
	if !errors.Is(err, client.ErrDeadline) || status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("late call: %v, want DEADLINE_EXCEEDED wrapping client.ErrDeadline", err)
	}
	if svc.calls.Load() != before {
		t.Error("the late call reached the server")
	}
}

// A stream refused before any response message is retried, its sent
// messages replayed; one that already delivered a message is not.
func TestClientStreamRetry(t *testing.T) {
	svc := &service{fail: failFirst(1, status.Error(codes.Unavailable, "draining"))}
	c, dopts := newClient(t, nil)
	cc := bufDial(t, nil, svc, dopts...)
	st, err := testpb.NewTestServiceClient(cc).FullDuplexCall(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	// io.EOF: the first attempt already ended; its status, and the
	// retry, come with Recv (gRPC's usual pattern).
	if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte("a")}}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	out, err := st.Recv()
	if err != nil {
		t.Fatalf("Recv after a retried open: %v", err)
	}
	if string(out.GetPayload().GetBody()) != "a" {
		t.Errorf("echo %q, want the replayed message", out.GetPayload().GetBody())
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err == nil {
		t.Error("stream did not end")
	}
	if n := svc.calls.Load(); n != 2 {
		t.Errorf("server saw %d streams, want 2", n)
	}
	if n := c.Dest(cc.Target()).Counts(); n.Retries != 1 {
		t.Errorf("retries %d, want 1", n.Retries)
	}
}
