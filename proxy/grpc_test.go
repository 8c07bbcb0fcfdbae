// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/grpctest"
)

// grpcBackend is grpc-go's interop TestService: it echoes, streams, and
// answers an asked status with a detail and a trailer. It records the
// time left of each call's deadline.
type grpcBackend struct {
	testpb.UnimplementedTestServiceServer
	left chan time.Duration
}

func (b *grpcBackend) note(ctx context.Context) {
	if d, ok := ctx.Deadline(); ok {
		select {
		case b.left <- time.Until(d):
		default:
		}
	}
}

func (b *grpcBackend) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	b.note(ctx)
	return &testpb.Empty{}, nil
}

func (b *grpcBackend) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	b.note(ctx)
	if c := in.GetResponseStatus(); c != nil {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "kept"))
		st, _ := status.New(codes.Code(c.GetCode()), c.GetMessage()).WithDetails(&errdetails.ErrorInfo{Reason: "TEST"})
		return nil, st.Err()
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, in.GetResponseSize())}}, nil
}

func (b *grpcBackend) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
	for _, p := range in.GetResponseParameters() {
		if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	return nil
}

func (b *grpcBackend) StreamingInputCall(st testpb.TestService_StreamingInputCallServer) error {
	var n int32
	for {
		in, err := st.Recv()
		if err == io.EOF {
			return st.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n += int32(len(in.GetPayload().GetBody()))
	}
}

func (b *grpcBackend) FullDuplexCall(st testpb.TestService_FullDuplexCallServer) error {
	return grpctest.Echo(st)
}

// startGRPCBackend serves a grpcBackend over h2c on loopback.
func startGRPCBackend(t *testing.T) (*grpcBackend, string) {
	t.Helper()
	lis := grpctest.Listen(t)
	b := &grpcBackend{left: make(chan time.Duration, 100)}
	t.Cleanup(grpctest.Serve(lis, b).Stop)
	return b, "http://" + lis.Addr().String()
}

// grpcThrough returns a client of the proxy's listener over h2c and a
// context for its calls that ends after d (or with the test).
func grpcThrough(t *testing.T, addr string, d time.Duration) (testpb.TestServiceClient, context.Context) {
	t.Helper()
	cc := grpctest.Dial(t, addr)
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return testpb.NewTestServiceClient(cc), ctx
}

// The proxy forwards gRPC over h2c on both sides: all four call shapes,
// a status with its details and trailers intact, and the deadline as the
// time left.
func TestGRPCThroughProxyH2C(t *testing.T) {
	be, url := startGRPCBackend(t)
	p := startProxy(t, baseConfig(url, ""))
	tc, ctx := grpcThrough(t, p.addr, 5*time.Second)

	resp, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 1000})
	if err != nil || len(resp.GetPayload().GetBody()) != 1000 {
		t.Fatalf("unary: %v", err)
	}
	select {
	case left := <-be.left:
		if left <= 0 || left > 5*time.Second {
			t.Errorf("backend's deadline: %v left, want (0, 5s]", left)
		}
	default:
		t.Error("the call reached the backend without a deadline")
	}

	var tr metadata.MD
	_, err = tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.NotFound), Message: "no such thing"}}, grpc.Trailer(&tr))
	st := status.Convert(err)
	if st.Code() != codes.NotFound || st.Message() != "no such thing" || len(st.Details()) != 1 {
		t.Errorf("status through the proxy: %v, details %v", err, st.Details())
	}
	if v := tr.Get("x-trailer"); len(v) != 1 || v[0] != "kept" {
		t.Errorf("trailer x-trailer %q", v)
	}

	so, err := tc.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		m, err := so.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("server stream: %v", err)
		}
		n++
		if len(m.GetPayload().GetBody()) != n {
			t.Errorf("response %d: %d bytes", n, len(m.GetPayload().GetBody()))
		}
	}
	if n != 3 {
		t.Errorf("server stream: %d responses, want 3", n)
	}

	si, err := tc.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := si.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, 100)}}); err != nil {
			t.Fatal(err)
		}
	}
	if agg, err := si.CloseAndRecv(); err != nil || agg.GetAggregatedPayloadSize() != 400 {
		t.Errorf("client stream: %v, %d", err, agg.GetAggregatedPayloadSize())
	}

	fd, err := tc.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		body := []byte{byte(i), byte(i)}
		if err := fd.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
			t.Fatal(err)
		}
		m, err := fd.Recv()
		if err != nil || string(m.GetPayload().GetBody()) != string(body) {
			t.Fatalf("duplex %d: %v", i, err)
		}
	}
	if err := fd.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := fd.Recv(); err != io.EOF {
		t.Errorf("duplex end: %v", err)
	}
}

