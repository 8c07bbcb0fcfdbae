// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/proxy/internal/h1"
)

// Client-side protection: what the proxy does before a request reaches
// admission control, so that a slow or hostile client costs a goroutine
// and a few kilobytes, never a backend slot.
//
//   - A cap on client connections (max_client_connections), counted over
//     every listener, with file descriptors kept back for the admin
//     listener and the upstream connections. At the cap, an idle
//     keep-alive connection, or else one that has spent more than
//     StalledHeaderAfter on its request header, is closed to make room;
//     if there is none the new connection is reset at accept (SO_LINGER
//     0), before a byte of it is read: the early-discard path of the
//     connection policer.
//   - A send timeout on every write to a client (send_timeout, nginx's
//     send_timeout): a client that stops reading is disconnected.
//   - The smuggling scanner (internal/h1, scan.go) on plaintext listeners.
//   - Size limits on the request target, header lines and header count
//     (414, 431), on top of net/http's limit on the header block.
//   - Request buffering (request_buffering, nginx's
//     proxy_request_buffering): the body is read completely, in memory up
//     to request_buffer_bytes and then in an unlinked temporary file,
//     before the request enters admission, with a read timeout between
//     reads and a minimum transfer rate; a malformed body is answered
//     400, a slow one 408 and a large one 413, and the connection is
//     closed. Without buffering the same timeouts apply while the body
//     streams upstream, and a body that fails to read is still the
//     client's fault: 400, not 502.

// clientLimits are one listener's request limits (ListenerConfig with
// defaults).
type clientLimits struct {
	maxURI         int           // bytes of the request target
	maxLine        int           // bytes of one header line, "Name: value"
	maxHeaders     int           // header lines
	maxHeaderBytes int           // bytes of the request line and header block
	buffering      bool          // read the body before admission
	bufMem         int64         // body bytes kept in memory; more go to a file
	maxBody        int64         // largest body, bytes; 0 no limit
	bodyTimeout    time.Duration // longest wait for body bytes; 0 none
	bodyRate       float64       // minimum body transfer rate, bytes/s; 0 none
	readTimeout    time.Duration // read_timeout: the whole request; 0 none
	tmpDir         string
}

func limitsOf(lc *ListenerConfig) clientLimits {
	return clientLimits{maxURI: lc.MaxURIBytes, maxLine: lc.MaxHeaderLineBytes, maxHeaders: lc.MaxHeaders, maxHeaderBytes: lc.MaxHeaderBytes,
		buffering: lc.RequestBuffering == nil || *lc.RequestBuffering, bufMem: lc.RequestBufferBytes,
		maxBody: lc.MaxRequestBodyBytes, bodyTimeout: lc.ReadBodyTimeout, bodyRate: lc.ReadBodyMinRate,
		readTimeout: lc.ReadTimeout, tmpDir: lc.RequestBufferDir}
}

// clientMetrics count what the client-side protection refused.
type clientMetrics struct {
	refused   *prometheus.CounterVec // status, reason
	connsOpen prometheus.GaugeFunc
	connsMax  prometheus.GaugeFunc
	connsRst  prometheus.CounterFunc
	connsIdle prometheus.CounterFunc
}

// newClientMetrics exports the refusals and conns's connections (a
// function, so that tests can build them before the limit).
func newClientMetrics(conns func() *connLimit) *clientMetrics {
	return &clientMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "proxy_client_refused_total",
			Help: "Requests refused before admission for the client's fault, by status and reason (smuggling, framing, uri_too_long, header_line_too_long, too_many_headers, header_too_large, body_malformed, body_timeout, body_too_large).",
		}, []string{"status", "reason"}),
		connsOpen: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "proxy_client_connections_open",
			Help: "Open client connections, every listener."}, func() float64 { return float64(conns().live.Load()) }),
		connsMax: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "proxy_client_connections_max",
			Help: "The cap on client connections (max_client_connections)."}, func() float64 { return float64(conns().max) }),
		connsRst: prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "proxy_client_connections_reset_total",
			Help: "Client connections reset at accept because the cap was reached and no idle connection could be closed."},
			func() float64 { return float64(conns().reset.Load()) }),
		connsIdle: prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "proxy_client_connections_reclaimed_total",
			Help: "Idle keep-alive client connections closed to make room for a new one at the cap."},
			func() float64 { return float64(conns().reclaimed.Load()) }),
	}
}

