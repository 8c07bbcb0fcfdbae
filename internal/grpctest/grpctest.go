// SPDX-License-Identifier: Apache-2.0

// Package grpctest is the gRPC test machinery the tests of grpcsluice and
// of the proxy share: a gRPC server of grpc-go's interop TestService on a
// listener, a client connection to it, the echo of a full-duplex stream,
// and a raw HTTP/2 connection with prior knowledge (h2c) that sends a call
// the way a client library never would and reads back its grpc-status.
//
// It does not import package testing (the product's packages may not:
// scripts/check-lean.sh); its helpers take a testkit.TB, return after its Fatalf
// (one that does not stop the goroutine gets zero values), and leave
// closing what they open to the caller (t.Cleanup, defer).
package grpctest

import (
	"bytes"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testkit"
)

// Listen returns a TCP listener on a free port of 127.0.0.1, failing t if
// there is none. The server Serve starts on it closes it when stopped.
func Listen(t testkit.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
		return nil
	}
	return lis
}

// Serve starts a gRPC server with opts that serves svc and grpc-go's
// health service (every service SERVING) on lis, in a goroutine of its
// own, and returns it; the caller stops it (t.Cleanup(g.Stop)).
func Serve(lis net.Listener, svc testpb.TestServiceServer, opts ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(g, svc)
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { _ = g.Serve(lis) }()
	return g
}

// Dial returns a client connection to target without transport security
// (h2c), unless dopts, which come after it, give transport credentials of
// their own. It fails t if grpc.NewClient refuses target or dopts; the
// caller closes the connection.
func Dial(t testkit.TB, target string, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	dopts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dopts...)
	cc, err := grpc.NewClient(target, dopts...)
	if err != nil {
		t.Fatalf("grpc.NewClient(%q): %v", target, err)
	}
	return cc
}

// Echo is a FullDuplexCall handler's loop: it sends each message's
// payload back until the client closes its side (then the call ends OK)
// or the stream fails (then the call ends with that error).
func Echo(st testpb.TestService_FullDuplexCallServer) error {
	for {
		in, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// RetryDelay returns the retry_delay of st's google.rpc.RetryInfo detail
// (0: none), the pushback sluice gives a refused call.
func RetryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// H2C opens a raw HTTP/2 connection with prior knowledge to addr (a
// second at most to connect): it writes the client preface and an empty
// SETTINGS frame and returns the connection and a Framer on it whose
// ReadFrame decodes header blocks (an *http2.MetaHeadersFrame, with the
// connection's HPACK state), as ReadStatus needs. It fails t if addr does
// not answer; the caller closes the connection.
func H2C(t testkit.TB, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
		return nil, nil
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		c.Close()
		t.Fatalf("client preface: %v", err)
		return nil, nil
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil) // SETTINGS_HEADER_TABLE_SIZE's initial value
	if err := fr.WriteSettings(); err != nil {
		c.Close()
		t.Fatalf("SETTINGS: %v", err)
		return nil, nil
	}
	return c, fr
}

// Headers returns the HPACK block of the request headers of an EmptyCall
// of the interop TestService over h2c to authority, with extra's name,
// value pairs after them (a name without a value is dropped).
func Headers(t testkit.TB, authority string, extra ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	kv := append([]string{":method", "POST", ":scheme", "http", ":authority", authority, ":path", "/grpc.testing.TestService/EmptyCall",
		"content-type", "application/grpc", "te", "trailers"}, extra...)
	for i := 0; i+1 < len(kv); i += 2 {
		if err := enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]}); err != nil {
			t.Fatalf("HPACK %s: %v", kv[i], err)
		}
	}
	return buf.Bytes()
}

// WriteCall sends a whole call on stream id of fr: a HEADERS frame of
// block (Headers') and one DATA frame, which ends the stream, of an empty
// message (the 5-byte gRPC message header of a zero-length Empty).
func WriteCall(t testkit.TB, fr *http2.Framer, id uint32, block []byte) {
	t.Helper()
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true}); err != nil {
		t.Fatalf("HEADERS of stream %d: %v", id, err)
		return
	}
	if err := fr.WriteData(id, true, []byte{0, 0, 0, 0, 0}); err != nil {
		t.Fatalf("DATA of stream %d: %v", id, err)
	}
}

// ReadStatus reads frames from fr (H2C's) until a header block carries a
// grpc-status, of any stream, and returns its value; it fails t if the
// connection fails or ends first ("reading the answer") or fr does not
// decode header blocks.
func ReadStatus(t testkit.TB, fr *http2.Framer) string {
	t.Helper()
	if fr.ReadMetaHeaders == nil {
		t.Fatalf("ReadStatus needs a Framer that decodes header blocks (H2C's)")
		return ""
	}
	got := ""
	for got == "" {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
			return ""
		}
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			for _, f := range mh.Fields {
				if f.Name == "grpc-status" {
					got = f.Value
				}
			}
		}
	}
	return got
}
