// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// serve serves next behind a guard with settings c on a new loopback
// listener under a cap of 10 connections, and returns its address.
func serve(t *testing.T, c *Config, next http.Handler) string {
	t.Helper()
	c.SetDefaults()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	conns := NewConns(10)
	m := NewMetrics(func() *Conns { return conns })
	srv := &http.Server{Handler: New(next, c, m, prometheus.NewCounter(prometheus.CounterOpts{Name: "smuggling"})),
		ConnState: conns.State, ConnContext: ConnContext}
	go func() { _ = srv.Serve(conns.Wrap(ln, c.SendTimeout, true)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestClientWaitHooks: the time spent waiting for a slow uploader and
// for a slow reader is measured per request, for the controllers to
// leave out of response times.
func TestClientWaitHooks(t *testing.T) {
	off := false
	var readWait, writeWait atomic.Int64
	addr := serve(t, &Config{RequestBuffering: &off}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w0 := ClientWriteWait(r)
		_, _ = io.Copy(io.Discard, r.Body)
		readWait.Store(int64(ClientReadWait(r)))
		_, _ = io.WriteString(w, strings.Repeat("w", 16<<20)) // more than the socket buffers hold
		http.NewResponseController(w).Flush()
		writeWait.Store(int64(ClientWriteWait(r) - w0))
	}))
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nab")
	must(t, err)
	time.Sleep(300 * time.Millisecond)
	_, err = io.WriteString(c, "cd")
	must(t, err)
	time.Sleep(300 * time.Millisecond) // a slow reader: the response waits
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	must(t, err)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The client stalled 300 ms each way; socket buffers absorb part of
	// the response, and a busy machine shifts the rest, so ask only for a
	// clear share of it (without the hooks both are 0).
	if d := time.Duration(readWait.Load()); d < 100*time.Millisecond {
		t.Errorf("ClientReadWait %v, want most of the client's 300ms", d)
	}
	if d := time.Duration(writeWait.Load()); d < 100*time.Millisecond {
		t.Errorf("ClientWriteWait %v, want most of the client's 300ms", d)
	}
}

// emfileListener fails every Accept with EMFILE, as a process out of file
// descriptors does, and counts the calls.
type emfileListener struct {
	calls  atomic.Int64
	closed chan struct{}
	once   sync.Once
}

func (l *emfileListener) Accept() (net.Conn, error) {
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	l.calls.Add(1)
	return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
}
func (l *emfileListener) Close() error { l.once.Do(func() { close(l.closed) }); return nil }
func (l *emfileListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
}

func TestAcceptErrorsBackOff(t *testing.T) {
	// http.Server.Serve retries temporary accept errors (EMFILE is one)
	// after 5 ms, doubling to at most 1 s. Over 10 s of (virtual) time
	// that is about 15 attempts, not a spin; the Wrap listener must keep
	// the error intact for this to work.
	synctest.Test(t, func(t *testing.T) {
		l := &emfileListener{closed: make(chan struct{})}
		srv := &http.Server{Handler: http.NotFoundHandler(), ErrorLog: log.New(io.Discard, "", 0)}
		done := make(chan error)
		go func() { done <- srv.Serve(NewConns(100).Wrap(l, 0, true)) }()
		time.Sleep(10 * time.Second)
		n := l.calls.Load()
		_ = srv.Close()
		l.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if n < 5 || n > 40 {
			t.Errorf("%d accept attempts in 10 s, want a back-off (about 15)", n)
		}
	})
}

// The server's own header limit is twice max_header_bytes, without
// overflowing for an absurd one.
func TestTransportHeaderBytes(t *testing.T) {
	for _, c := range [][2]int{{32 << 10, 64 << 10}, {1, 2}, {1 << 30, 1 << 30}, {math.MaxInt, math.MaxInt}} {
		if got := TransportHeaderBytes(c[0]); got != c[1] {
			t.Errorf("TransportHeaderBytes(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// ConnContext finds a connection's clientConn under the scanner, so that
// ClientWriteWait reads it.
func TestConnContextFindsTheConnection(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	conns := NewConns(1)
	ln := &oneConn{c: a}
	wrapped, err := conns.Wrap(ln, time.Second, true).Accept()
	must(t, err)
	ctx := ConnContext(context.Background(), wrapped)
	if ScanConnOf(ctx) == nil {
		t.Error("ScanConnOf: nil under a scanning listener")
	}
	if _, ok := ctx.Value(clientConnKey{}).(*clientConn); !ok {
		t.Error("no clientConn in the connection's context")
	}
	if conns.Live() != 1 {
		t.Errorf("Live %d after one accept, want 1", conns.Live())
	}
	_ = wrapped.Close()
	if conns.Live() != 0 {
		t.Errorf("Live %d after its close, want 0", conns.Live())
	}
}

// oneConn is a listener that hands out one connection.
type oneConn struct {
	net.Listener
	c net.Conn
}

func (l *oneConn) Accept() (net.Conn, error) { return l.c, nil }
