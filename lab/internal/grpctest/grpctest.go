// SPDX-License-Identifier: Apache-2.0

// Package grpctest serves and dials gRPC on loopback for the lab's
// tests: a server on a free 127.0.0.1 port and a plaintext client
// connection, each torn down when the test ends.
package grpctest

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Serve serves g on a free loopback port until the test ends (then it
// stops g) and returns the address, host:port. Any error fails the test.
func Serve(t testing.TB, g *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// Dial returns a plaintext client connection to addr with opts besides
// the credentials, closed when the test ends. Any error fails the test.
func Dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
