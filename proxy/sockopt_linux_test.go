package proxy

import (
	"context"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Client connections hold at most unsentLimit bytes unsent in the
// kernel.
func TestClientConnectionsLimitUnsent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	cl := &clientListener{Listener: ln, lim: newConnLimit(10)}
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

// A listener's backlog bounds the connections the kernel completes before
// the proxy accepts them: with backlog 2 and nothing accepting yet, the
// kernel completes 3 handshakes (Linux queues backlog + 1) and drops the
// SYNs of the rest. Go's own backlog (somaxconn) would complete all 12.
func TestListenerBacklog(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	cfg := strings.Replace(baseConfig(be.URL, ""), "  - addr: 127.0.0.1:0\n", "  - addr: 127.0.0.1:0\n    backlog: 2\n", 1)
	c, err := Parse("backlog.yaml", []byte(cfg))
	must(t, err)
	if c.Listeners[0].Backlog != 2 {
		t.Fatalf("backlog %d, want 2", c.Listeners[0].Backlog)
	}
	srv, err := New(c, Options{Logger: testLogger(t)})
	must(t, err)
	must(t, srv.Listen())
	addr := srv.Addrs()[0].String()
	var conns []net.Conn
	for range 12 {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			conns = append(conns, c)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	if len(conns) > 3 {
		t.Errorf("%d of 12 handshakes completed with nothing accepting; backlog 2 allows 3", len(conns))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	must(t, srv.Serve(ctx))
}
