// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// GRPCService serves a Queue over gRPC: grpc-go's own interop test
// service, grpc.testing.TestService (google.golang.org/grpc/interop/
// grpc_testing, generated code shipped in the grpc module at the version
// go.mod pins: protoc-gen-go v1.36.12, protoc-gen-go-grpc v1.6.2), with
// the Queue's capacity model behind every call. Each unit of work is one
// Queue.Serve:
//
//   - EmptyCall and UnaryCall: one;
//   - StreamingOutputCall: one per response (ResponseParameters, or one);
//   - StreamingInputCall: one, after the last request message;
//   - FullDuplexCall and HalfDuplexCall: one per response to each request
//     message.
//
// The quality is the x-sluice-quality metadata (X-Sluice-Quality's
// rules); a response's payload is the request's response_size bytes, or
// the Queue's Size. A full queue is RESOURCE_EXHAUSTED with a RetryInfo
// of 1 s (HTTP's 503 with Retry-After: 1), a closed one UNAVAILABLE.
// Responses carry the header metadata x-sluice-utilization and
// x-sluice-demand-ms (of the first unit). Calls are counted in the
// Queue's Stats.
type GRPCService struct {
	testpb.UnimplementedTestServiceServer
	q *Queue
}

// NewGRPCService returns the gRPC service of q.
func NewGRPCService(q *Queue) *GRPCService { return &GRPCService{q: q} }

// labDeadlineMD is LabDeadlineHeader as metadata: the deadline of the
// user request a call serves, kept in the Queue's records (Record) as
// over HTTP.
var labDeadlineMD = strings.ToLower(LabDeadlineHeader)

// GRPCHandler serves q's gRPC server g and q's HTTP endpoints on one
// port, for an http.Server that speaks HTTP/1.1 and h2c: a gRPC call
// (HTTP/2, Content-Type application/grpc…) goes to g (grpc.Server's
// ServeHTTP), every other request to q (/healthz, /_meta, and /_records
// and /_scale when Record and Control are set), so that the chain
// experiments' instrumentation works the same over gRPC.
func GRPCHandler(q *Queue, g *grpc.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			g.ServeHTTP(w, r)
			return
		}
		q.ServeHTTP(w, r)
	})
}

// NewGRPCServer returns a gRPC server with opts serving q's GRPCService
// and the health service (grpc.health.v1, SERVING).
func NewGRPCServer(q *Queue, opts ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(g, NewGRPCService(q))
	healthpb.RegisterHealthServer(g, health.NewServer())
	return g
}

// qualityMD reads the quality of a call's metadata.
func qualityMD(ctx context.Context) (float64, error) {
	v := metadata.ValueFromIncomingContext(ctx, "x-sluice-quality")
	if len(v) == 0 {
		return 1, nil
	}
	return ParseQuality(http.Header{QualityHeader: v[:1]})
}

// unit serves one unit of work of a call, counting it; hdr, when not
// nil, receives the first unit's header metadata.
func (s *GRPCService) unit(ctx context.Context, hdr *metadata.MD) error {
	quality, err := qualityMD(ctx)
	if err != nil {
		s.q.ctr.count(http.StatusBadRequest)
		return status.Error(codes.InvalidArgument, err.Error())
	}
	res, err := s.q.Serve(ctx, quality, labDeadline(http.Header{LabDeadlineHeader: metadata.ValueFromIncomingContext(ctx, labDeadlineMD)}))
	if hdr != nil && *hdr == nil {
		*hdr = metadata.Pairs("x-sluice-utilization", formatUtilization(res.Utilization),
			"x-sluice-demand-ms", strconv.FormatFloat(res.Demand*1e3, 'f', 3, 64))
	}
	switch {
	case errors.Is(err, ErrQueueFull):
		s.q.ctr.count(http.StatusServiceUnavailable)
		st, _ := status.New(codes.ResourceExhausted, "queue backend full").
			WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
		return st.Err()
	case err != nil:
		s.q.ctr.count(http.StatusServiceUnavailable)
		return status.Error(codes.Unavailable, err.Error())
	}
	s.q.ctr.count(http.StatusOK)
	return nil
}

