// SPDX-License-Identifier: Apache-2.0

// Package testbed provides the test backends that sluice protects in
// experiments and demos: real HTTP servers whose capacity and costs are
// known, so that an overload can be produced and measured on one machine.
//
// Four kinds exist, each an http.Handler with a Close method that can be
// mounted in-process (httptest, an experiment runner) or served by
// `sluice-lab testbed KIND`:
//
//   - Queue: a server with a fixed capacity of Workers "CPUs", FIFO or
//     processor-sharing, whose service times are drawn from a distribution
//     and emulated with timers (no CPU is burnt, so capacity is exact).
//   - CGI: real CPU work per request (generate and sum N random numbers,
//     like the CGI scripts of the papers), N configured per path prefix.
//   - Static: a SURGE-like file set generated on disk from a seed, with
//     heavy-tailed sizes, Zipf popularity, large files under /islarge/ and
//     dynamic pages under /cgi-bin/.
//   - Bookstore: a TPC-W-like shop with the 14 interactions as HTML pages,
//     doing real SQL on SQLite (default) or PostgreSQL.
//
// Every kind honours the X-Sluice-Quality request header (missing means 1;
// lower quality means less work, see EffectiveQuality), reports its busy
// fraction in the X-Sluice-Utilization response header, and serves GET
// /_meta (a JSON manifest, see TESTBED-CONTRACT) and GET /healthz. Neither
// /_meta nor /healthz is counted as load.
//
// The servers bind to loopback addresses only unless the caller asks
// otherwise explicitly (see CheckListenAddr).
package testbed
