// SPDX-License-Identifier: Apache-2.0

// Package loadgen generates HTTP load against a target on this machine and
// records what happened: the client side of sluice's test bench, in the
// spirit of sclient, httperf, SURGE and TPC-W's emulated browsers.
//
// Traffic only ever goes to loopback targets (127.0.0.0/8, ::1,
// "localhost"); Config.Validate and the workloads refuse anything else.
//
// # Loops
//
// Open loop (ModeOpen): a pacer (dist.Poisson or dist.Constant over a rate
// schedule) fixes every request's intended send time in advance. A pool of
// worker goroutines, grown on demand up to MaxInflight, sends them; an
// arrival that finds MaxInflight requests in flight is dropped (counted in
// Dropped and Errors). Open-loop requests share at most MaxConns keep-alive
// connections per source address.
//
// Closed loop (ModeClosed): Users (a schedule) users each send a request,
// wait for the whole response, think for a time drawn from Think, and send
// the next; with RetryWait > 0 a rejected request is resent after
// RetryWait instead. User i is active while i < round(Users.At(t)). Each
// user keeps its own persistent connection.
//
// Latency is measured from the intended send time to the end of the body,
// so queueing anywhere (server, network, generator, waiting for a
// connection) shows; coordinated omission cannot hide it. A request not
// finished Timeout after its intended send time is aborted and counted as
// a timeout.
//
// # gRPC
//
// With Config.GRPC set, every request is a gRPC call to grpc-go's interop
// test service (grpc.testing.TestService, as `sluice-lab testbed grpc`
// serves it) over h2c or TLS; workload paths name the methods, the
// deadline travels as grpc-timeout and classes and clients as metadata.
// OK is ok, RESOURCE_EXHAUSTED and UNAVAILABLE rejected, DEADLINE_EXCEEDED
// a timeout, other codes HTTP errors (see GRPCConfig).
//
// # Outcomes
//
// 2xx and 3xx responses are OK (redirects are not followed); 503 and 429
// are rejected; other 4xx/5xx are HTTP errors; failures without a response
// are transport errors; timeouts are separate; in-flight requests cut by
// cancelling the run are aborted. Only OK responses are latency samples
// (rejections have their own histogram). See Counts for the identities
// between the counters.
//
// # Workloads
//
//   - URLs: independent weighted choice over paths or absolute loopback
//     URLs (NewURLs). A URL list file (ReadURLList) has one "URL [weight]"
//     per line, "#" comments; inline lists are "URL:weight,..." (see
//     ParseWeighted). {rand:A-B} in a URL becomes a random integer in
//     [A,B].
//   - Markov: navigation over URL states from a YAML file (see Markov).
//   - Surge: the static testbed's files with their Zipf weights (NewSurge).
//   - TPCW: the bookstore's 14 interactions in the browsing, shopping or
//     ordering mix (see TPCWMatrix for how the transition matrices
//     reproduce the specification's mix percentages).
//
// # Results
//
// Result holds totals, per type/class/client breakdowns, per-second series
// and HDR histograms; Result.WriteDir writes them. summary.json is a flat
// object: "scenario" (workload name), "mode" ("open"/"closed"), "seed",
// then numbers: duration_s, requests (= offered), offered, offered_rps,
// completed, completed_rps, ok, goodput_rps, rejected, rejected_rps,
// reject_fraction (rejected/offered), errors, http_errors,
// transport_errors, dropped, timeouts, aborted, bytes, bytes_per_s,
// p50_ms, p90_ms, p99_ms, p999_ms, mean_ms, max_ms (OK responses),
// rejected_p50_ms, rejected_p99_ms, interrupted (0/1); open loop adds
// inflight_max; closed loop adds users_max, think_mean_ms, retries.
// Breakdowns are flat keys "type.KEY.METRIC", "class.KEY.METRIC" and
// "client.KEY.METRIC" (KEY through SummaryKey; METRIC one of offered,
// offered_rps, completed, ok, goodput_rps, rejected, errors, timeouts,
// dropped, bytes, p50_ms, p90_ms, p99_ms). Rates are per second of the
// issuing time (duration_s).
package loadgen
