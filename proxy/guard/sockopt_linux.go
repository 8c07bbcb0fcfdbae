// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// limitUnsent caps the bytes the kernel holds unsent on client
// connection c at unsentLimit (TCP_NOTSENT_LOWAT): a write blocks once
// that much is waiting for the client's window. Bytes in flight are not
// affected (the send buffer still grows with the path), but a client
// that reads slowly cannot park the rest of a response in kernel memory:
// without it, 1,000 slow readers of 1 MiB responses took about 2 MiB of
// socket memory each (loopback's large segments grow the send buffer
// whatever the receive window), past tcp_mem's limit, and every TCP
// connection of the host then lost packets and waited for 200 ms
// retransmissions. The response stays in the proxy's buffers instead,
// within their caps.
func limitUnsent(c net.Conn) {
	sc, ok := c.(syscall.Conn) // a *net.TCPConn, or the policer's wrapper of one
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, unsentLimit)
	})
}