// A call its stage refuses is answered as gRPC: RESOURCE_EXHAUSTED with
// a RetryInfo and the pushback trailer, not an HTTP 503 (which a gRPC
// client would read as UNAVAILABLE); stages select methods.
func TestGRPCRejectionShapedAsGRPC(t *testing.T) {
	_, url := startGRPCBackend(t)
	p := startProxy(t, baseConfig(url, `stages:
  - {name: empty, match: {grpc_method: /grpc.testing.TestService/EmptyCall}, controller: static-rate, params: {rate: 0.001}, burst: 1}
reject: {retry_after: 2s, retry_after_max: 2s, retry_jitter: 0s}
`))
	tc, ctx := grpcThrough(t, p.addr, 5*time.Second)
	if _, err := tc.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	var hdr, tr metadata.MD
	_, err := tc.EmptyCall(ctx, &testpb.Empty{}, grpc.Header(&hdr), grpc.Trailer(&tr))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("refused call: %v, want RESOURCE_EXHAUSTED", err)
	}
	if delay := grpctest.RetryDelay(st); delay != 2*time.Second {
		t.Errorf("RetryInfo delay %v, want 2s (details %v)", delay, st.Details())
	}
	if v := tr.Get("grpc-retry-pushback-ms"); len(v) != 1 || v[0] != "2000" {
		t.Errorf("pushback trailer %q", v)
	}
	// Other methods are in no stage: not refused.
	for range 5 {
		if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
			t.Fatalf("UnaryCall: %v", err)
		}
	}
	// A deadline already too short is DEADLINE_EXCEEDED, never
	// RESOURCE_EXHAUSTED.
	short, cancel2 := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel2()
	if _, err := tc.UnaryCall(short, &testpb.SimpleRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("expired call: %v", err)
	}
}

// The proxy forwards gRPC over TLS on both sides (ALPN h2).
func TestGRPCThroughProxyTLS(t *testing.T) {
	certFile, keyFile, pool := localhostCert(t)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	must(t, err)
	lis := grpctest.Listen(t)
	t.Cleanup(grpctest.Serve(lis, &grpcBackend{left: make(chan time.Duration, 100)},
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))).Stop)
	p := startProxy(t, tlsListenerConfig(certFile, keyFile, "https://"+lis.Addr().String()))
	// The test's own CA for the upstream, as a system CA would be.
	p.srv.h.gen.Load().pool.transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	cc := grpctest.Dial(t, p.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	defer cc.Close()
	tc := testpb.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 10}); err != nil {
		t.Fatalf("unary over TLS: %v", err)
	}
	fd, err := tc.FullDuplexCall(ctx)
	must(t, err)
	for i := range 3 {
		must(t, fd.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte{byte(i)}}}))
		if _, err := fd.Recv(); err != nil {
			t.Fatalf("duplex over TLS: %v", err)
		}
	}
	must(t, fd.CloseSend())
	if _, err := fd.Recv(); err != io.EOF {
		t.Errorf("duplex end: %v", err)
	}
}

// stillServes checks that the proxy answers a gRPC call.
func stillServes(t *testing.T, addr string) {
	t.Helper()
	tc, ctx := grpcThrough(t, addr, 5*time.Second)
	if _, err := tc.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Fatalf("the proxy no longer serves: %v", err)
	}
}

// Rapid reset (CVE-2023-44487): a client that opens streams and resets
// them at once, as fast as it can for at most 2 s, does not take the
// proxy down; net/http's HTTP/2 server bounds the handlers such a
// connection can start and closes it.
func TestH2CRapidResetSurvived(t *testing.T) {
	_, url := startGRPCBackend(t)
	p := startProxy(t, baseConfig(url, ""))
	c, fr := grpctest.H2C(t, p.addr)
	defer c.Close()
	block := grpctest.Headers(t, "proxy")
	deadline := time.Now().Add(2 * time.Second)
	_ = c.SetWriteDeadline(deadline)
	sent := 0
	for id := uint32(1); time.Now().Before(deadline) && id < 1<<20; id += 2 {
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}) != nil ||
			fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the server closed the connection
		}
		sent++
	}
	t.Logf("rapid reset: %d streams opened and reset before the write failed or 2 s passed", sent)
	stillServes(t, p.addr)
}

