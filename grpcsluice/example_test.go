// SPDX-License-Identifier: Apache-2.0

package grpcsluice_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpcsluice"
	"github.com/sluicehq/sluice/policy"
)

// testService answers EmptyCall.
type testService struct {
	testpb.UnimplementedTestServiceServer
}

func (testService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

// NewServer puts every call of a gRPC server through a policy, the same
// as sluice.Middleware's; NewClient's interceptors stamp the deadline and
// the priority on the calls a handler makes, throttle and retry them.
func ExampleNewServer() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pol, err := policy.New(policy.Auto(250*time.Millisecond), policy.Options{})
	if err != nil {
		panic(err)
	}
	go pol.Run(ctx) // the control loop

	sl := grpcsluice.NewServer(pol, grpcsluice.ServerOptions{})
	srv := grpc.NewServer(sl.ServerOptions()...) // the unary and stream interceptors and a tap handle
	testpb.RegisterTestServiceServer(srv, testService{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()

	reg := prometheus.NewRegistry()
	cl, err := grpcsluice.NewClient(client.DefaultConfig(), client.Options{Registerer: reg})
	if err != nil {
		panic(err)
	}
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(cl.UnaryInterceptor()),
		grpc.WithChainStreamInterceptor(cl.StreamInterceptor()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	callCtx, done := context.WithTimeout(ctx, time.Second)
	defer done()
	_, err = testpb.NewTestServiceClient(conn).EmptyCall(callCtx, &testpb.Empty{})
	fmt.Println(err)
	// Output: <nil>
}
