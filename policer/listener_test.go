// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// hangGuard bounds every blocking network call of these tests; it is a
// safety net against a hung test, not a timing assertion.
const hangGuard = 20 * time.Second

// serve runs an http.Server on a policed 127.0.0.1 listener until the test
// ends and returns the listener.
func serve(t *testing.T, p *Policer, reg *Registry, h http.Handler, connState func(net.Conn, http.ConnState)) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := p.Wrap(inner, reg)
	srv := &http.Server{Handler: h, ConnState: connState, ReadHeaderTimeout: hangGuard}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln
}

func dial(t *testing.T, addr net.Addr) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr.String(), hangGuard)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetDeadline(time.Now().Add(hangGuard)); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

const request = "GET / HTTP/1.1\r\nHost: sluice.test\r\n\r\n"

func TestRejectedConnectionIsReset(t *testing.T) {
	p := mustNew(t, Config{Rate: 0, Burst: 1})
	p.Admit(time.Now(), netip.Addr{}) // spend the only token
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "hello")
	})
	ln := serve(t, p, nil, h, nil)

	for i := range 3 {
		nc, err := net.DialTimeout("tcp", ln.Addr().String(), hangGuard)
		if errors.Is(err, syscall.ECONNRESET) {
			continue // the reset arrived before connect(2) reported success
		}
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		c := nc.(*net.TCPConn)
		if err := c.SetDeadline(time.Now().Add(hangGuard)); err != nil {
			t.Fatal(err)
		}
		// The request may or may not reach the socket before the reset.
		_, werr := io.WriteString(c, request)
		buf := make([]byte, 512)
		n, rerr := c.Read(buf)
		c.Close()
		if n != 0 {
			t.Fatalf("client %d read %d bytes %q from a rejected connection, want none", i, n, buf[:n])
		}
		switch {
		case errors.Is(rerr, syscall.ECONNRESET):
		case werr != nil && (errors.Is(werr, syscall.ECONNRESET) || errors.Is(werr, syscall.EPIPE)):
			// The reset was reported to the write; the read then sees EOF.
		default:
			t.Fatalf("client %d: write error %v, read error %v; want ECONNRESET", i, werr, rerr)
		}
	}
	if s := p.Stats(); s.RejectedRate != 3 || s.Admitted != 1 {
		t.Errorf("Stats = %+v, want 3 rejected for rate and only the spent token admitted", s)
	}

	// Open the gate: the next connection is served. The handler has then
	// run exactly once, so it never ran for the rejected ones (they were
	// accepted and reset before this one).
	if err := p.SetRate(time.Now(), math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	c := dial(t, ln.Addr())
	defer c.Close()
	io.WriteString(c, request)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("admitted connection: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Errorf("admitted connection: %d %q, want 200 \"hello\"", resp.StatusCode, body)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want 1 (only for the admitted connection)", n)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func TestRegistryTracksAndReleases(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(file, []byte(strings.Repeat("sluice!\n", 64<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	var reg Registry
	p := mustNew(t, Config{Rate: math.Inf(1), Burst: 1})
	var tracked atomic.Int64
	closed := make(chan struct{}, 16)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/file" {
			http.ServeFile(w, r, file) // the sendfile path: Conn.ReadFrom
			return
		}
		fmt.Fprintf(w, "small response for %s", r.URL.Path)
	})
	connState := func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			if _, ok := c.(*Conn); ok {
				tracked.Add(1)
			}
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	ln := serve(t, p, &reg, h, connState)

	const n = 5
	clients := make([]*net.TCPConn, n)
	var received int64
	for i := range clients {
		c := dial(t, ln.Addr())
		clients[i] = c
		path := "/small"
		if i%2 == 0 {
			path = "/file"
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: sluice.test\r\n\r\n", path)
		cr := &countingReader{r: c}
		resp, err := http.ReadResponse(bufio.NewReader(cr), nil)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatalf("client %d body: %v", i, err)
		}
		received += cr.n
	}
	if got := reg.Len(); got != n {
		t.Errorf("registry holds %d connections with %d clients connected, want %d", got, n, n)
	}
	if got := len(reg.AppendSockets(nil)); got != n {
		t.Errorf("AppendSockets returned %d sockets, want %d", got, n)
	}
	if got := tracked.Load(); got != n {
		t.Errorf("http.Server saw %d *Conn, want %d", got, n)
	}

	// Clients leave in an order unlike their arrival; the server closes
	// each connection and the registry empties.
	for _, i := range []int{3, 0, 4, 1, 2} {
		clients[i].Close()
	}
	for range n {
		select {
		case <-closed:
		case <-time.After(hangGuard):
			t.Fatal("server did not close the connections")
		}
	}
	// Counted once each write returned, which may be after the client read
	// the bytes; by the time the server closed the connections it has.
	if got := reg.BytesWritten(); got != uint64(received) {
		t.Errorf("BytesWritten = %d, clients received %d", got, received)
	}
	st := reg.Stats()
	if st.Live != 0 || st.Accepted != n || st.Closed != n {
		t.Errorf("registry after disconnects = %+v, want 0 live, %d accepted, %d closed", st, n, n)
	}
}

