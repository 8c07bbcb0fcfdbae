// SPDX-License-Identifier: Apache-2.0

//go:build linux

package loadgen

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fullAcceptQueue returns the address of a listener whose accept queue is
// full (backlog 0, never accepting): the kernel drops every further SYN.
func fullAcceptQueue(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	for range 3 {
		if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	return addr
}

// TestFailureKindConnectTimeout: without ConnectTimeout, a request whose
// SYN a full accept queue drops fails at its deadline as a connect
// timeout, not as a response timeout.
func TestFailureKindConnectTimeout(t *testing.T) {
	addr := fullAcceptQueue(t)
	cfg := Config{Target: "http://" + addr, Mode: ModeOpen, Duration: 300 * time.Millisecond, Seed: 1, Timeout: 400 * time.Millisecond,
		Workload: mustURLs(t, "/x"), Arrivals: mustConstant(t, "10")}
	kinds := failureKinds(t, cfg)
	if kinds[FailConnectTimeout] < 2 || kinds[FailConnectTimeout] < kinds[FailResponseTimeout]+kinds[""] {
		t.Errorf("kinds %v: want the requests to fail connecting", kinds)
	}
}

// TestRealSocketConnectTimeout: against a listener whose accept queue is
// full (backlog 0, never accepting) the kernel drops every SYN; with
// ConnectTimeout the requests fail as transport errors after it, as
// sclient aborts them, instead of waiting for TCP's 1 s retransmission
// and the request deadline.
func TestRealSocketConnectTimeout(t *testing.T) {
	addr := fullAcceptQueue(t)
	cfg := Config{Target: "http://" + addr, Mode: ModeOpen, Duration: time.Second, Seed: 1, Timeout: 3 * time.Second,
		ConnectTimeout: 300 * time.Millisecond, Workload: mustURLs(t, "/x"), Arrivals: mustConstant(t, "10")}
	start := time.Now()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total.TransportErrors < res.Total.Offered-1 || res.Total.Timeouts != 0 || res.Total.Offered < 9 {
		t.Errorf("offered %d: %d transport errors, %d timeouts; want every request refused at connect", res.Total.Offered, res.Total.TransportErrors, res.Total.Timeouts)
	}
	if el := time.Since(start); el > 2500*time.Millisecond {
		t.Errorf("run took %v: the connect timeout did not end the dials", el)
	}
}
