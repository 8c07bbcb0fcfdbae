// SPDX-License-Identifier: Apache-2.0

package h1

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Transport is the upstream transport of the proxy's pool. It sends the common
// request — plain http://, no request body, no Upgrade, no Expect —
// itself, over keep-alive HTTP/1.1 connections of its own, on the calling
// goroutine: it writes the request with http.Request.Write and reads the
// answer with http.ReadResponse, net/http's own writer and parser. Every
// other request (https and HTTP/2, bodies, which the standard transport
// streams while it reads the answer, upgrades, Expect: 100-continue) goes
// to the standard transport it was made with (NewTransport).
//
// Why: http.Transport hands every request to two goroutines of the
// connection (a writer and a reader) and back, through channels; on a
// 2-core box that costs about 12 µs of CPU per request against a trivial
// backend (docs/profiling.md), a seventh of sluice's whole per-request
// cost. Here the request is written and its answer read by the handler's
// goroutine, with no goroutine of the connection's own.
//
// It keeps the standard transport's behaviour where a proxy sees it:
//   - the dial timeout and TCP keep-alive of the dialer; the response
//     header timeout counted from the end of the request's write, and at
//     most 10 MiB of response headers (as http.Transport);
//   - the request's context: when it ends (the client left, the overall
//     timeout) a blocked read or write is woken and the error is the
//     context's cause; a response body still being read fails the same
//     way;
//   - the request's httptrace.ClientTrace hears of the first byte of
//     the answer (GotFirstResponseByte), and 1xx answers (not 101) are
//     handed to its Got1xxResponse, as ReverseProxy needs to forward 103
//     Early Hints, at most 5 of them;
//   - a connection goes back to the idle pool only when its body was read
//     to the end, neither side asked to close, the context did not end and
//     nothing unsolicited follows the answer; at most
//     Options.MaxIdlePerHost connections per host idle, each closed after
//     Options.IdleTimeout unused;
//   - a request that fails on a reused connection before any byte of the
//     answer arrived (the server closed it while idle) is sent again on
//     another connection when it is replayable (GET, HEAD, OPTIONS, TRACE,
//     or an Idempotency-Key header), like http.Transport; a request that
//     is not replayable first checks that its idle connection is still
//     open.
//
// A Transport is safe for concurrent use; its zero value is not usable:
// make one with NewTransport.
type Transport struct {
	std           *http.Transport
	dialer        *net.Dialer
	maxIdle       int
	idleTimeout   time.Duration
	headerTimeout time.Duration

	hosts  sync.Map // URL host → *host
	closed atomic.Bool

	// counters for tests and String
	dials, reused, retried, fallback atomic.Uint64
}

// Options are a Transport's limits, from the proxy's backends
// configuration.
type Options struct {
	// DialTimeout bounds connecting to a server (0: no bound but the
	// system's); connections use TCP keep-alive every 30 s.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response headers,
	// from the end of the request's write (0: no bound).
	ResponseHeaderTimeout time.Duration
	// MaxIdlePerHost is the number of idle keep-alive connections kept
	// per host:port (below 1: 1).
	MaxIdlePerHost int
	// IdleTimeout closes a connection left idle that long (0: none is
	// reused).
	IdleTimeout time.Duration
}

// maxHeaderBytes is http.Transport's default limit on response headers.
const maxHeaderBytes = 10 << 20

// max1xx is how many 1xx answers may precede the final one.
const max1xx = 5

// NewTransport returns a Transport with the limits of opts that hands
// the requests it does not send itself to std.
func NewTransport(std *http.Transport, opts Options) *Transport {
	return &Transport{
		std:           std,
		dialer:        &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second},
		maxIdle:       max(opts.MaxIdlePerHost, 1),
		idleTimeout:   opts.IdleTimeout,
		headerTimeout: opts.ResponseHeaderTimeout,
	}
}

// host is the idle pool of one host:port: a stack, the most recently
// used connection on top (the warm ones stay in use, the rest time out).
type host struct {
	t    *Transport
	addr string

	mu    sync.Mutex
	idle  []*conn
	timer *time.Timer // reaps idle connections; nil when none idle
}

// conn is one keep-alive connection to a backend.
type conn struct {
	host  *host
	conn  net.Conn
	lr    limitReader
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // idle since
}

// limitReader reads from the connection, at most n bytes while a
// response's headers are read (then n is MaxInt64).
type limitReader struct {
	c net.Conn
	n int64
}

