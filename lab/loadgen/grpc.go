// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// GRPCConfig makes a run send gRPC calls to grpc-go's interop test
// service (grpc.testing.TestService, as `sluice-lab testbed grpc` serves
// it) instead of HTTP requests. A workload URL's path names the method
// of each call, "/grpc.testing.TestService/UnaryCall" (a bare method name
// such as "UnaryCall" works too); the target's scheme says how to
// connect: http is h2c (gRPC without TLS), https TLS with ALPN h2 (the
// server's certificate is not verified: loopback only).
//
// Methods and what one call is: EmptyCall and UnaryCall (ResponseSize
// bytes) are unary; StreamingOutputCall asks for Responses responses;
// StreamingInputCall sends Responses messages; FullDuplexCall and
// HalfDuplexCall exchange Responses messages. A call is OK when it ends
// with OK; RESOURCE_EXHAUSTED and UNAVAILABLE are rejections (as 429 and
// 503 are over HTTP); DEADLINE_EXCEEDED is a timeout; any other status an
// error (counted as http_errors). A call's deadline is its intended send
// time plus Config.Timeout: it travels to the server as grpc-timeout. The
// class and the client identity travel as metadata under ClassHeader and
// ClientHeader, lowercased (send priorities with ClassHeader
// X-Sluice-Priority).
type GRPCConfig struct {
	// ResponseSize is the payload bytes asked of each response (0: the
	// server's default).
	ResponseSize int32
	// Responses is the messages per streaming call (default 1).
	Responses int
	// Conns is the number of connections (HTTP/2, many calls each) per
	// source address (default 1).
	Conns int
	// DialOptions are added to every connection's: the client's own
	// interceptors (sluice's, grpcsluice.Client) or a service config
	// (grpc-go's retry and retryThrottling), for instance.
	DialOptions []grpc.DialOption
}

// grpcMethods are the test service's methods.
var grpcMethods = map[string]bool{"EmptyCall": true, "UnaryCall": true, "StreamingOutputCall": true,
	"StreamingInputCall": true, "FullDuplexCall": true, "HalfDuplexCall": true}

// grpcService is the test service's full name.
const grpcService = "grpc.testing.TestService"

// maxGRPCResponses bounds GRPCConfig.Responses.
const maxGRPCResponses = 10000

// validate reports the first invalid field of c.
func (c *GRPCConfig) validate() error {
	switch {
	case c.ResponseSize < 0 || c.ResponseSize > maxBody:
		return fieldErr("GRPC.ResponseSize", "%d must be in [0, %d]", c.ResponseSize, maxBody)
	case c.Responses < 0 || c.Responses > maxGRPCResponses:
		return fieldErr("GRPC.Responses", "%d must be in [0, %d] (0: 1)", c.Responses, maxGRPCResponses)
	case c.Conns < 0 || c.Conns > 64:
		return fieldErr("GRPC.Conns", "%d must be in [0, 64] (0: 1)", c.Conns)
	}
	return nil
}

// DefaultGRPCMethod is the method of a gRPC run whose target has no path.
const DefaultGRPCMethod = "/" + grpcService + "/UnaryCall"

// CheckGRPCMethod reports whether path names a method of the test
// service, as an error naming field.
func CheckGRPCMethod(field, path string) error {
	if _, err := grpcMethod(path); err != nil {
		return fmt.Errorf("%s: %v", field, err)
	}
	return nil
}

// grpcMethod returns the method a workload path names, or an error.
func grpcMethod(path string) (string, error) {
	m := strings.TrimPrefix(path, "/")
	if svc, meth, ok := strings.Cut(m, "/"); ok {
		if svc != grpcService {
			return "", fmt.Errorf("gRPC service %q: the load generator calls %s", svc, grpcService)
		}
		m = meth
	}
	if !grpcMethods[m] {
		return "", fmt.Errorf("gRPC method %q: want one of EmptyCall, UnaryCall, StreamingOutputCall, StreamingInputCall, FullDuplexCall, HalfDuplexCall", m)
	}
	return m, nil
}

// grpcClients are a run's connections: per transport index, Conns
// clients used in turn.
type grpcClients struct {
	conns   [][]*grpc.ClientConn
	clients [][]testpb.TestServiceClient
}

// setupGRPC dials the run's connections (lazily: grpc.NewClient connects
// on the first call).
func (r *runner) setupGRPC(scheme string) error {
	g := r.cfg.GRPC
	creds := insecure.NewCredentials()
	if scheme == "https" {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // loopback test targets with self-signed certificates
	}
	n := max(g.Conns, 1)
	for _, d := range r.dialers {
		var cs []*grpc.ClientConn
		var tcs []testpb.TestServiceClient
		for range n {
			cc, err := grpc.NewClient("passthrough:///"+r.hostport, append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
					return d.DialContext(ctx, "tcp", addr)
				}), grpc.WithUserAgent("sluice-load")}, g.DialOptions...)...)
			if err != nil {
				r.closeGRPC()
				return err
			}
			cs = append(cs, cc)
			tcs = append(tcs, testpb.NewTestServiceClient(cc))
		}
		r.grpc.conns = append(r.grpc.conns, cs)
		r.grpc.clients = append(r.grpc.clients, tcs)
	}
	return nil
}

