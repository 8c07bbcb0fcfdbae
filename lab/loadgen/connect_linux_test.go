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

// TestRealSocketConnectTimeout: against a listener whose accept queue is
// full (backlog 0, never accepting) the kernel drops every SYN; with
// ConnectTimeout the requests fail as transport errors after it, as
// sclient aborts them, instead of waiting for TCP's 1 s retransmission
// and the request deadline.
func TestRealSocketConnectTimeout(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
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
	port := sa.(*unix.SockaddrInet4).Port
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// Fill the accept queue.
	for range 3 {
		if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
			defer c.Close()
		}
	}
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
