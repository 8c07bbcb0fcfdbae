// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

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
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &service{}
	serve(t, lis, NewServer(pol, ServerOptions{}), svc)
	c, err := net.DialTimeout("tcp", lis.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "svc"},
		{":path", "/grpc.testing.TestService/EmptyCall"}, {"content-type", "application/grpc"}, {"te", "trailers"},
		{"grpc-timeout", "1x"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	if err := errors.Join(fr.WriteSettings(),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}),
		fr.WriteData(1, true, []byte{0, 0, 0, 0, 0})); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	got := ""
	for got == "" {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		if hf, ok := f.(*http2.HeadersFrame); ok {
			fields, err := dec.DecodeFull(hf.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fields {
				if f.Name == "grpc-status" {
					got = f.Value
				}
			}
		}
	}
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
