// SPDX-License-Identifier: Apache-2.0

//go:build unix

package h1

import (
	"errors"
	"net"
	"syscall"
)

// connAlive peeks at c's socket without blocking: alive when a read would
// block (no data, no FIN).
func connAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var n int
	var rerr error
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait
	})
	if err != nil {
		return false
	}
	return n < 0 && (errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK))
}
