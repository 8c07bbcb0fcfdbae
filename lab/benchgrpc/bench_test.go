// SPDX-License-Identifier: Apache-2.0

package benchgrpc

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/lab/internal/grpctest"
	"github.com/sluicehq/sluice/proxy"
)

// The baseline forwards gRPC over h2c on both sides: an answer and a
// status (in the trailers) come back from the backend.
func TestPlainH2CForwardsGRPC(t *testing.T) {
	be, stop, err := StartBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewPlainH2C("", "http://"+be)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Close()
	tc := testpb.NewTestServiceClient(grpctest.Dial(t, lis.Addr().String()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 100})
	if err != nil || len(res.GetPayload().GetBody()) != 100 {
		t.Fatalf("UnaryCall: %v, %d bytes", err, len(res.GetPayload().GetBody()))
	}
	// StreamingOutputCall is not implemented: UNIMPLEMENTED, from the
	// backend's trailers.
	st, err := tc.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unimplemented method: %v", err)
	}
}

// The configuration sluice is given is a valid one.
func TestSluiceConfigLoads(t *testing.T) {
	for _, c := range []string{"static-rate", "auto"} {
		file := filepath.Join(t.TempDir(), "p.yaml")
		if err := os.WriteFile(file, []byte(sluiceConfig("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:1", c)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := proxy.LoadFile(file); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
}

// cpuOf reads a process's CPU time: this one's grows while it works.
func TestCPUOf(t *testing.T) {
	a, err := cpuOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has counted a clock tick more: on a loaded
	// machine 100 ms of wall time may not be one tick of this process's
	// CPU. The bound keeps a broken cpuOf from hanging the test.
	var b time.Duration
	x := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		x++
		if x%(1<<20) == 0 {
			if b, err = cpuOf(os.Getpid()); err != nil || b > a {
				break
			}
		}
	}
	if err != nil || b <= a {
		t.Errorf("CPU %v then %v (%v), want it to grow", a, b, err)
	}
	if r, w := syscallsOf(os.Getpid()); r <= 0 || w < 0 {
		t.Errorf("syscalls %d reads %d writes, want some reads (this test's binary was read)", r, w)
	}
	if _, err := cpuOf(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
	if m := median([]time.Duration{4, 1, 3, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
}
