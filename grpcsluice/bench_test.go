// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"
)

// BenchmarkUnaryInterceptor is the server interceptor's own cost per
// unary call, without grpc's: a call with a peer and incoming metadata
// (no hop metadata), through a stage with a static-rate gate that admits
// everything, against the bare handler; "sluice-tap" adds the tap handle
// (TapHandle) and counts its cost in each call.
func BenchmarkUnaryInterceptor(b *testing.B) {
	pol := newPolicy(b, `
stages: [{name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 1e9}, burst: 1000000}]`)
	s := NewServer(pol, ServerOptions{})
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}})
	md := metadata.Pairs(":authority", "svc", "content-type", "application/grpc", "user-agent", "grpc-go/1.85.0")
	ctx = metadata.NewIncomingContext(ctx, md)
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.testing.TestService/UnaryCall"}
	resp := &testpb.SimpleResponse{}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	req := &testpb.SimpleRequest{}
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = handler(ctx, req)
		}
	})
	b.Run("sluice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.unary(ctx, req, info, handler); err != nil {
				b.Fatal(err)
			}
		}
	})
	st := NewServer(pol, ServerOptions{})
	tinfo := &tap.Info{FullMethodName: info.FullMethod, Header: md}
	tapped := func() error { // a call: the tap handle, then the interceptor
		tctx, err := st.tap(ctx, tinfo)
		if err == nil {
			_, err = st.unary(tctx, req, info, handler)
		}
		return err
	}
	b.Run("sluice-tap", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := tapped(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sluice-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.unary(ctx, req, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("sluice-tap-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := tapped(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkUnaryCall is a whole unary call, client to handler and back,
// through grpc-go over an in-memory connection, without and with the
// server interceptor: the difference in allocs/op is the interceptor's
// allocations beyond grpc-go's own (0), the difference in ns/op its cost
// in a real server's context (noisy: a call is tens of µs).
func BenchmarkUnaryCall(b *testing.B) {
	pol := newPolicy(b, `
stages: [{name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 1e9}, burst: 1000000}]`)
	for _, c := range []struct {
		name string
		srv  *Server
	}{{"bare", nil}, {"sluice", NewServer(pol, ServerOptions{})}} {
		b.Run(c.name, func(b *testing.B) {
			tc := testpb.NewTestServiceClient(bufDial(b, c.srv, &plainService{}))
			ctx := context.Background()
			req := &testpb.Empty{}
			if _, err := tc.EmptyCall(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := tc.EmptyCall(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