func (r *limitReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errHeadersTooLarge
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	n, err := r.c.Read(p)
	r.n -= int64(n)
	return n, err
}

var errHeadersTooLarge = fmt.Errorf("net/http: server response headers exceeded %d bytes; aborted", maxHeaderBytes)

// simple reports whether req takes the transport's own path.
func simple(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.Method == http.MethodConnect {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody || req.ContentLength != 0 || len(req.TransferEncoding) > 0 {
		return false
	}
	h := req.Header
	if _, ok := h["Expect"]; ok {
		return false
	}
	if _, ok := h["Upgrade"]; ok {
		return false
	}
	if _, ok := h["Trailer"]; ok {
		return false
	}
	return true
}

// replayable reports whether req may be sent again after a failure on a
// reused connection (http.Transport's rule for a request without body).
func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	h := req.Header
	if _, ok := h["Idempotency-Key"]; ok {
		return true
	}
	_, ok := h["X-Idempotency-Key"]
	return ok
}

// RoundTrip sends req and returns its answer (http.RoundTripper).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !simple(req) {
		t.fallback.Add(1)
		return t.std.RoundTrip(req)
	}
	h := t.hostOf(req.URL)
	ctx := req.Context()
	again := replayable(req)
	for attempt := 0; ; attempt++ {
		c, reused, err := h.get(ctx, again)
		if err != nil {
			return nil, err
		}
		resp, retry, err := c.roundTrip(req)
		if err == nil {
			return resp, nil
		}
		if !(retry && reused && again && attempt < 3 && ctx.Err() == nil) {
			return nil, err
		}
		t.retried.Add(1)
	}
}

// CloseIdleConnections closes every idle connection, its own and the
// standard transport's.
func (t *Transport) CloseIdleConnections() {
	t.hosts.Range(func(_, v any) bool {
		v.(*host).closeIdle(time.Time{})
		return true
	})
	t.std.CloseIdleConnections()
}

// Close closes the idle connections and lets no more go idle (those in
// use close when their answer ends).
func (t *Transport) Close() {
	t.closed.Store(true)
	t.CloseIdleConnections()
}

func (t *Transport) hostOf(u *url.URL) *host {
	if v, ok := t.hosts.Load(u.Host); ok {
		return v.(*host)
	}
	port := u.Port()
	port = cmp.Or(port, "80")
	v, _ := t.hosts.LoadOrStore(u.Host, &host{t: t, addr: net.JoinHostPort(u.Hostname(), port)})
	return v.(*host)
}

// get returns an idle connection (reused) or a new one. A request that is
// not replayable checks its idle connection first.
func (h *host) get(ctx context.Context, replay bool) (*conn, bool, error) {
	for {
		h.mu.Lock()
		n := len(h.idle)
		if n == 0 {
			h.mu.Unlock()
			break
		}
		c := h.idle[n-1]
		h.idle[n-1] = nil
		h.idle = h.idle[:n-1]
		h.mu.Unlock()
		if time.Since(c.since) >= h.t.idleTimeout {
			c.close()
			continue
		}
		if !replay && !c.alive() {
			c.close()
			continue
		}
		h.t.reused.Add(1)
		return c, true, nil
	}
	nc, err := h.t.dialer.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		return nil, false, err
	}
	h.t.dials.Add(1)
	c := &conn{host: h, conn: nc}
	c.lr = limitReader{c: nc, n: math.MaxInt64}
	c.br = bufio.NewReaderSize(&c.lr, 4<<10)
	c.bw = bufio.NewWriterSize(nc, 4<<10)
	return c, false, nil
}

// alive reports whether an idle connection is still open and quiet:
// nothing buffered, and a non-blocking peek at the socket finds neither
// data nor the server's FIN (connAlive).
func (c *conn) alive() bool { return c.br.Buffered() == 0 && connAlive(c.conn) }

var aLongTimeAgo = time.Unix(1, 0)

// put returns c to the idle pool, or closes it when the pool is full or
// the transport closed.
func (h *host) put(c *conn) {
	c.since = time.Now()
	h.mu.Lock()
	if h.t.closed.Load() || len(h.idle) >= h.t.maxIdle {
		h.mu.Unlock()
		c.close()
		return
	}
	h.idle = append(h.idle, c)
	if h.timer == nil {
		h.timer = time.AfterFunc(h.t.idleTimeout, h.reap)
	}
	h.mu.Unlock()
}

