// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"
)

// TapHandle returns a grpc-go tap handle (give it to grpc.InTapHandle)
// that lets the interceptors read a call's metadata from the header map
// grpc-go decoded, as the stream opens, instead of with
// metadata.ValueFromIncomingContext. It is optional and only saves time:
// ValueFromIncomingContext walks every key of the call's metadata,
// case-insensitively, for each header the policy reads and the call does
// not carry (the hop headers, on most calls: about 90 ns each, three
// headers by default), where the tap handle looks each one up once in
// the map, without copying (BenchmarkUnaryInterceptor, "sluice-tap" vs
// "sluice"). Without it the interceptors read the same values.
//
// The handle changes the stream's context only when the call carries
// one of the headers the policy reads (or a stage rule reads the host),
// at one allocation; otherwise it allocates nothing. Install it on every
// grpc.Server that uses this Server's interceptors, or on none: once it
// has run, the interceptors take a call whose context it did not mark as
// carrying none of those headers. grpc-go takes one tap handle per
// server; one that has its own calls this one from it.
func (s *Server) TapHandle() tap.ServerInHandle { return s.tap }

// ServerOptions returns the options that install s in a grpc.Server: the
// unary and stream interceptors (chained after any the server already
// has) and the tap handle.
//
//	srv := grpc.NewServer(sl.ServerOptions()...)
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.unary),
		grpc.ChainStreamInterceptor(s.stream),
		grpc.InTapHandle(s.tap),
	}
}

// tap is the tap handle: it marks ctx with md when the call carries a
// header the policy reads.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !s.tapped.Load() {
		s.tapped.Store(true)
	}
	b := s.b.Load()
	md := info.Header
	if b.needHost && len(md[":authority"]) > 0 {
		return &tapContext{Context: ctx, md: md}, nil
	}
	for _, h := range b.hdr {
		if len(md[h.md]) > 0 {
			return &tapContext{Context: ctx, md: md}, nil
		}
	}
	return ctx, nil
}

// tapKey is the context key of a tapContext.
type tapKey struct{}

// tapContext is a stream's context carrying the metadata grpc-go
// decoded (keys lower case, as HTTP/2 sends them), read in place.
type tapContext struct {
	context.Context
	md metadata.MD
}

func (c *tapContext) Value(key any) any {
	if key == (tapKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// tappedMetadata returns the metadata the tap handle put on ctx, and
// whether the tap handle's reading stands for the call: true with nil
// when the tap handle runs on this server and found none of the headers.
func (s *Server) tappedMetadata(ctx context.Context) (metadata.MD, bool) {
	if !s.tapped.Load() {
		return nil, false
	}
	if c, ok := ctx.Value(tapKey{}).(*tapContext); ok {
		return c.md, true
	}
	return nil, true
}
