// SPDX-License-Identifier: Apache-2.0

package grpctest

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A served health service answers over a dialled connection on
// loopback, and the dial options given are applied (an interceptor that
// sees the call).
func TestServeAndDial(t *testing.T) {
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	addr := Serve(t, g)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("address %q, want a loopback port", addr)
	}
	var seen string
	cc := Dial(t, addr, grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		seen = method
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v, %v", res, err)
	}
	if seen != healthpb.Health_Check_FullMethodName {
		t.Errorf("the interceptor saw %q, want %q", seen, healthpb.Health_Check_FullMethodName)
	}
}