// reap closes the connections idle for idleTimeout and re-arms itself
// while some stay idle.
func (h *host) reap() {
	h.mu.Lock()
	h.timer = nil
	h.mu.Unlock()
	h.closeIdle(time.Now().Add(-h.t.idleTimeout))
	h.mu.Lock()
	if len(h.idle) > 0 && h.timer == nil {
		next := time.Until(h.idle[0].since.Add(h.t.idleTimeout))
		h.timer = time.AfterFunc(max(next, time.Millisecond), h.reap)
	}
	h.mu.Unlock()
}

// closeIdle closes the idle connections unused since before (all of them
// when before is zero).
func (h *host) closeIdle(before time.Time) {
	h.mu.Lock()
	var drop []*conn
	keep := h.idle[:0]
	for _, c := range h.idle {
		if before.IsZero() || c.since.Before(before) || c.since.Equal(before) {
			drop = append(drop, c)
		} else {
			keep = append(keep, c)
		}
	}
	clear(h.idle[len(keep):])
	h.idle = keep
	h.mu.Unlock()
	for _, c := range drop {
		c.close()
	}
}

func (c *conn) close() { _ = c.conn.Close() }

// roundTrip writes req and reads its answer on c. retry reports a failure
// before any byte of the answer arrived (the request may be sent again).
func (c *conn) roundTrip(req *http.Request) (resp *http.Response, retry bool, err error) {
	ctx := req.Context()
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(aLongTimeAgo) })
	}
	fail := func(e error, again bool) (*http.Response, bool, error) {
		stop()
		c.close()
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		return nil, again, e
	}
	if err := req.Write(c.bw); err != nil {
		return fail(err, true)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err, true)
	}
	// A deadline set here may overwrite the past one the context's
	// callback set a moment ago: after each, the context is checked.
	if c.host.t.headerTimeout > 0 {
		_ = c.conn.SetReadDeadline(time.Now().Add(c.host.t.headerTimeout))
		if ctx.Err() != nil {
			return fail(nil, false)
		}
	}
	c.lr.n = maxHeaderBytes
	if _, err := c.br.Peek(1); err != nil {
		return fail(readError(err), true)
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
	}
	for n1xx := 0; ; {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return fail(readError(err), false)
		}
		code := resp.StatusCode
		if code < 100 || code >= 200 {
			break
		}
		if code == http.StatusSwitchingProtocols {
			return fail(errors.New("sluice: backend switched protocols (101) for a request that asked for no upgrade"), false)
		}
		if n1xx++; n1xx > max1xx {
			return fail(errors.New("net/http: too many 1xx informational responses"), false)
		}
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return fail(err, false)
			}
		}
	}
	c.lr.n = math.MaxInt64
	if c.host.t.headerTimeout > 0 {
		_ = c.conn.SetReadDeadline(time.Time{})
		if ctx.Err() != nil {
			_ = c.conn.SetDeadline(aLongTimeAgo) // the body's reads fail at once
		}
	}
	b := &body{c: c, rc: resp.Body, ctx: ctx, stop: stop, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, false, nil
	}
	resp.Body = b
	return resp, false, nil
}

// readError names a response read that hit the header limit.
func readError(err error) error {
	if errors.Is(err, errHeadersTooLarge) {
		return errHeadersTooLarge
	}
	return err
}

// body is a response body: read to its end, it gives its connection
// back to the idle pool.
type body struct {
	c    *conn
	rc   io.ReadCloser
	ctx  context.Context
	stop func() bool
	keep bool
	done bool // read and closed on the handler's goroutine only
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		b.finish(false)
		if b.ctx.Err() != nil {
			err = context.Cause(b.ctx)
		}
	}
	return n, err
}

// Close ends the body; one not read to its end closes the connection.
func (b *body) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish returns the connection to the pool when the answer ended cleanly
// on a connection that may be reused, and closes it otherwise.
func (b *body) finish(eof bool) {
	b.done = true
	c := b.c
	// stop is false when the context ended and its callback set a past
	// deadline on the connection: it cannot be reused.
	if b.stop() && eof && b.keep && c.br.Buffered() == 0 {
		c.host.put(c)
		return
	}
	c.close()
}

// String names the transport in logs.
func (t *Transport) String() string {
	return fmt.Sprintf("sluice h1 transport (dials %d, reused %d, retried %d, standard %d)",
		t.dials.Load(), t.reused.Load(), t.retried.Load(), t.fallback.Load())
}
