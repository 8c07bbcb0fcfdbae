// SPDX-License-Identifier: Apache-2.0

// Package grpcsluice puts sluice's admission control and client side in
// a gRPC service (google.golang.org/grpc): server interceptors that run a
// call through the same policy, stages, controllers and metrics as the
// HTTP middleware (package policy, sluice.Middleware), and client
// interceptors that drive the same per-destination throttle and retry
// budget as the HTTP client side (package client).
//
// It is a package of its own so that a service that imports only the
// HTTP middleware does not link grpc.
//
// # Installing
//
//	sl := grpcsluice.NewServer(pol, grpcsluice.ServerOptions{})
//	srv := grpc.NewServer(sl.ServerOptions()...)
//
// ServerOptions gives the unary and stream interceptors and a tap handle
// (Server.TapHandle) that reads the call's metadata from grpc-go's own
// header map as the stream opens; the interceptors alone work the same,
// at about 90 ns more per call for each header the policy reads and the
// call does not carry.
//
// # Status codes
//
// A call the server refuses gets one of these, before its handler runs:
//
//   - RESOURCE_EXHAUSTED: sluice shed the call locally for overload (its
//     stage's gate refused it). The status carries a
//     google.rpc.RetryInfo detail whose retry_delay is the pushback
//     (reject.retry_after plus its jitter) and the trailer
//     grpc-retry-pushback-ms the same in milliseconds, which grpc-go's
//     own retry honours. Trying another replica does not help (the
//     overload is usually everyone's): wait, or give up.
//   - DEADLINE_EXCEEDED: the call's deadline has passed, or would pass
//     before it gets a slot (stage.ErrDeadline). Do not retry.
//   - UNAVAILABLE: this replica does not serve now (Server.SetServing
//     false: draining, not ready). Try another replica at once.
//   - CANCELLED or DEADLINE_EXCEEDED: the caller went away while the call
//     waited for a slot (the context's error).
//
// # What travels
//
// The priority and the tenant come from the call's metadata under the
// HTTP hop headers' names, lowercased (x-sluice-priority,
// x-sluice-tenant; hops.priority_header and hops.tenant_header), believed
// only from classes.trusted_proxies, as over HTTP; the deadline is the
// call's own (grpc-timeout, which grpc-go turns into the context's
// deadline), or an x-sluice-timeout that is earlier. A malformed value
// is treated as absent and counted in sluice_hop_invalid_total. The
// handler's context carries the deadline and a sluice.Hop, which the
// client interceptors (and package client) stamp on the calls made with
// it.
package grpcsluice
