// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/policytest"
)

// leafService works on each UnaryCall until its context ends (at most a
// minute), as a CPU-bound handler checking its context between slices
// of work does, and reports when it stopped.
type leafService struct {
	testpb.UnimplementedTestServiceServer
	ended chan time.Time
}

func (s *leafService) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
	}
	s.ended <- time.Now()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// relayService calls the next hop's UnaryCall with its call's context.
type relayService struct {
	testpb.UnimplementedTestServiceServer
	next testpb.TestServiceClient
}

func (s *relayService) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return s.next.UnaryCall(ctx, in)
}

// serveHop serves svc behind sluice's server interceptors (policy src)
// on a loopback TCP port and returns a connection to it through sluice's
// client interceptors.
func serveHop(t *testing.T, src string, svc testpb.TestServiceServer) *grpc.ClientConn {
	t.Helper()
	sl := NewServer(newPolicy(t, src), ServerOptions{})
	cl, err := NewClient(client.DefaultConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tcpDialOpts(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(sl.UnaryInterceptor())}, svc,
		grpc.WithChainUnaryInterceptor(cl.UnaryInterceptor()))
}

const cancelPolicy = `
stages: [{name: api, controller: static-concurrency, params: {limit: 100, period: 50ms}}]
`

// Cancellation crosses two gRPC hops over real sockets: a caller → hop A
// (grpcsluice's interceptors; its handler calls hop B through
// grpcsluice's client with its call's context) → hop B (a handler that
// works until its context ends). When the caller's deadline passes, or a
// caller without one gives up, B's handler sees its context end within a
// second (grpc-go carries the deadline as grpc-timeout and cancels the
// stream), where it would otherwise work a minute.
func TestCancellationCrossesTwoGRPCHops(t *testing.T) {
	leaf := &leafService{ended: make(chan time.Time, 1)}
	b := serveHop(t, cancelPolicy, leaf)
	a := serveHop(t, cancelPolicy, &relayService{next: testpb.NewTestServiceClient(b)})
	for _, deadline := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		give := time.Now().Add(300 * time.Millisecond)
		if deadline {
			ctx, cancel = context.WithDeadline(ctx, give)
		} else {
			time.AfterFunc(time.Until(give), cancel)
		}
		_, err := testpb.NewTestServiceClient(a).UnaryCall(ctx, &testpb.SimpleRequest{})
		cancel()
		if err == nil {
			t.Fatal("the call succeeded where its caller gave up")
		}
		select {
		case at := <-leaf.ended:
			late := at.Sub(give)
			t.Logf("deadline %v: hop B's handler stopped %v after the caller gave up (%v)", deadline, late.Round(time.Millisecond), status.Code(err))
			if late > time.Second {
				t.Errorf("deadline %v: hop B's handler stopped %v after its caller gave up, want within 1 s", deadline, late)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("deadline %v: hop B's handler still works 10 s after its caller gave up", deadline)
		}
	}
}

// A call a stage's hog rule cancels is answered RESOURCE_EXHAUSTED, with
// the rule's reason, and counted; its handler saw its context end.
func TestHogCancelledCallIsResourceExhausted(t *testing.T) {
	pol := policytest.Running(t, `
stages: [{name: api, controller: static-concurrency, params: {limit: 10, period: 50ms}, hog: {max_service_time: 200ms}}]
`)
	leaf := &leafService{ended: make(chan time.Time, 1)}
	sl := NewServer(pol, ServerOptions{})
	cc := tcpDialOpts(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(sl.UnaryInterceptor())}, leaf)
	start := time.Now()
	_, err := testpb.NewTestServiceClient(cc).UnaryCall(ctxT(t), &testpb.SimpleRequest{})
	<-leaf.ended
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("status %v, want RESOURCE_EXHAUSTED", err)
	}
	if n := pol.Stage("api").HogCancelled()["max_service_time"]; n != 1 {
		t.Errorf("counted %d hog cancellations, want 1", n)
	}
}
