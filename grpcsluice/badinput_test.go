// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/grpctest"
	"github.com/sluicehq/sluice/internal/metrictest"
)

// Malformed hop metadata from a trusted peer (a priority that names no
// class, an x-sluice-timeout that does not parse) is treated as absent
// and counted: the call is served in the default class.
func TestMalformedHopMetadataCounted(t *testing.T) {
	pol := newPolicy(t, `
classes: {order: [high, low], default: high, trusted_proxies: [127.0.0.0/8]}
stages: [{name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 1000}}]`)
	svc := &service{}
	cc := tcpDial(t, NewServer(pol, ServerOptions{}), svc)
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "x-sluice-priority", "no such class", "x-sluice-timeout", "12 parsecs")
	if _, err := testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if a := totals(pol, "api", 0).Admitted; a != 1 {
		t.Errorf("default class admitted %d, want 1", a)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pol.Collector())
	for h, want := range map[string]float64{"priority": 1, "tenant": 0, "timeout": 1} {
		m := metrictest.Metric(t, reg, "sluice_hop_invalid_total", map[string]string{"header": h})
		if m == nil || m.GetCounter().GetValue() != want {
			t.Errorf("sluice_hop_invalid_total{header=%q}: %v, want %v", h, m, want)
		}
	}
}

// Metadata over a grpc-go server's MaxHeaderListSize never reaches the
// interceptors: grpc-go's client reads the limit from the server's
// SETTINGS and fails the call itself, INTERNAL with a message naming the
// limit; nothing is admitted or counted. (A client that sends it anyway
// gets its stream reset by grpc-go's server, FRAME_SIZE_ERROR.)
func TestOversizeMetadataIsGRPCGos(t *testing.T) {
	pol := newPolicy(t, `
stages: [{name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 1000}}]`)
	sl := NewServer(pol, ServerOptions{})
	svc := &service{}
	cc := bufDialOpts(t, []grpc.ServerOption{grpc.MaxHeaderListSize(4096),
		grpc.ChainUnaryInterceptor(sl.UnaryInterceptor())}, svc)
	tc := testpb.NewTestServiceClient(cc)
	if _, err := tc.UnaryCall(ctxT(t), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "x-big", strings.Repeat("m", 5000))
	_, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{})
	if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "header list size") {
		t.Errorf("oversize metadata: %v, want INTERNAL naming the header list size", err)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("the service saw %d calls, want 1", n)
	}
	if a := totals(pol, "api", 0).Admitted; a != 1 {
		t.Errorf("admitted %d, want 1", a)
	}
}

// A malformed grpc-timeout never reaches the interceptors either:
// grpc-go's server answers the call INTERNAL ("malformed grpc-timeout")
// itself, and nothing is admitted.
func TestMalformedGRPCTimeoutIsGRPCGos(t *testing.T) {
	pol := newPolicy(t, `
stages: [{name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 1000}}]`)
	lis := grpctest.Listen(t)
	svc := &service{}
	t.Cleanup(grpctest.Serve(lis, svc, interceptors(NewServer(pol, ServerOptions{}))...).Stop)
	c, fr := grpctest.H2C(t, lis.Addr().String())
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	grpctest.WriteCall(t, fr, 1, grpctest.Headers(t, "svc", "grpc-timeout", "1x"))
	got := grpctest.ReadStatus(t, fr)
	if got != strconv.Itoa(int(codes.Internal)) {
		t.Errorf("grpc-status %s, want %d (INTERNAL)", got, codes.Internal)
	}
	if n := svc.calls.Load(); n != 0 {
		t.Errorf("the service saw %d calls", n)
	}
	if a := totals(pol, "api", 0).Admitted; a != 0 {
		t.Errorf("admitted %d, want 0", a)
	}
}
