// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Client connections hold at most unsentLimit bytes unsent in the
// kernel.
func TestClientConnectionsLimitUnsent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	cl := NewConns(10).Wrap(ln, 0, false)
	defer cl.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	must(t, err)
	defer c.Close()
	sc, err := cl.Accept()
	must(t, err)
	defer sc.Close()
	raw, err := sc.(*clientConn).Conn.(syscall.Conn).SyscallConn()
	must(t, err)
	var got int
	var gerr error
	must(t, raw.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT) }))
	must(t, gerr)
	if got != unsentLimit {
		t.Fatalf("TCP_NOTSENT_LOWAT %d, want %d", got, unsentLimit)
	}
}
