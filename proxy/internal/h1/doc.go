// SPDX-License-Identifier: Apache-2.0

// Package h1 is sluice's HTTP/1 protocol code, apart from the proxy
// core: the request-smuggling scanner of client connections (ScanConn,
// scan.go), TLS terminated in the listener so that HTTP/1.1 over TLS is
// scanned too (NewTLSListener, tlsscan.go), and the upstream HTTP/1.1
// transport that sends the common request on the calling goroutine
// (Transport, transport.go, with the keep-alive probe of alive_*.go).
//
// It depends on the standard library only.
package h1
