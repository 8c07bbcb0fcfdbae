// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Oversize metadata is refused with a status a grpc-go client reads as
// what it is: RESOURCE_EXHAUSTED naming the limit, with a pushback that
// forbids a retry, from the proxy for a header list over max_header_bytes
// (up to the transport's limit, twice that), and INTERNAL from the client
// itself past the limit the proxy advertises. Nothing reaches the backend
// and the connection goes on serving.
func TestGRPCOversizeMetadata(t *testing.T) {
	b, url := startGRPCBackend(t)
	p := startProxy(t, listenerConfig("max_header_bytes: 8192, max_header_line_bytes: 4096", url))
	tc, ctx := grpcThrough(t, p.addr, 10*time.Second)
	// A first call: the client has the proxy's SETTINGS before the
	// oversize ones.
	if _, err := tc.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	<-b.left
	meta := func(n, size int) context.Context {
		kv := []string{}
		for i := range n {
			kv = append(kv, "x-big-"+string(rune('a'+i)), strings.Repeat("m", size))
		}
		return metadata.AppendToOutgoingContext(ctx, kv...)
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		code codes.Code
		msg  string
	}{
		{"list over max_header_bytes", meta(4, 3000), codes.ResourceExhausted, "request header of "},
		{"line over max_header_line_bytes", meta(1, 5000), codes.ResourceExhausted, "header line X-Big-A is longer than 4096 bytes"},
		{"list over the transport's limit", meta(8, 3000), codes.Internal, "header list size to send violates the maximum size"},
	} {
		var tr metadata.MD
		_, err := tc.EmptyCall(c.ctx, &testpb.Empty{}, grpc.Trailer(&tr))
		st := status.Convert(err)
		if st.Code() != c.code || !strings.Contains(st.Message(), c.msg) {
			t.Errorf("%s: %v, want %v with %q", c.name, err, c.code, c.msg)
		}
		if c.code == codes.ResourceExhausted {
			if v := tr.Get("grpc-retry-pushback-ms"); len(v) != 1 || v[0] != "-1" {
				t.Errorf("%s: pushback %q, want -1 (do not retry)", c.name, v)
			}
		}
	}
	select {
	case d := <-b.left:
		t.Errorf("an oversize call reached the backend (%v left)", d)
	default:
	}
	if _, err := tc.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Errorf("after the refusals: %v", err)
	}
	m := p.metricsText(t)
	for _, want := range []string{`proxy_client_refused_total{reason="header_too_large",status="431"} 1`,
		`proxy_client_refused_total{reason="header_line_too_long",status="431"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("missing %s:\n%s", want, grepLines(m, "proxy_client_refused_total"))
		}
	}
}

// A malformed priority in a call's metadata from a trusted peer is
// treated as absent (the call is served in the default class) and
// counted in sluice_hop_invalid_total{header="priority"}; so is a
// malformed x-sluice-timeout.
func TestGRPCMalformedPriorityCounted(t *testing.T) {
	_, url := startGRPCBackend(t)
	p := startProxy(t, baseConfig(url, `classes: {order: [high, low], default: high, trusted_proxies: [127.0.0.1/32]}
stages:
  - {name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 100000}}
`))
	tc, ctx := grpcThrough(t, p.addr, 5*time.Second)
	bad := metadata.AppendToOutgoingContext(ctx, "x-sluice-priority", "no such class", "x-sluice-timeout", "12 parsecs")
	if _, err := tc.EmptyCall(bad, &testpb.Empty{}); err != nil {
		t.Fatalf("a call with malformed hop metadata: %v, want it served", err)
	}
	eventually(t, "the call served in the default class and both values counted", func() bool {
		m := p.metricsText(t)
		return strings.Contains(m, `sluice_hop_invalid_total{header="priority"} 1`) &&
			strings.Contains(m, `sluice_hop_invalid_total{header="timeout"} 1`) &&
			strings.Contains(m, `sluice_requests_total{class="high",outcome="completed",stage="api"} 1`)
	})
}

// A request over HTTP/2 with prior knowledge (h2c) that is not gRPC is
// proxied as any request: the backend's answer comes back over HTTP/2.
func TestH2CPlainRequestProxied(t *testing.T) {
	rec := &recorder{}
	be := backend(t, rec.handler)
	p := startProxy(t, baseConfig(be.URL, ""))
	var prot http.Protocols
	prot.SetUnencryptedHTTP2(true)
	cl := &http.Client{Transport: &http.Transport{Protocols: &prot}, Timeout: 5 * time.Second}
	defer cl.CloseIdleConnections()
	res, err := cl.Post(p.url+"/grpc.testing.TestService/EmptyCall", "text/plain", strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
		t.Errorf("%s %d %q, want HTTP/2.0 200", res.Proto, res.StatusCode, body)
	}
	if got, _ := rec.requests(); len(got) != 1 || got[0] != "POST /grpc.testing.TestService/EmptyCall abc" {
		t.Errorf("backend got %q", got)
	}
}
