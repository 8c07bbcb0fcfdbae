// SPDX-License-Identifier: Apache-2.0

// Package proxy is sluice's reverse proxy: a transparent HTTP proxy that
// an operator puts in front of an unmodified service (the Yaksha design)
// with per-stage and per-class admission control (the SEDA design),
// resource rules and early discard of connections (Voigt & Gunningberg)
// and per-client bandwidth shares (Li & Jamin).
//
// A connection first meets the connection policer when one is configured
// (policer: a token bucket checked at accept time; a connection without a
// token is reset before any byte is read, and its rate is set every period
// by a voigt-queue controller on the backend wait queue, allowed to rise
// only while the CPU rule's utilization is below its reference), then the
// cap on client connections (max_client_connections). A request then goes
// through the client-side protection (package guard: the smuggling guard,
// which fails closed, size limits, the request body read before admission
// with timeouts and a minimum rate), the policy's classification into a
// stage and class, the stage's admission
// gate (reject early with 503 and Retry-After, or admit), the client's
// bandwidth share (shares: a standby slot, then a delay of the reply), the
// backend pool (a bounded FIFO queue in front of servers with a per-server
// concurrency limit; its length is the papers' listen queue), and
// net/http/httputil.ReverseProxy. Its response time, from arrival at the
// proxy to the last byte of the response minus any share delay, feeds the
// stage's controller; long-lived responses (upgrades, event streams,
// responses beyond the stage's long_lived) release their slots early and
// are not samples.
//
// Stages bound to a resource rule (resources) are fed by that resource's
// sensor: a utilization source for a CPU rule (host or CPU-list CPU from
// /proc/stat, a cgroup v2 group, a backend process, the pool's busy time,
// or a value the backends report in a response header), the outgoing
// queue of the client sockets or the outgoing bandwidth for a bandwidth
// rule. A sensor that cannot work on the host fails validation.
//
// Config is the YAML file (docs/config.md documents every field); Server
// runs the listeners, the admin API (/metrics, /state, /config, /reload,
// /stages/{name}/target, /shadow; package admin, which reads and changes
// the server through admin.go) and swaps configurations atomically on
// reload. Package tlsconf is the TLS of the listeners, of the admin
// listener and of backends.tls.
//
// Internal packages hold what the proxy core only calls:
//
//   - internal/h1, the HTTP/1 protocol code, on the standard library
//     alone: the smuggling scanner that package guard asks for its
//     verdicts (h1.ScanConn), TLS terminated in the listener so that
//     HTTP/1.1 over TLS is scanned too (h1.NewTLSListener), and the
//     pool's upstream transport, which sends the common request on the
//     handler's goroutine (h1.Transport; pool.go builds it, NewTransport
//     the standard transport it falls back to).
//   - internal/dashboard, the live dashboard on the admin listener (/ui,
//     /ui/events): its one-second sampler and ten-minute history, the
//     page and its event stream, and the metrics beside them
//     (proxy_ui_history_bytes, proxy_stage_target_seconds, …). It reads
//     the server only through a read-only view of typed values that
//     dashboard.go fills from the readings of /state, and the admin
//     token guards it (package admin).
//   - internal/proxyproto, the PROXY protocol on a listener
//     (listeners[].proxy_protocol; proxyproto.go wires it): the header
//     believed only from trusted load balancers, read by each
//     connection's first Read or RemoteAddr, beneath the scanner, TLS
//     and HTTP/2, above the policer and the connection cap.
package proxy