// closeGRPC closes the run's connections.
func (r *runner) closeGRPC() {
	for _, cs := range r.grpc.conns {
		for _, cc := range cs {
			_ = cc.Close()
		}
	}
}

// grpcCall makes one call of the method path names on transport index ti
// and returns an HTTP-like status (200 OK, 429 RESOURCE_EXHAUSTED, 503
// UNAVAILABLE, 500 any other status), the payload bytes received, the
// gRPC code and an error for transport failures and timeouts.
func (r *runner) grpcCall(u *user, ti int, path, class, client string, deadline time.Time) (int, int64, codes.Code, error) {
	method, err := grpcMethod(path)
	if err != nil {
		return 0, 0, codes.Unknown, err
	}
	ctx, cancel := context.WithDeadline(r.abortCtx, deadline)
	defer cancel()
	if class != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, strings.ToLower(r.cfg.ClassHeader), class)
	}
	if client != "" && r.clientHdr {
		ctx = metadata.AppendToOutgoingContext(ctx, strings.ToLower(r.cfg.ClientHeader), client)
	}
	cs := r.grpc.clients[min(ti, len(r.grpc.clients)-1)]
	tc := cs[u.rng.IntN(len(cs))]
	n, err := grpcDo(ctx, tc, method, r.cfg.GRPC)
	code := status.Code(err)
	switch code {
	case codes.OK:
		return http.StatusOK, n, code, nil
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests, n, code, nil
	case codes.DeadlineExceeded, codes.Canceled:
		return 0, n, code, context.DeadlineExceeded
	case codes.Unavailable:
		if _, ok := status.FromError(err); ok && !isTransport(err) {
			return http.StatusServiceUnavailable, n, code, nil
		}
		return 0, n, code, err
	}
	return http.StatusInternalServerError, n, code, nil
}

// isTransport reports whether an UNAVAILABLE error is a connection
// failure rather than a server's answer.
func isTransport(err error) bool {
	msg := status.Convert(err).Message()
	return strings.Contains(msg, "connection error") || strings.Contains(msg, "transport")
}

// grpcDo makes the call and returns the payload bytes received.
func grpcDo(ctx context.Context, tc testpb.TestServiceClient, method string, g *GRPCConfig) (int64, error) {
	k := max(g.Responses, 1)
	params := make([]*testpb.ResponseParameters, k)
	for i := range params {
		params[i] = &testpb.ResponseParameters{Size: g.ResponseSize}
	}
	var n int64
	switch method {
	case "EmptyCall":
		_, err := tc.EmptyCall(ctx, &testpb.Empty{})
		return 0, err
	case "UnaryCall":
		resp, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: g.ResponseSize})
		return int64(len(resp.GetPayload().GetBody())), err
	case "StreamingOutputCall":
		st, err := tc.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: params})
		if err != nil {
			return 0, err
		}
		return drain(st.Recv, n)
	case "StreamingInputCall":
		st, err := tc.StreamingInputCall(ctx)
		if err != nil {
			return 0, err
		}
		for range k {
			if err := st.Send(&testpb.StreamingInputCallRequest{}); err != nil {
				break // the status comes with CloseAndRecv
			}
		}
		_, err = st.CloseAndRecv()
		return 0, err
	default: // FullDuplexCall, HalfDuplexCall
		var st grpc.BidiStreamingClient[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]
		var err error
		if method == "FullDuplexCall" {
			st, err = tc.FullDuplexCall(ctx)
		} else {
			st, err = tc.HalfDuplexCall(ctx)
		}
		if err != nil {
			return 0, err
		}
		one := []*testpb.ResponseParameters{{Size: g.ResponseSize}}
		for range k {
			if err := st.Send(&testpb.StreamingOutputCallRequest{ResponseParameters: one}); err != nil {
				break
			}
			if method == "FullDuplexCall" {
				m, err := st.Recv()
				if err != nil {
					return n, err
				}
				n += int64(len(m.GetPayload().GetBody()))
			}
		}
		if err := st.CloseSend(); err != nil {
			return n, err
		}
		return drain(st.Recv, n)
	}
}

// grpcCodeName names code in gRPC mode ("" otherwise).
func grpcCodeName(on bool, code codes.Code) string {
	if !on {
		return ""
	}
	if int(code) < len(grpcCodeNames) {
		return grpcCodeNames[code]
	}
	return code.String()
}

// grpcCodeNames are the codes' names as the gRPC specification spells
// them.
var grpcCodeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// drain receives a stream's messages until it ends and returns n plus
// their payloads' bytes.
func drain(recv func() (*testpb.StreamingOutputCallResponse, error), n int64) (int64, error) {
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += int64(len(m.GetPayload().GetBody()))
	}
}