func (m *clientMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.refused, m.connsOpen, m.connsMax, m.connsRst, m.connsIdle}
}

// connLimit caps the client connections of every listener together.
type connLimit struct {
	max       int64
	live      atomic.Int64
	reset     atomic.Uint64
	reclaimed atomic.Uint64

	mu      sync.Mutex
	idle    map[*clientConn]struct{} // keep-alive connections between requests
	reading *list.List               // *clientConn reading a request header, oldest first
}

// StalledHeaderAfter is how long a connection may take to send a complete
// request header before, at the connection cap, it is closed to make room
// for a new one (it still has read_header_timeout when there is room).
const StalledHeaderAfter = time.Second

func newConnLimit(max int) *connLimit {
	return &connLimit{max: int64(max), idle: map[*clientConn]struct{}{}, reading: list.New()}
}

// admit takes a place for a new connection: at the cap it closes an idle
// keep-alive connection, or else one that has been sending a request
// header for longer than StalledHeaderAfter, to make room, and fails if
// there is neither.
func (l *connLimit) admit() bool {
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
func (l *connLimit) forget(c *clientConn) {
	delete(l.idle, c)
	if c.elem != nil {
		l.reading.Remove(c.elem)
		c.elem = nil
	}
}

// state follows http.Server's connection states: a new connection, or
// one that starts a request after being idle, is reading a request header
// until a handler takes the request (dispatched).
func (l *connLimit) state(nc net.Conn, st http.ConnState) {
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
func (l *connLimit) dispatched(c *clientConn) {
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

// clientListener wraps a client listener: the connection cap, the send
// timeout and, on plaintext listeners, the smuggling scanner. Accept
// errors are returned unchanged, so http.Server's back-off on temporary
// errors such as EMFILE applies.
type clientListener struct {
	net.Listener
	lim  *connLimit
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
	lim  *connLimit
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

// ClientReadWait returns how long the proxy has spent waiting for the
// request body of r while it streamed upstream (request_buffering:
// false), or 0 (a buffered body was read before the request started).
// Subtracted from a response time, it leaves the time spent on the
// backend rather than on a slow uploader.
func ClientReadWait(r *http.Request) time.Duration {
	b, ok := r.Context().Value(bodyKey{}).(*guardedBody)
	if !ok {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wait
}

// clientConnKey finds the request's *clientConn in its context.
type clientConnKey struct{}

// clientGuard is the handler of a client listener: the smuggling
// verdict, the size limits and the request body (buffered, or watched
// while it streams), then the proxy's Handler.
type clientGuard struct {
	next http.Handler
	lim  clientLimits
	m    *clientMetrics
	bad  prometheus.Counter // proxy_smuggling_rejected_total
}

func (g *clientGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if cc, _ := r.Context().Value(clientConnKey{}).(*clientConn); cc != nil {
		cc.lim.dispatched(cc)
	}
	h1.RestoreTLS(r)
	sc, _ := r.Context().Value(connKey{}).(*h1.ScanConn)
	var ord uint64
	if sc != nil && r.ProtoMajor == 2 && sc.HTTP2() {
		sc = nil // h2c: HTTP/2 framing, nothing to smuggle through
	}
	if sc != nil {
		if reason := sc.Next(); reason != "" {
			g.bad.Inc()
			g.refuse(w, r, http.StatusBadRequest, "smuggling", "bad request: "+reason)
			return
		}
		ord = sc.Ordinal()
	}
	if g.lim.maxURI > 0 && len(r.RequestURI) > g.lim.maxURI {
		g.refuse(w, r, http.StatusRequestURITooLong, "uri_too_long",
			fmt.Sprintf("request target of %d bytes is longer than %d", len(r.RequestURI), g.lim.maxURI))
		return
	}
	if status, reason, msg := g.checkHeaders(r); status != 0 {
		g.refuse(w, r, status, reason, msg)
		return
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if g.lim.maxBody > 0 && r.ContentLength > g.lim.maxBody {
			g.refuse(w, r, http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("request body of %d bytes is larger than %d", r.ContentLength, g.lim.maxBody))
			return
		}
		rc := http.NewResponseController(w)
		if g.lim.buffering && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			body, err := g.buffer(r, rc, sc, ord)
			if err != nil {
				status, reason, msg := bodyFailure(err)
				g.refuse(w, r, status, reason, msg)
				return
			}
			if sc != nil {
				if why := sc.BodyFault(ord); why != "" {
					g.bad.Inc()
					g.refuse(w, r, http.StatusBadRequest, "smuggling", "bad request: "+why)
					return
				}
			}
			defer body.Close()
		} else {
			gb := &guardedBody{rc: r.Body, ctl: rc, lim: &g.lim, start: time.Now(), h2: r.ProtoMajor == 2}
			r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, gb))
			r.Body = gb
			defer gb.handlerDone()
		}
	}
	g.next.ServeHTTP(w, r)
}

// Body failures.
var (
	errBodyTimeout  = errors.New("request body timeout")
	errBodyTooLarge = errors.New("request body too large")
	errBodyFraming  = errors.New("request body framing refused")
)

// bodyError is a failure to read a request body: the client's fault.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// bodyFailure maps a body error to its answer.
func bodyFailure(err error) (status int, reason, msg string) {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge, "body_too_large", "request body too large"
	case errors.Is(err, errBodyTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, "body_timeout", "request body not received in time"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return http.StatusBadRequest, "body_incomplete", "request body incomplete"
	}
	return http.StatusBadRequest, "body_malformed", "malformed request body"
}

// deadline returns when the next body read must end: body_timeout after
// the last bytes, and no later than body_timeout plus got/min_rate after
// the body started; the zero time without a timeout.
func (l *clientLimits) deadline(start, last, now time.Time, got int64) (time.Time, error) {
	if l.bodyTimeout <= 0 {
		return time.Time{}, nil
	}
	d := last.Add(l.bodyTimeout)
	if l.bodyRate > 0 {
		if r := start.Add(l.bodyTimeout + time.Duration(float64(got)/l.bodyRate*float64(time.Second))); r.Before(d) {
			d = r
		}
	}
	if l.readTimeout > 0 {
		// read_timeout bounds the whole request: the server set it as the
		// connection's deadline, which ours replace. Counted here from the
		// start of the body, so up to the header's time late.
		if r := start.Add(l.readTimeout); r.Before(d) {
			d = r
		}
	}
	if !d.After(now) {
		return time.Time{}, errBodyTimeout
	}
	// Not closer than a second: when the read that ends the body returns,
	// the server starts a background read under this deadline until it is
	// cleared, and a timeout there would cancel the request.
	return later(d, now.Add(time.Second)), nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// buffer reads r's body completely and replaces it with the copy. The
// returned body is closed when the request ends.
func (g *clientGuard) buffer(r *http.Request, rc *http.ResponseController, sc *h1.ScanConn, ord uint64) (io.ReadCloser, error) {
	lim := &g.lim
	start := time.Now()
	last := start
	var got int64
	mem := make([]byte, 0, min(max(r.ContentLength, 512), lim.bufMem))
	var file *os.File
	sp := &spooled{}
	fail := func(err error) (io.ReadCloser, error) {
		// The connection is closed after the answer: end any read the
		// server would make to discard the rest of the body.
		_ = rc.SetReadDeadline(time.Now())
		sp.f = file
		_ = sp.Close()
		return nil, &bodyError{err}
	}
	var chunk []byte
	for {
		now := time.Now()
		d, err := lim.deadline(start, last, now, got)
		if err != nil {
			return fail(err)
		}
		if r.ContentLength > 0 && got == r.ContentLength {
			d = time.Time{} // only EOF is left: no network read
		}
		_ = rc.SetReadDeadline(d) // ErrNotSupported: no timeout
		inMem := file == nil && int64(len(mem)) < lim.bufMem
		var dst []byte
		if inMem {
			if len(mem) == cap(mem) {
				mem = append(make([]byte, 0, min(2*int64(cap(mem)), lim.bufMem)), mem...)
			}
			dst = mem[len(mem):cap(mem)]
		} else {
			if chunk == nil {
				chunk = make([]byte, 32<<10)
			}
			dst = chunk
		}
		n, err := r.Body.Read(dst)
		if n > 0 {
			got += int64(n)
			last = time.Now()
			if lim.maxBody > 0 && got > lim.maxBody {
				return fail(errBodyTooLarge)
			}
			if inMem {
				mem = mem[:len(mem)+n]
			} else {
				if file == nil {
					var ferr error
					if file, ferr = spoolFile(lim.tmpDir); ferr != nil {
						return fail(ferr)
					}
				}
				if _, werr := file.Write(dst[:n]); werr != nil {
					return fail(werr)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		if sc != nil && sc.BodyFault(ord) != "" {
			return fail(errBodyFraming) // no need to wait for the rest
		}
	}
	_ = rc.SetReadDeadline(time.Time{})
	_ = r.Body.Close()
	sp.mem, sp.f = bytes.NewReader(mem), file
	if file != nil {
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return fail(err)
		}
	}
	// Forward a complete body of known length, without the trailer
	// section if it had one (as nginx does).
	r.Body = sp
	r.ContentLength = got
	r.TransferEncoding = nil
	r.Trailer = nil
	if got == 0 {
		r.Body = http.NoBody
	}
	return sp, nil
}

// spoolFile creates an unlinked temporary file for a body.
func spoolFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "sluice-body-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name()) // unlinked: it disappears with its descriptor
	return f, nil
}

// spooled is a buffered request body: its first bytes in memory, the
// rest in an unlinked temporary file.
type spooled struct {
	mem  *bytes.Reader
	f    *os.File
	once sync.Once
}

func (s *spooled) Read(p []byte) (int, error) {
	if s.mem != nil && s.mem.Len() > 0 {
		return s.mem.Read(p)
	}
	if s.f != nil {
		return s.f.Read(p)
	}
	return 0, io.EOF
}

func (s *spooled) Close() error {
	s.once.Do(func() {
		if s.f != nil {
			_ = s.f.Close()
		}
	})
	return nil
}

// bodyKey finds a streamed request's *guardedBody in its context
// (ReverseProxy wraps the body it sends upstream).
type bodyKey struct{}

// clientBodyError returns the error with which the body of req failed
// to read while it streamed upstream, or nil.
func clientBodyError(req *http.Request) error {
	b, ok := req.Context().Value(bodyKey{}).(*guardedBody)
	if !ok {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// clientConnCap returns the cap on client connections of cfg and where
// it comes from: max_client_connections, or the file-descriptor limit
// less ReservedFDs and the upstream connections (every server's
// max_concurrency in use plus max_idle_conns_per_host idle).
func clientConnCap(cfg *Config) (int, string) {
	if cfg.MaxClientConnections > 0 {
		return cfg.MaxClientConnections, "max_client_connections"
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 20, "no file-descriptor limit"
	}
	up := 0
	for _, s := range cfg.Backends.Servers {
		up += s.MaxConcurrency + cfg.Backends.MaxIdleConnsPerHost
	}
	return max(int(rl.Cur)-ReservedFDs-up, 16), fmt.Sprintf("file-descriptor limit %d less %d reserved and %d upstream", rl.Cur, ReservedFDs, up)
}

// listenError is a failure to bind a configured address, as a
// *sluice.FieldError naming the field and address.
func listenError(path, addr string, err error) error {
	msg := err.Error()
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		msg = op.Err.Error()
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			msg = se.Err.Error()
		}
	}
	return fieldErr(path, "%q cannot be bound: %s", addr, msg)
}

// clientBodyFailed answers a request whose body failed to read while it
// streamed upstream, and closes the connection.
func (h *Handler) clientBodyFailed(w http.ResponseWriter, err error) {
	status, reason, msg := bodyFailure(err)
	if h.cm != nil {
		h.cm.refused.WithLabelValues(fmt.Sprint(status), reason).Inc()
	}
	hd := w.Header()
	hd.Set("Connection", "close")
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "sluice: "+msg+"\n")
}
