// SPDX-License-Identifier: Apache-2.0

package grpctest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoService answers EmptyCall and echoes FullDuplexCall with Echo.
type echoService struct {
	testpb.UnimplementedTestServiceServer
}

func (echoService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (echoService) FullDuplexCall(st testpb.TestService_FullDuplexCallServer) error { return Echo(st) }

// serve serves echoService on a loopback port until t ends and returns
// the port's address.
func serve(t *testing.T) string {
	t.Helper()
	lis := Listen(t)
	t.Cleanup(Serve(lis, echoService{}).Stop)
	return lis.Addr().String()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Serve serves the test service and the health service on a loopback
// listener; Dial reaches them over h2c; Echo sends each message back and
// ends the call OK when the client closes its side.
func TestServeDialEcho(t *testing.T) {
	cc := Dial(t, serve(t))
	defer cc.Close()
	ctx := ctxT(t)
	if res, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health check: %v, %v; want SERVING", res, err)
	}
	st, err := testpb.NewTestServiceClient(cc).FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		body := []byte(fmt.Sprint("message ", i))
		if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
			t.Fatal(err)
		}
		m, err := st.Recv()
		if err != nil || string(m.GetPayload().GetBody()) != string(body) {
			t.Fatalf("echo %d: %q, %v; want %q", i, m.GetPayload().GetBody(), err, body)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Errorf("after CloseSend: %v, want io.EOF (the call ended OK)", err)
	}
}

// Transport credentials among Dial's options replace h2c: a TLS client
// cannot call the h2c server.
func TestDialTakesTheCallersCredentials(t *testing.T) {
	cc := Dial(t, serve(t), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	defer cc.Close()
	if _, err := testpb.NewTestServiceClient(cc).EmptyCall(ctxT(t), &testpb.Empty{}); status.Code(err) != codes.Unavailable {
		t.Errorf("a TLS call to an h2c server: %v, want UNAVAILABLE", err)
	}
}

// A raw h2c connection sends calls a client library would refuse to and
// reads each one's grpc-status, the second's through the HPACK state the
// first left (grpc-go's server indexes the header fields it repeats).
func TestH2CReadStatus(t *testing.T) {
	c, fr := H2C(t, serve(t))
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	for _, call := range []struct {
		id    uint32
		extra []string
		want  codes.Code
	}{
		{1, []string{"grpc-timeout", "1x"}, codes.Internal}, // grpc-go's server: malformed grpc-timeout
		{3, nil, codes.OK},
		{5, []string{"grpc-timeout", "1x"}, codes.Internal},
		{7, nil, codes.OK},
	} {
		WriteCall(t, fr, call.id, Headers(t, "svc", call.extra...))
		if got := ReadStatus(t, fr); got != fmt.Sprint(int(call.want)) {
			t.Errorf("stream %d: grpc-status %s, want %d (%v)", call.id, got, call.want, call.want)
		}
	}
}

// fatalTB records a Fatalf and returns (the goroutine goes on); the
// helpers call no other method of testkit.TB but Helper.
type fatalTB struct {
	testkit.TB
	msg string
}

func (*fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

// ReadStatus refuses a Framer that does not decode header blocks, whose
// HEADERS frames it could never read a grpc-status from, rather than read
// until the connection ends; it fails on a connection that ends before a
// status.
func TestReadStatusFailures(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var tb fatalTB
	if got := ReadStatus(&tb, http2.NewFramer(a, a)); got != "" || tb.msg == "" {
		t.Errorf("a Framer without ReadMetaHeaders: %q, Fatalf %q", got, tb.msg)
	}
	tb = fatalTB{}
	c, fr := H2C(&tb, serve(t))
	c.Close()
	if got := ReadStatus(&tb, fr); got != "" || !strings.HasPrefix(tb.msg, "reading the answer: ") {
		t.Errorf("a closed connection: %q, Fatalf %q", got, tb.msg)
	}
}

// RetryDelay reads the RetryInfo among a status's details.
func TestRetryDelay(t *testing.T) {
	st, err := status.New(codes.ResourceExhausted, "x").WithDetails(&errdetails.ErrorInfo{Reason: "TEST"},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if d := RetryDelay(st); d != 1500*time.Millisecond {
		t.Errorf("RetryDelay %v, want 1.5s", d)
	}
	if d := RetryDelay(status.New(codes.ResourceExhausted, "x")); d != 0 {
		t.Errorf("RetryDelay without a RetryInfo: %v, want 0", d)
	}
}
