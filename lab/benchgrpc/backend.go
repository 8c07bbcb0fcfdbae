// SPDX-License-Identifier: Apache-2.0

package benchgrpc

import (
	"context"
	"net"

	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// service answers grpc-go's interop TestService's unary calls at once:
// the comparison measures the proxies, not the work behind them.
type service struct {
	testpb.UnimplementedTestServiceServer
}

func (service) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (service) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, in.GetResponseSize())}}, nil
}

// StartBackend serves the trivial TestService over h2c on a free
// loopback port and returns its address and the function that stops it.
func StartBackend() (string, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	g := grpc.NewServer()
	testpb.RegisterTestServiceServer(g, service{})
	go func() { _ = g.Serve(lis) }()
	return lis.Addr().String(), g.Stop, nil
}
