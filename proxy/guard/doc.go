// SPDX-License-Identifier: Apache-2.0

// Package guard is the proxy's downstream guard: what the proxy does
// before a request reaches admission control, so that a slow or hostile
// client costs a goroutine and a few kilobytes, never a backend slot. It
// owns the listener's guard settings (Config, inline in the proxy's
// listeners[] entries) with their defaults and validation; package proxy
// wires it to each client listener.
//
//   - A cap on client connections (Conns: max_client_connections),
//     counted over every listener, with file descriptors kept back for
//     the admin listener and the upstream connections (ConnCap). At the
//     cap, an idle keep-alive connection, or else one that has spent more
//     than StalledHeaderAfter on its request header, is closed to make
//     room; if there is none the new connection is reset at accept
//     (SO_LINGER 0), before a byte of it is read: the early-discard path
//     of the connection policer.
//   - A send timeout on every write to a client (send_timeout, nginx's
//     send_timeout): a client that stops reading is disconnected.
//   - The smuggling scanner (proxy/internal/h1, scan.go) on plaintext
//     listeners.
//   - Size limits on the request target, header lines and header count
//     (414, 431), on top of net/http's limit on the header block.
//   - Request buffering (request_buffering, nginx's
//     proxy_request_buffering): the body is read completely, in memory up
//     to request_buffer_bytes and then in an unlinked temporary file
//     (proxy/buffer's Store), before the request enters admission, with a
//     read timeout between reads and a minimum transfer rate; a malformed
//     body is answered 400, a slow one 408 and a large one 413, and the
//     connection is closed. Without buffering the same timeouts apply
//     while the body streams upstream, and a body that fails to read is
//     still the client's fault: 400, not 502.
//
// The proxy learns from it how long a request waited for its client
// (ClientWriteWait, ClientReadWait), to leave that time out of response
// times.
package guard