// payload returns n bytes (n ≤ 0: the Queue's Size), bounded.
func (s *GRPCService) payload(n int32) *testpb.Payload {
	if n <= 0 || int(n) > maxQueueBody {
		return &testpb.Payload{Body: s.q.body}
	}
	if int(n) <= len(s.q.body) {
		return &testpb.Payload{Body: s.q.body[:n]}
	}
	return &testpb.Payload{Body: make([]byte, n)}
}

// EmptyCall is one unit of work.
func (s *GRPCService) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	var hdr metadata.MD
	err := s.unit(ctx, &hdr)
	_ = grpc.SetHeader(ctx, hdr)
	if err != nil {
		return nil, err
	}
	return &testpb.Empty{}, nil
}

// UnaryCall is one unit of work answered with response_size bytes.
func (s *GRPCService) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if c := in.GetResponseStatus(); c != nil && c.GetCode() != 0 {
		return nil, status.Error(codes.Code(c.GetCode()), c.GetMessage())
	}
	var hdr metadata.MD
	err := s.unit(ctx, &hdr)
	_ = grpc.SetHeader(ctx, hdr)
	if err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{Payload: s.payload(in.GetResponseSize())}, nil
}

// respond sends one unit's response per parameter (at least one).
func (s *GRPCService) respond(st grpc.ServerStream, params []*testpb.ResponseParameters, hdr *metadata.MD) error {
	n := max(len(params), 1)
	for i := range n {
		var size int32
		if i < len(params) {
			size = params[i].GetSize()
		}
		if err := s.unit(st.Context(), hdr); err != nil {
			return err
		}
		if *hdr != nil {
			_ = st.SetHeader(*hdr)
		}
		if err := st.SendMsg(&testpb.StreamingOutputCallResponse{Payload: s.payload(size)}); err != nil {
			return err
		}
	}
	return nil
}

// StreamingOutputCall serves one unit per response.
func (s *GRPCService) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
	var hdr metadata.MD
	return s.respond(st, in.GetResponseParameters(), &hdr)
}

// StreamingInputCall serves one unit after the last request message.
func (s *GRPCService) StreamingInputCall(st testpb.TestService_StreamingInputCallServer) error {
	var total int32
	if err := recvEach(st.Recv, func(in *testpb.StreamingInputCallRequest) error {
		total += int32(len(in.GetPayload().GetBody()))
		return nil
	}); err != nil {
		return err
	}
	var hdr metadata.MD
	err := s.unit(st.Context(), &hdr)
	_ = st.SetHeader(hdr)
	if err != nil {
		return err
	}
	return st.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: total})
}

// FullDuplexCall answers each request message as it comes.
func (s *GRPCService) FullDuplexCall(st testpb.TestService_FullDuplexCallServer) error {
	var hdr metadata.MD
	return recvEach(st.Recv, func(in *testpb.StreamingOutputCallRequest) error {
		if c := in.GetResponseStatus(); c != nil && c.GetCode() != 0 {
			return status.Error(codes.Code(c.GetCode()), c.GetMessage())
		}
		return s.respond(st, in.GetResponseParameters(), &hdr)
	})
}

// maxHalfDuplex bounds the messages a HalfDuplexCall holds.
const maxHalfDuplex = 1024

// HalfDuplexCall reads every request message, then answers them in
// order.
func (s *GRPCService) HalfDuplexCall(st testpb.TestService_HalfDuplexCallServer) error {
	var ins []*testpb.StreamingOutputCallRequest
	if err := recvEach(st.Recv, func(in *testpb.StreamingOutputCallRequest) error {
		if len(ins) >= maxHalfDuplex {
			return status.Errorf(codes.ResourceExhausted, "more than %d messages in a half-duplex call", maxHalfDuplex)
		}
		ins = append(ins, in)
		return nil
	}); err != nil {
		return err
	}
	var hdr metadata.MD
	for _, in := range ins {
		if err := s.respond(st, in.GetResponseParameters(), &hdr); err != nil {
			return err
		}
	}
	return nil
}

// recvEach calls f with each message recv returns until the client has
// sent its last (io.EOF: nil), recv fails or f does (that error).
func recvEach[T any](recv func() (T, error), f func(T) error) error {
	for {
		in, err := recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(in); err != nil {
			return err
		}
	}
}