func TestConnKeepsTCPFeatures(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var reg Registry
	ln := mustNew(t, DefaultConfig()).Wrap(inner, &reg)
	defer ln.Close()
	client := dial(t, ln.Addr())
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	conn, ok := c.(*Conn)
	if !ok {
		t.Fatalf("Accept returned %T, want *Conn", c)
	}
	if _, ok := conn.NetConn().(*net.TCPConn); !ok {
		t.Errorf("NetConn() = %T, want *net.TCPConn", conn.NetConn())
	}
	var (
		_ io.ReaderFrom                               = conn
		_ io.WriterTo                                 = conn
		_ syscall.Conn                                = conn
		_ interface{ CloseWrite() error }             = conn
		_ interface{ SetLinger(int) error }           = conn
		_ interface{ SetKeepAlive(bool) error }       = conn
		_ interface{ SetNoDelay(bool) error }         = conn
		_ interface{ NetConn() net.Conn }             = conn
		_ interface{ File() (*os.File, error) }       = conn
		_ interface{ SetWriteBuffer(int) error }      = conn
		_ interface{ SetReadBuffer(bytes int) error } = conn
	)
	if _, err := conn.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadFrom(strings.NewReader("defg")); err != nil {
		t.Fatal(err)
	}
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(client)
	if err != nil || string(got) != "abcdefg" {
		t.Errorf("client read %q, %v; want \"abcdefg\"", got, err)
	}
	if reg.BytesWritten() != 7 {
		t.Errorf("BytesWritten = %d, want 7", reg.BytesWritten())
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err == nil {
		t.Errorf("second Close = nil, want the TCP connection's error")
	}
	if st := reg.Stats(); st.Live != 0 || st.Closed != 1 {
		t.Errorf("registry after double Close = %+v, want 0 live and 1 closed", st)
	}
}

// fakeListener returns scripted connections and errors.
type fakeListener struct {
	conns []net.Conn
	errs  []error // returned when conns is exhausted, then net.ErrClosed
}

func (f *fakeListener) Accept() (net.Conn, error) {
	if len(f.conns) > 0 {
		c := f.conns[0]
		f.conns = f.conns[1:]
		return c, nil
	}
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return nil, net.ErrClosed
}
func (f *fakeListener) Close() error   { return nil }
func (f *fakeListener) Addr() net.Addr { return &net.UnixAddr{Name: "fake", Net: "unix"} }

func TestAcceptNonTCPAndErrors(t *testing.T) {
	var ends, peers []net.Conn
	fl := &fakeListener{}
	for range 3 {
		a, b := net.Pipe()
		fl.conns = append(fl.conns, a)
		ends = append(ends, a)
		peers = append(peers, b)
	}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	fl.errs = []error{emfile}

	var reg Registry
	p := mustNew(t, Config{Rate: 1, Burst: 1})
	ln := p.Wrap(fl, &reg)
	clock := t0
	ln.Now = func() time.Time { clock = clock.Add(600 * time.Millisecond); return clock }

	// Pipe 0 takes the token, pipe 1 (0.6 s later) is refused and closed,
	// pipe 2 (1.2 s after pipe 0) is admitted.
	c, err := ln.Accept()
	if err != nil || c != ends[0] {
		t.Fatalf("first Accept = %v, %v; want pipe 0", c, err)
	}
	c, err = ln.Accept()
	if err != nil || c != ends[2] {
		t.Fatalf("second Accept = %v, %v; want pipe 2 (pipe 1 rejected)", c, err)
	}
	if _, err := peers[1].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("peer of the rejected pipe read %v, want io.EOF (closed)", err)
	}
	if _, ok := c.(*Conn); ok {
		t.Errorf("a non-TCP connection was wrapped")
	}
	_, err = ln.Accept()
	if !errors.Is(err, syscall.EMFILE) || err != error(emfile) {
		t.Errorf("Accept error = %v, want the inner EMFILE error unchanged", err)
	}
	if _, err = ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after close = %v, want net.ErrClosed", err)
	}
	s := p.Stats()
	if s.Admitted != 2 || s.RejectedRate != 1 || s.AcceptErrors != 2 {
		t.Errorf("Stats = %+v, want 2 admitted, 1 rejected, 2 accept errors", s)
	}
	if reg.Len() != 0 {
		t.Errorf("registry tracks %d non-TCP connections, want 0", reg.Len())
	}
}
