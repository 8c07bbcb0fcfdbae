// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// With the tap handle, a call without the headers the policy reads
// costs the tap and the interceptor no allocation; one that carries a
// hop header costs no more than without the tap handle (the tap's
// context instead of grpc-go's copy of the value), and is read from it.
func TestTapHandleAllocations(t *testing.T) {
	if raceEnabled {
		// The race detector drops sync.Pool entries at random, so the
		// pooled request views allocate.
		t.Skip("allocation counts are not meaningful under -race")
	}
	pol := newPolicy(t, `
classes: {order: [high, low], default: high, trusted_proxies: [127.0.0.0/8]}
stages: [{name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 1e9}, burst: 1000000}]`)
	tapped, plain := NewServer(pol, ServerOptions{}), NewServer(pol, ServerOptions{})
	pctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}})
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.testing.TestService/UnaryCall"}
	handler := func(ctx context.Context, _ any) (any, error) { return nil, nil }
	allocs := func(s *Server, md metadata.MD) float64 {
		ctx := metadata.NewIncomingContext(pctx, md)
		ti := &tap.Info{FullMethodName: info.FullMethod, Header: md}
		return testing.AllocsPerRun(200, func() {
			c := ctx
			if s == tapped {
				var err error
				if c, err = s.tap(ctx, ti); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.unary(c, nil, info, handler); err != nil {
				t.Fatal(err)
			}
		})
	}
	none := metadata.Pairs(":authority", "svc", "content-type", "application/grpc")
	if n := allocs(tapped, none); n != 0 {
		t.Errorf("tap + interceptor without hop metadata: %v allocs per call, want 0", n)
	}
	low := metadata.Pairs(":authority", "svc", "content-type", "application/grpc", "x-sluice-priority", "low")
	if n, m := allocs(tapped, low), allocs(plain, low); n > m {
		t.Errorf("tap + interceptor with a priority: %v allocs per call, more than the interceptor's alone (%v)", n, m)
	}
	if a := totals(pol, "api", 1).Admitted; a < 400 {
		t.Errorf("class low admitted %d, want every call with its priority (≥ 400)", a)
	}
}

// A stage that matches the host reads the call's :authority through the
// tap handle as through the interceptors alone.
func TestTapHandleHostRule(t *testing.T) {
	for _, tapped := range []bool{false, true} {
		pol := newPolicy(t, `
stages: [{name: byhost, match: {host: bufnet}, controller: static-rate, params: {rate: 0.001}, burst: 1}]`)
		sl := NewServer(pol, ServerOptions{})
		opts := interceptors(sl)
		if tapped {
			opts = sl.ServerOptions()
		}
		tc := testpb.NewTestServiceClient(bufDialOpts(t, opts, &service{}))
		if _, err := tc.EmptyCall(ctxT(t), &testpb.Empty{}); err != nil {
			t.Fatalf("tap=%v: first call: %v", tapped, err)
		}
		_, err := tc.EmptyCall(ctxT(t), &testpb.Empty{})
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("tap=%v: second call %v, want RESOURCE_EXHAUSTED from the host's stage (burst 1)", tapped, err)
		}
		if a := totals(pol, "byhost", 0).Admitted; a != 1 {
			t.Errorf("tap=%v: stage byhost admitted %d, want 1", tapped, a)
		}
	}
}
