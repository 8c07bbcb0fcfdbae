// SPDX-License-Identifier: Apache-2.0

//go:build linux

package nfttest

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Every connect of the burst reaches the listener: with nothing dropping
// SYNs, the kernel completes each handshake and the listener accepts n.
func TestSYNBurstReachesTheListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 5
	fds := SYNBurst(t, ln.Addr().(*net.TCPAddr).AddrPort(), n)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if len(fds) != n {
		t.Fatalf("%d sockets, want %d", len(fds), n)
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
	for i := range n {
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("accept %d of %d: %v", i+1, n, err)
		}
		c.Close()
	}
}
