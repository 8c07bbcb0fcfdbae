// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/grpctest"
	"github.com/sluicehq/sluice/internal/policytest"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/stage"
)

// newPolicy reads src as a policy file and builds it.
func newPolicy(t testing.TB, src string) *policy.Policy { return policytest.New(t, src) }

// seen is what the test service saw of a call.
type seen struct {
	hop      sluice.Hop
	deadline time.Duration // left at the handler; 0: none
	md       metadata.MD
}

// service is grpc-go's interop TestService: UnaryCall answers at once
// (after block, when set), FullDuplexCall echoes each message.
type service struct {
	testpb.UnimplementedTestServiceServer
	calls atomic.Int64
	block chan struct{}
	last  atomic.Pointer[seen]
	// fail, when set, answers a call before the handler's work.
	fail func(n int64) error
}

func (s *service) record(ctx context.Context) {
	v := &seen{hop: sluice.HopFrom(ctx)}
	if d, ok := ctx.Deadline(); ok {
		v.deadline = time.Until(d)
	}
	v.md, _ = metadata.FromIncomingContext(ctx)
	s.last.Store(v)
}

func (s *service) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	n := s.calls.Add(1)
	s.record(ctx)
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return nil, err
		}
	}
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &testpb.SimpleResponse{}, nil
}

func (s *service) EmptyCall(ctx context.Context, in *testpb.Empty) (*testpb.Empty, error) {
	s.calls.Add(1)
	s.record(ctx)
	return &testpb.Empty{}, nil
}

func (s *service) FullDuplexCall(st testpb.TestService_FullDuplexCallServer) error {
	n := s.calls.Add(1)
	s.record(st.Context())
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return err
		}
	}
	return grpctest.Echo(st)
}

// plainService answers EmptyCall and nothing else, recording nothing:
// the benchmarks' handler.
type plainService struct {
	service
}

func (*plainService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

// interceptors returns srv's unary and stream interceptors as server
// options (nil: none).
func interceptors(srv *Server) []grpc.ServerOption {
	if srv == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(srv.UnaryInterceptor()), grpc.ChainStreamInterceptor(srv.StreamInterceptor())}
}

// bufDial starts a server on an in-memory listener and returns a client
// connection to it with the given dial options.
func bufDial(t testing.TB, srv *Server, svc testpb.TestServiceServer, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	return bufDialOpts(t, interceptors(srv), svc, dopts...)
}

// bufDialOpts is bufDial with server options.
func bufDialOpts(t testing.TB, opts []grpc.ServerOption, svc testpb.TestServiceServer, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	t.Cleanup(grpctest.Serve(lis, svc, opts...).Stop)
	dopts = append(dopts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	return dial(t, "passthrough:///bufnet", dopts...)
}

// tcpDial is bufDial over a real loopback TCP socket.
func tcpDial(t testing.TB, srv *Server, svc *service, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	return tcpDialOpts(t, interceptors(srv), svc, dopts...)
}

// tcpDialOpts serves svc with opts on a loopback TCP listener and
// returns a connection to it.
func tcpDialOpts(t testing.TB, opts []grpc.ServerOption, svc testpb.TestServiceServer, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis := grpctest.Listen(t)
	t.Cleanup(grpctest.Serve(lis, svc, opts...).Stop)
	return dial(t, lis.Addr().String(), dopts...)
}

// dial is grpctest.Dial, the connection closed when t ends.
func dial(t testing.TB, target string, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc := grpctest.Dial(t, target, dopts...)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// holdSlot starts a UnaryCall on tc and returns once st has it in
// service (the service blocks it); the call's error arrives on the
// channel when it ends.
func holdSlot(ctx context.Context, tc testpb.TestServiceClient, st *stage.Stage) <-chan error {
	done := make(chan error, 1)
	go func() { _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); done <- err }()
	for st.InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	return done
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// totals returns class c's counters of stage name after a control step
// has collected them.
func totals(pol *policy.Policy, name string, c int) stage.ClassState {
	pol.Step(time.Now().Add(time.Minute))
	return pol.Stage(name).Totals(c)
}
