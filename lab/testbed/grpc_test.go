// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/lab/internal/grpctest"
)

// grpcQueue serves a Queue with cfg over gRPC on a loopback TCP port and
// returns a client of it.
func grpcQueue(t *testing.T, cfg QueueConfig) (*Queue, testpb.TestServiceClient, *grpc.ClientConn) {
	t.Helper()
	q, err := NewQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	cc := grpctest.Dial(t, grpctest.Serve(t, NewGRPCServer(q)))
	return q, testpb.NewTestServiceClient(cc), cc
}

// serveH2C serves h over HTTP/1.1 and unencrypted HTTP/2 (gRPC and the
// control endpoints on one port, as the testbed command serves them) on
// a loopback port until the test ends, and returns its address.
func serveH2C(t *testing.T, h http.Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Close() })
	return lis.Addr().String()
}

// Every call shape is served through the Queue's model and counted: a
// unary call's payload, header metadata and quality; a server stream's
// responses; a client stream's aggregate; a full-duplex echo.
func TestGRPCServiceShapes(t *testing.T) {
	cfg := DefaultQueueConfig()
	cfg.Service, cfg.Size = "det:2ms", 16
	q, tc, cc := grpcQueue(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var hdr metadata.MD
	resp, err := tc.UnaryCall(metadata.AppendToOutgoingContext(ctx, "x-sluice-quality", "0.5"),
		&testpb.SimpleRequest{ResponseSize: 100}, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetPayload().GetBody()); n != 100 {
		t.Errorf("payload %d bytes, want 100", n)
	}
	if d := hdr.Get("x-sluice-demand-ms"); len(d) != 1 || d[0] != "1.000" {
		t.Errorf("demand %q, want 1.000 (2 ms at quality 0.5)", d)
	}
	if u := hdr.Get("x-sluice-utilization"); len(u) != 1 {
		t.Errorf("utilization %q", u)
	}
	if _, err := tc.UnaryCall(metadata.AppendToOutgoingContext(ctx, "x-sluice-quality", "2"), &testpb.SimpleRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("quality 2: %v, want INVALID_ARGUMENT", err)
	}

	so, err := tc.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{
		ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; ; i++ {
		m, err := so.Recv()
		if err == io.EOF {
			if i != 4 {
				t.Errorf("server stream ended after %d responses, want 3", i-1)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(m.GetPayload().GetBody()) != i {
			t.Errorf("response %d: %d bytes", i, len(m.GetPayload().GetBody()))
		}
	}

	si, err := tc.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := si.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, 10)}}); err != nil {
			t.Fatal(err)
		}
	}
	agg, err := si.CloseAndRecv()
	if err != nil || agg.GetAggregatedPayloadSize() != 30 {
		t.Errorf("client stream: %v, aggregate %d, want 30", err, agg.GetAggregatedPayloadSize())
	}

	fd, err := tc.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := fd.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: int32(i + 5)}}}); err != nil {
			t.Fatal(err)
		}
		m, err := fd.Recv()
		if err != nil || len(m.GetPayload().GetBody()) != i+5 {
			t.Fatalf("duplex %d: %v", i, err)
		}
	}
	fd.CloseSend()
	if _, err := fd.Recv(); err != io.EOF {
		t.Errorf("duplex end: %v", err)
	}
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health: %v", err)
	}
	// 1 unary + 1 bad quality + 3 streamed + 1 client stream + 3 duplex.
	if st := q.Stats(); st.Requests != 9 || st.Errors != 1 || st.Rejected != 0 {
		t.Errorf("stats %+v, want 9 requests, 1 error", st)
	}
}

// A full queue is RESOURCE_EXHAUSTED with a RetryInfo of 1 s, as HTTP's
// 503 with Retry-After: 1; the Queue's workers bound the calls in service.
func TestGRPCServiceQueueLimit(t *testing.T) {
	cfg := DefaultQueueConfig()
	cfg.Workers, cfg.Service, cfg.QueueLimit = 1, "det:500ms", 1
	q, tc, _ := grpcQueue(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = tc.EmptyCall(ctx, &testpb.Empty{}) })
	}
	wg.Wait()
	var ok, full int
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted || len(st.Details()) != 1 {
			t.Fatalf("refusal %v, want RESOURCE_EXHAUSTED with RetryInfo", err)
		}
		if ri, isRI := st.Details()[0].(*errdetails.RetryInfo); !isRI || ri.GetRetryDelay().AsDuration() != time.Second {
			t.Errorf("details %v", st.Details())
		}
		full++
	}
	if ok != 2 || full != 2 {
		t.Errorf("%d served, %d refused: want 2 and 2 (one worker, one waiting)", ok, full)
	}
	if st := q.Stats(); st.Rejected != 2 {
		t.Errorf("stats %+v", st)
	}
}

// Over gRPC the chain experiments' instrumentation works as over HTTP:
// served with GRPCHandler, a call's x-lab-deadline metadata is in the
// Queue's records, and /_records, /_scale and /healthz answer over
// HTTP/1.1 on the same port.
func TestGRPCHandlerRecordsAndControl(t *testing.T) {
	cfg := DefaultQueueConfig()
	cfg.Service, cfg.Record, cfg.Control = "det:1ms", true, true
	q, err := NewQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGRPCServer(q)
	t.Cleanup(func() { g.Stop(); q.Close() })
	addr := serveH2C(t, GRPCHandler(q, g))
	cc := grpctest.Dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	user := time.Now().Add(3 * time.Second).Truncate(time.Microsecond)
	md := metadata.AppendToOutgoingContext(ctx, "x-lab-deadline", strconv.FormatInt(user.UnixNano(), 10))
	if _, err := testpb.NewTestServiceClient(cc).UnaryCall(md, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	for _, c := range []struct{ method, path string }{{http.MethodGet, "/healthz"}, {http.MethodPost, "/_scale?factor=2"}} {
		req, _ := http.NewRequestWithContext(ctx, c.method, base+c.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.ProtoMajor != 1 {
			t.Errorf("%s %s: %s %s", c.method, c.path, res.Proto, res.Status)
		}
	}
	res, err := http.Get(base + "/_records")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ParseQueueRecords(res.Body)
	res.Body.Close()
	if err != nil || len(recs) != 1 || !recs[0].UserDeadline.Equal(user) {
		t.Fatalf("records %+v (%v), want one with the user's deadline %v", recs, err, user)
	}
	if c := q.Capacity(); c <= 0 || c >= float64(cfg.Workers)*1000 {
		t.Errorf("capacity %.1f after /_scale?factor=2, want below the unscaled %d/s", c, cfg.Workers*1000)
	}
}