// CONTINUATION flood (CVE-2023-45288): a header block that never ends is
// cut at the listener's max_header_bytes and the connection closed,
// within a bounded time, and the proxy still serves.
func TestH2CContinuationFloodCut(t *testing.T) {
	_, url := startGRPCBackend(t)
	p := startProxy(t, baseConfig(url, ""))
	c, fr := grpctest.H2C(t, p.addr)
	defer c.Close()
	must(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: grpctest.Headers(t, "proxy"), EndHeaders: false}))
	junk := grpctest.Headers(t, "proxy", "x-junk", strings.Repeat("j", 4000))
	deadline := time.Now().Add(3 * time.Second)
	_ = c.SetDeadline(deadline)
	written := 0
	closed := make(chan struct{})
	go func() { // the server's frames: it closes the connection
		defer close(closed)
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	for time.Now().Before(deadline) {
		if fr.WriteContinuation(1, false, junk) != nil {
			break
		}
		written += len(junk)
	}
	select {
	case <-closed:
	case <-time.After(4 * time.Second):
		t.Fatal("the connection is still open")
	}
	if written > 8<<20 {
		t.Errorf("the proxy read %d bytes of one header block before closing", written)
	}
	t.Logf("CONTINUATION flood: %d bytes written before the connection closed", written)
	stillServes(t, p.addr)
}

// A call whose grpc-status is the service's failure (in the trailers,
// under HTTP 200) counts as failed for the stage, as a 5xx does; the
// caller's errors do not.
func TestGRPCStatusIsTheOutcome(t *testing.T) {
	_, url := startGRPCBackend(t)
	p := startProxy(t, baseConfig(url, `stages:
  - {name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 100000}}
`))
	tc, ctx := grpcThrough(t, p.addr, 5*time.Second)
	for _, c := range []codes.Code{codes.Internal, codes.Unavailable, codes.NotFound, codes.OK} {
		req := &testpb.SimpleRequest{}
		if c != codes.OK {
			req.ResponseStatus = &testpb.EchoStatus{Code: int32(c), Message: "x"}
		}
		if _, err := tc.UnaryCall(ctx, req); status.Code(err) != c {
			t.Fatalf("code %v, want %v", status.Code(err), c)
		}
	}
	eventually(t, "two failures counted", func() bool {
		m := p.metricsText(t)
		return strings.Contains(m, `sluice_requests_total{class="default",outcome="error",stage="api"} 2`) &&
			strings.Contains(m, `sluice_requests_total{class="default",outcome="completed",stage="api"} 4`)
	})
}

// A malformed grpc-timeout is treated as absent and counted: the call is
// proxied without a deadline, and sluice_hop_invalid_total{header="timeout"}
// counts it.
func TestGRPCMalformedTimeoutCounted(t *testing.T) {
	_, url := startGRPCBackend(t)
	p := startProxy(t, baseConfig(url, ""))
	c, fr := grpctest.H2C(t, p.addr)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	grpctest.WriteCall(t, fr, 1, grpctest.Headers(t, "proxy", "grpc-timeout", "1x"))
	grpcStatus := grpctest.ReadStatus(t, fr)
	if grpcStatus != "0" {
		t.Errorf("grpc-status %q, want 0: a malformed grpc-timeout is no deadline", grpcStatus)
	}
	if m := p.metricsText(t); !strings.Contains(m, `sluice_hop_invalid_total{header="timeout"} 1`) {
		t.Errorf("the malformed grpc-timeout is not counted:\n%s", grepLines(m, "sluice_hop_invalid_total"))
	}
}

// The body deadlines hold for an HTTP/2 stream as for HTTP/1 (there a
// timer of the body's own watches them): a client stream whose messages
// keep coming lives longer than read_body_timeout, one that stalls is cut
// after about read_body_timeout.
func TestGRPCStreamBodyTimeout(t *testing.T) {
	_, url := startGRPCBackend(t)
	p := startProxy(t, listenerConfig("read_body_timeout: 300ms, read_body_min_rate: -1", url))
	tc, ctx := grpcThrough(t, p.addr, 10*time.Second)
	msg := &testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, 10)}}

	st, err := tc.StreamingInputCall(ctx)
	must(t, err)
	for range 8 { // 8 × 100 ms: longer than read_body_timeout, never a gap as long
		must(t, st.Send(msg))
		time.Sleep(100 * time.Millisecond)
	}
	res, err := st.CloseAndRecv()
	if err != nil || res.GetAggregatedPayloadSize() != 80 {
		t.Fatalf("a stream whose messages keep coming: %v, %d bytes", err, res.GetAggregatedPayloadSize())
	}

	st, err = tc.StreamingInputCall(ctx)
	must(t, err)
	must(t, st.Send(msg))
	start := time.Now()
	done := make(chan error, 1)
	go func() { // the stall: nothing more is sent; the proxy ends the call
		var m testpb.StreamingInputCallResponse
		done <- st.RecvMsg(&m)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a stalled stream ended OK")
		}
		if el := time.Since(start); el < 250*time.Millisecond || el > 3*time.Second {
			t.Errorf("the stalled stream ended after %v, want about 300ms", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled stream was not cut")
	}
	eventually(t, "the stall counted as a body timeout", func() bool {
		return strings.Contains(p.metricsText(t), `proxy_client_refused_total{reason="body_timeout",status="408"} 1`)
	})
}

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
