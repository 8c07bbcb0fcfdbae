// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"container/list"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/proxy/internal/h1"
)

// ReservedFDs is the number of file descriptors the automatic
// max_client_connections keeps back besides the upstream connections:
// listeners, the admin API, sensors, temporary files and logs.
const ReservedFDs = 128

// StalledHeaderAfter is how long a connection may take to send a complete
// request header before, at the connection cap, it is closed to make room
// for a new one (it still has read_header_timeout when there is room).
const StalledHeaderAfter = time.Second

// ConnCap returns the cap on client connections and where it comes from:
// configured (max_client_connections) when it is positive, else the
// file-descriptor limit less ReservedFDs and upstream, the upstream
// connections (every server's max_concurrency in use plus
// max_idle_conns_per_host idle), and at least 16.
func ConnCap(configured, upstream int) (int, string) {
	if configured > 0 {
		return configured, "max_client_connections"
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 20, "no file-descriptor limit"
	}
	return max(int(rl.Cur)-ReservedFDs-upstream, 16), fmt.Sprintf("file-descriptor limit %d less %d reserved and %d upstream", rl.Cur, ReservedFDs, upstream)
}

// Conns caps the client connections of every listener together. It is
// safe for concurrent use.
type Conns struct {
	max       int64
	live      atomic.Int64
	reset     atomic.Uint64
	reclaimed atomic.Uint64

	mu      sync.Mutex
	idle    map[*clientConn]struct{} // keep-alive connections between requests
	reading *list.List               // *clientConn reading a request header, oldest first
}

// NewConns returns a cap of max client connections.
func NewConns(max int) *Conns {
	return &Conns{max: int64(max), idle: map[*clientConn]struct{}{}, reading: list.New()}
}

// Max returns the cap.
func (l *Conns) Max() int64 { return l.max }

// Live returns the number of open client connections.
func (l *Conns) Live() int64 { return l.live.Load() }

// Idle returns the number of idle keep-alive client connections.
func (l *Conns) Idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.idle)
}

// admit takes a place for a new connection: at the cap it closes an idle
// keep-alive connection, or else one that has been sending a request
// header for longer than StalledHeaderAfter, to make room, and fails if
// there is neither.
func (l *Conns) admit() bool {
	for {
		n := l.live.Load()
		if n < l.max {
			if l.live.CompareAndSwap(n, n+1) {
				return true
			}
			continue
		}
		l.mu.Lock()
		var victim *clientConn
		for c := range l.idle {
			victim = c
			break
		}
		if victim == nil {
			if e := l.reading.Front(); e != nil && time.Since(e.Value.(*clientConn).since) > StalledHeaderAfter {
				victim = e.Value.(*clientConn)
			}
		}
		if victim != nil {
			l.forget(victim)
		}
		l.mu.Unlock()
		if victim == nil {
			return false
		}
		l.reclaimed.Add(1)
		_ = victim.Close() // frees its place
	}
}

// forget removes c from the idle set and the reading list. Called with
// l.mu held.
func (l *Conns) forget(c *clientConn) {
	delete(l.idle, c)
	if c.elem != nil {
		l.reading.Remove(c.elem)
		c.elem = nil
	}
}

// State follows http.Server's connection states (it is the listener's
// http.Server.ConnState): a new connection, or one that starts a request
// after being idle, is reading a request header until a handler takes
// the request (dispatched).
func (l *Conns) State(nc net.Conn, st http.ConnState) {
	c := clientConnOf(nc)
	if c == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew:
		l.forget(c)
		c.since = time.Now()
		c.elem = l.reading.PushBack(c)
	case http.StateIdle:
		l.forget(c)
		l.idle[c] = struct{}{}
	case http.StateActive:
		if _, wasIdle := l.idle[c]; wasIdle {
			l.forget(c)
			c.since = time.Now()
			c.elem = l.reading.PushBack(c)
		}
	default:
		l.forget(c)
	}
}

// dispatched notes that c's request header is complete: a handler runs.
func (l *Conns) dispatched(c *clientConn) {
	l.mu.Lock()
	if c.elem != nil {
		l.reading.Remove(c.elem)
		c.elem = nil
	}
	l.mu.Unlock()
}

func clientConnOf(nc net.Conn) *clientConn {
	for {
		switch c := nc.(type) {
		case *clientConn:
			return c
		case *h1.ScanConn:
			nc = c.Conn
		case *tls.Conn:
			nc = c.NetConn()
		default:
			return nil
		}
	}
}

