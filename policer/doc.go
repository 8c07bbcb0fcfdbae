// SPDX-License-Identifier: Apache-2.0

// Package policer is the connection policer of Voigt and Gunningberg,
// "Handling Multiple Bottlenecks in Web Servers Using Adaptive Inbound
// Controls" (docs/algorithms.md §1): the paper's TCP SYN policing, or
// "early discard". Every new connection must find a token in a token bucket
// (default bucket 20, initial rate 1000 connections/s); a connection that
// does not is reset before any byte of it is read and before a handler
// goroutine exists for it.
//
// The package has three parts:
//
//   - Policer, the decision: a global gate.TokenBucket whose rate a
//     controller (control.VoigtQueue on the backend wait queue) sets once
//     per period, plus optional per-source-address buckets (rates per IP
//     or CIDR prefix, longest match, and a default rate for unlisted
//     sources) kept in a table of bounded size; and its control loop's
//     step (SetControl, Step, Poll), which makes it a sluice.Stepper that
//     stage.Runner drives live and the simulator in virtual time, as it
//     drives a stage. It is a deterministic state machine: every method
//     that depends on time takes now.
//   - Listener, a net.Listener wrapper that asks the Policer at accept
//     time. Its Accept loop accepts from the inner listener, and resets
//     (SO_LINGER 0, then close: the client sees a TCP RST, ECONNRESET) and
//     forgets every non-compliant connection itself, returning only
//     compliant ones. An http.Server serving it therefore starts a
//     goroutine only for admitted connections.
//   - Registry, the set of live admitted connections, for the sensors of
//     package monitor: the outgoing-queue sensor (monitor.SocketQueue,
//     through AppendSockets) and the outgoing-bandwidth sensor
//     (monitor.Bandwidth, through BytesWritten).
//
// In user space a connection can only be refused after the kernel has
// completed the TCP handshake (the listen socket's accept queue), so the
// Listener is as early as a portable server can be: one accept(2), one
// setsockopt(2) and one close(2) per rejected connection, no read, no
// HTTP parsing, no goroutine. The paper's kernel module dropped the SYN
// itself; the client then retried with exponential back-off, whereas a
// reset here fails its connect-and-read at once. Package policer/nft does
// what the paper did where it can (Linux, CAP_NET_ADMIN): an nftables
// table drops the SYNs beyond the global rate, and Policer.UseKernel
// hands the global bucket to it (the Listener then applies only the
// per-source buckets).
package policer
