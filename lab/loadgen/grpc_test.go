// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/lab/internal/grpctest"
)

// classService answers by the call's x-sluice-priority metadata: "low" is
// RESOURCE_EXHAUSTED, "slow" waits for the call's deadline, anything
// else OK with the asked payload. It records each call's time left.
type classService struct {
	testpb.UnimplementedTestServiceServer
	mu    sync.Mutex
	left  []time.Duration
	class map[string]int
}

func (s *classService) answer(ctx context.Context) error {
	c := metadata.ValueFromIncomingContext(ctx, "x-sluice-priority")
	d, ok := ctx.Deadline()
	s.mu.Lock()
	if ok {
		s.left = append(s.left, time.Until(d))
	}
	if len(c) == 1 {
		s.class[c[0]]++
	}
	s.mu.Unlock()
	switch {
	case len(c) == 1 && c[0] == "low":
		return status.Error(codes.ResourceExhausted, "shed")
	case len(c) == 1 && c[0] == "slow":
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (s *classService) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if err := s.answer(ctx); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, in.GetResponseSize())}}, nil
}

func (s *classService) FullDuplexCall(st testpb.TestService_FullDuplexCallServer) error {
	if err := s.answer(st.Context()); err != nil {
		return err
	}
	for {
		in, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, in.GetResponseParameters()[0].GetSize())}}); err != nil {
			return err
		}
	}
}

func startClassService(t *testing.T) (*classService, string) {
	t.Helper()
	svc := &classService{class: map[string]int{}}
	g := grpc.NewServer()
	testpb.RegisterTestServiceServer(g, svc)
	return svc, "http://" + grpctest.Serve(t, g)
}

// Open loop over gRPC: every call is counted by its status (OK, a
// RESOURCE_EXHAUSTED rejection, a timeout at the deadline), classes
// travel as metadata and the deadline as grpc-timeout.
func TestGRPCOpenLoop(t *testing.T) {
	svc, target := startClassService(t)
	var log recordLog
	cfg := Config{Target: target, Mode: ModeOpen, Duration: time.Second, Seed: 1, Timeout: 200 * time.Millisecond,
		Workload: mustURLs(t, DefaultGRPCMethod+":1"), Arrivals: mustConstant(t, "100"),
		Classes: []Weighted{{Name: "high", Weight: 2}, {Name: "low", Weight: 1}, {Name: "slow", Weight: 1}}, ClassHeader: "X-Sluice-Priority",
		GRPC: &GRPCConfig{ResponseSize: 10}, OnRequest: log.add}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tot := res.Total
	if tot.Offered < 95 || tot.Offered > 100 || tot.OK+tot.Rejected+tot.Timeouts != tot.Offered || tot.Errors != 0 {
		t.Fatalf("counts %+v: want about 100 calls, each OK, rejected or timed out", tot)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	// Only a high call can be OK and only a low one rejected; on a loaded
	// machine some of them may also time out.
	if tot.OK == 0 || tot.Rejected == 0 || tot.Timeouts == 0 || tot.OK > int64(svc.class["high"]) ||
		tot.Rejected > int64(svc.class["low"]) || int64(svc.class["slow"]) > tot.Timeouts {
		t.Errorf("server saw classes %v; client counted ok %d rejected %d timeouts %d", svc.class, tot.OK, tot.Rejected, tot.Timeouts)
	}
	if tot.Bytes != 10*tot.OK {
		t.Errorf("bytes %d, want 10 per OK call (%d)", tot.Bytes, tot.OK)
	}
	for _, l := range svc.left {
		if l > 200*time.Millisecond {
			t.Fatalf("a call arrived with %v left, more than its 200ms", l)
		}
	}
	if len(svc.left) == 0 {
		t.Error("no call carried a deadline")
	}
	codesSeen := map[string]int{}
	for _, r := range log.all() {
		codesSeen[r.GRPCCode]++
	}
	if codesSeen["OK"] == 0 || codesSeen["RESOURCE_EXHAUSTED"] == 0 || codesSeen["DEADLINE_EXCEEDED"] == 0 {
		t.Errorf("records' codes %v", codesSeen)
	}
}

// Closed loop over gRPC with bidirectional streams: each user's call
// exchanges Responses messages.
func TestGRPCClosedLoopStreams(t *testing.T) {
	_, target := startClassService(t)
	cfg := Config{Target: target, Mode: ModeClosed, Duration: 300 * time.Millisecond, Seed: 1,
		Workload: mustURLs(t, "/grpc.testing.TestService/FullDuplexCall:1"), Users: mustSchedule(t, "0s:4"), Think: mustDist(t, "det:10ms"),
		GRPC: &GRPCConfig{ResponseSize: 7, Responses: 3, Conns: 2}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total.OK < 4 || res.Total.Errors != 0 || res.Total.Bytes != 21*res.Total.OK {
		t.Errorf("counts %+v: want ≥ 4 OK streams of 3×7 bytes and no error", res.Total)
	}
}

// DialOptions reach every connection: an interceptor given there sees
// every call.
func TestGRPCDialOptions(t *testing.T) {
	_, target := startClassService(t)
	var seen atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		seen.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cfg := Config{Target: target, Mode: ModeClosed, Duration: 200 * time.Millisecond, Seed: 1,
		Workload: mustURLs(t, DefaultGRPCMethod+":1"), Users: mustSchedule(t, "0s:2"), Think: mustDist(t, "det:10ms"),
		GRPC: &GRPCConfig{Conns: 2, DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}}}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total.OK == 0 || seen.Load() != res.Total.Offered {
		t.Errorf("the interceptor saw %d calls of %d (%d OK)", seen.Load(), res.Total.Offered, res.Total.OK)
	}
}

func TestGRPCConfigErrors(t *testing.T) {
	for _, g := range []GRPCConfig{{ResponseSize: -1}, {Responses: -1}, {Conns: 100}} {
		cfg := Config{Target: "http://127.0.0.1:1", Mode: ModeOpen, Duration: time.Second,
			Workload: mustURLs(t, DefaultGRPCMethod+":1"), Arrivals: mustConstant(t, "1"), GRPC: &g}
		cfg.SetDefaults()
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v: no error", g)
		}
	}
	if err := CheckGRPCMethod("--paths", "/other.Service/UnaryCall"); err == nil {
		t.Error("another service: no error")
	}
	if err := CheckGRPCMethod("--paths", "UnaryCall"); err != nil {
		t.Error(err)
	}
}