// Wrap returns ln under the connection cap, with a send timeout of send
// on every write (0: none) and, when scan is true (a plaintext listener),
// the smuggling scanner. Accept errors are returned unchanged, so
// http.Server's back-off on temporary errors such as EMFILE applies.
func (l *Conns) Wrap(ln net.Listener, send time.Duration, scan bool) net.Listener {
	return &clientListener{Listener: ln, lim: l, send: send, scan: scan}
}

// clientListener wraps a client listener: the connection cap, the send
// timeout and, on plaintext listeners, the smuggling scanner.
type clientListener struct {
	net.Listener
	lim  *Conns
	send time.Duration
	scan bool
}

func (l *clientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.lim.admit() {
			l.lim.reset.Add(1)
			resetConn(c)
			continue
		}
		limitUnsent(c)
		cc := &clientConn{Conn: c, lim: l.lim, send: l.send}
		if l.scan {
			return h1.NewScanConn(cc), nil
		}
		return cc, nil
	}
}

// resetConn closes c with a TCP reset (SO_LINGER 0), the cheapest
// refusal: no FIN handshake, no TIME_WAIT.
func resetConn(c net.Conn) {
	if s, ok := c.(interface{ SetLinger(int) error }); ok {
		_ = s.SetLinger(0)
	}
	_ = c.Close()
}

// unsentLimit is the most bytes the kernel holds unsent on a client
// connection (sockopt_linux.go).
const unsentLimit = 128 << 10

// clientConn is an accepted client connection. Every write has its own
// deadline, send after it starts (bounded by any deadline the server
// set, such as write_timeout), and the time spent in writes is counted.
type clientConn struct {
	net.Conn
	lim  *Conns
	send time.Duration

	hard      atomic.Int64 // the deadline set through SetWriteDeadline, unix ns; 0 none
	writeWait atomic.Int64 // ns spent in Write since the connection opened
	once      sync.Once

	// under lim.mu
	elem  *list.Element // in lim.reading
	since time.Time     // when it started reading its request header
}

func (c *clientConn) Write(p []byte) (int, error) {
	start := time.Now()
	if c.send > 0 {
		d := start.Add(c.send)
		if h := c.hard.Load(); h != 0 && h < d.UnixNano() {
			d = time.Unix(0, h)
		}
		_ = c.Conn.SetWriteDeadline(d)
	}
	n, err := c.Conn.Write(p)
	c.writeWait.Add(int64(time.Since(start)))
	return n, err
}

func (c *clientConn) SetWriteDeadline(t time.Time) error {
	c.setHard(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *clientConn) SetDeadline(t time.Time) error {
	c.setHard(t)
	return c.Conn.SetDeadline(t)
}

func (c *clientConn) setHard(t time.Time) {
	if t.IsZero() {
		c.hard.Store(0)
	} else {
		c.hard.Store(t.UnixNano())
	}
}

func (c *clientConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.lim.live.Add(-1)
		c.lim.mu.Lock()
		c.lim.forget(c)
		c.lim.mu.Unlock()
	})
	return err
}

// SetLinger lets resets reach the TCP connection.
func (c *clientConn) SetLinger(sec int) error {
	if s, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
		return s.SetLinger(sec)
	}
	return nil
}

// Context keys of a client connection.
type (
	connKey       struct{} // the request's *h1.ScanConn
	clientConnKey struct{} // the request's *clientConn
)

// ConnContext is a client listener's http.Server.ConnContext: it puts
// in ctx what the guard and the proxy read of connection c (the
// smuggling scanner and its TLS state, the connection's write wait).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*h1.ScanConn); ok {
		ctx = context.WithValue(ctx, connKey{}, sc)
		if st := sc.TLSState(); st != nil {
			ctx = h1.WithTLSState(ctx, st)
		}
	}
	if cc := clientConnOf(c); cc != nil {
		ctx = context.WithValue(ctx, clientConnKey{}, cc)
	}
	return ctx
}

// ScanConnOf returns the smuggling scanner of the connection of the
// request whose context is ctx (ConnContext), or nil.
func ScanConnOf(ctx context.Context) *h1.ScanConn {
	sc, _ := ctx.Value(connKey{}).(*h1.ScanConn)
	return sc
}

// ClientWriteWait returns how long the proxy has spent blocked writing
// to the client connection of r so far (for an HTTP/2 request, all
// streams of its connection together), or 0 if unknown. Subtracting the
// difference across a request from its response time leaves the time the
// proxy waited for the backend rather than for a slow reader.
func ClientWriteWait(r *http.Request) time.Duration {
	c, _ := r.Context().Value(clientConnKey{}).(*clientConn)
	if c == nil {
		return 0
	}
	return time.Duration(c.writeWait.Load())
}
