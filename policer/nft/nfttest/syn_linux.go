// SPDX-License-Identifier: Apache-2.0

//go:build linux

package nfttest

import (
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/internal/testkit"
)

// SYNBurst starts n non-blocking TCP connects to the IPv4 address a and
// returns their sockets without waiting for any handshake: n SYNs sent at
// once. The caller closes the sockets (unix.Close) when it has counted
// what passed.
func SYNBurst(t testkit.TB, a netip.AddrPort, n int) []int {
	t.Helper()
	var fds []int
	sa := &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
			t.Fatalf("connect: %v", err)
		}
	}
	return fds
}
