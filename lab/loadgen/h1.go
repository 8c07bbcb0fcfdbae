// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// The direct HTTP/1.1 client.
//
// For plain-http targets without a custom Transport, the goroutine that
// runs a request (an open-loop worker or a closed-loop user) runs the whole
// exchange itself on a keep-alive connection: write the request, parse the
// response with net/http.ReadResponse, read the body. net/http.Transport
// needs two extra goroutines per connection and several channel hand-offs
// per request; on a two-core machine that overhead alone kept the
// generator below 20,000 requests/s.
//
// Closed-loop users each keep their own persistent connection, like
// TPC-W's emulated browsers. Open-loop workers share a pool of at most
// MaxConns connections per source address; a request waiting for a
// connection is still timed from its intended send time.
//
// Deadlines are connection deadlines (intended send time + Timeout); a
// request that misses its deadline closes its connection, as sclient
// aborted requests.

// h1conn is one keep-alive connection, used by one goroutine at a time.
type h1conn struct {
	c      net.Conn
	br     *bufio.Reader
	reused bool // has carried a complete exchange
}

// connSet tracks open connections so that cancellation can interrupt
// blocked reads and writes.
type connSet struct {
	mu      sync.Mutex
	aborted bool
	m       map[*h1conn]struct{}
}

// abortAll marks the set aborted and expires every connection's deadline.
func (s *connSet) abortAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = true
	past := time.Unix(1, 0)
	for c := range s.m {
		c.c.SetDeadline(past)
	}
}

// arm sets c's deadline unless the run was aborted; it reports false when
// aborted.
func (s *connSet) arm(c *h1conn, deadline time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aborted {
		return false
	}
	c.c.SetDeadline(deadline)
	return true
}

func (s *connSet) add(c *h1conn) {
	s.mu.Lock()
	s.m[c] = struct{}{}
	s.mu.Unlock()
}

func (s *connSet) close(c *h1conn) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
	c.c.Close()
}

func (s *connSet) isAborted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborted
}

// errAborted reports an exchange cut short by cancellation.
var errAborted = errors.New("load run cancelled")

// errDeadline reports an exchange that missed its deadline. Where it
// missed it is one of the three errors below, which wrap it.
var errDeadline = errors.New("request deadline exceeded")

// errPoolWait, errDialDeadline and errResponseDeadline are errDeadline
// by where the deadline passed: waiting for a free connection of the
// open loop's pool, connecting (the server did not complete the
// handshake: a full accept queue drops the SYN), or writing the request
// and reading the response.
var (
	errPoolWait         = fmt.Errorf("%w waiting for a free connection (MaxConns in use)", errDeadline)
	errDialDeadline     = fmt.Errorf("%w while connecting", errDeadline)
	errResponseDeadline = fmt.Errorf("%w while waiting for the response", errDeadline)
)

// errConnectTimeout reports a dial that missed Config.ConnectTimeout (a
// transport error: the server did not accept the connection).
var errConnectTimeout = errors.New("connection not established within the connect timeout")

// h1Exchange sends GET path over a connection for transport index ti and
// reads the whole response. It returns the status, the body bytes read,
// and an error (errDeadline, errAborted or a transport error).
func (r *runner) h1Exchange(u *user, ti int, path string, class, client string, deadline time.Time) (int, int64, error) {
	for attempt := 0; ; attempt++ {
		c, err := r.h1Get(u, ti, deadline)
		if err != nil {
			return 0, 0, err
		}
		if !r.conns.arm(c, deadline) {
			r.h1Drop(u, ti, c)
			return 0, 0, errAborted
		}
		u.wbuf = r.appendRequest(u.wbuf[:0], path, class, client)
		_, err = c.c.Write(u.wbuf)
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(c.br, nil)
		}
		if err != nil {
			r.h1Drop(u, ti, c)
			// A kept-alive connection the server closed while idle fails
			// before any response byte: retry once on a fresh connection.
			if c.reused && attempt == 0 && isStaleConn(err) && time.Now().Before(deadline) {
				continue
			}
			return 0, 0, r.h1Err(err)
		}
		n, err := r.readBody(u, resp.Body)
		resp.Body.Close()
		if err != nil {
			r.h1Drop(u, ti, c)
			return 0, n, r.h1Err(err)
		}
		if resp.Close || r.cfg.DisableKeepAlives {
			r.h1Drop(u, ti, c)
		} else {
			c.reused = true
			r.h1Put(u, ti, c)
		}
		return resp.StatusCode, n, nil
	}
}

func isStaleConn(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func (r *runner) h1Err(err error) error {
	if r.conns.isAborted() {
		return errAborted
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errResponseDeadline
	}
	return err
}

// connPool is the open loop's bounded set of connections for one transport
// index, shared by the workers: idle holds idle connections, tokens counts
// open ones (at most MaxConns).
type connPool struct {
	idle   chan *h1conn
	tokens chan struct{}
}

// dialDelay is how long an open-loop request waits for an idle connection
// before it dials a new one.
const dialDelay = time.Millisecond

func newConnPool(max int) *connPool {
	return &connPool{idle: make(chan *h1conn, max), tokens: make(chan struct{}, max)}
}

// h1Get returns a connection for transport index ti: in closed loop the
// user's own (dialled if needed); in open loop an idle pooled one, a new
// one while the pool is below MaxConns, or else the first one freed
// before the deadline.
func (r *runner) h1Get(u *user, ti int, deadline time.Time) (*h1conn, error) {
	if r.pools == nil {
		if c := u.conns[ti]; c != nil {
			return c, nil
		}
		c, err := r.h1Dial(ti, deadline)
		if err != nil {
			return nil, err
		}
		if u.conns == nil {
			u.conns = map[int]*h1conn{}
		}
		u.conns[ti] = c
		return c, nil
	}
	p := r.pools[ti]
	select {
	case c := <-p.idle:
		return c, nil
	default:
	}
	// No idle connection. Wait up to dialDelay for one to come back before
	// dialling: at high rates on a fast server one frees up within
	// microseconds, and dialling for every momentary shortage floods the
	// server with connections (a dial costs both sides far more CPU than a
	// reused connection). When the pool is full, wait until the deadline.
	wait := time.Until(deadline)
	if wait <= 0 {
		return nil, errPoolWait
	}
	tokens := p.tokens
	if len(p.tokens) < cap(p.tokens) {
		wait = min(wait, dialDelay)
		tokens = nil // do not dial before dialDelay
	}
	if u.tm == nil {
		u.tm = time.NewTimer(wait)
	} else {
		u.tm.Reset(wait)
	}
	for dialing := false; !dialing; {
		select {
		case c := <-p.idle:
			u.tm.Stop()
			return c, nil
		case tokens <- struct{}{}:
			u.tm.Stop()
			dialing = true
		case <-u.tm.C:
			if tokens != nil || !time.Now().Before(deadline) {
				return nil, errPoolWait
			}
			// dialDelay passed: dial as soon as the pool has room, or take
			// a connection that comes back first.
			tokens = p.tokens
			u.tm.Reset(time.Until(deadline))
		case <-r.abortCtx.Done():
			u.tm.Stop()
			return nil, errAborted
		}
	}
	c, err := r.h1Dial(ti, deadline)
	if err != nil {
		<-p.tokens
		return nil, err
	}
	return c, nil
}

func (r *runner) h1Dial(ti int, deadline time.Time) (*h1conn, error) {
	dialEnd, connectLimited := deadline, false
	if ct := r.cfg.ConnectTimeout; ct > 0 {
		if e := time.Now().Add(ct); e.Before(deadline) {
			dialEnd, connectLimited = e, true
		}
	}
	ctx, cancel := context.WithDeadline(r.abortCtx, dialEnd)
	defer cancel()
	nc, err := r.dialers[ti].DialContext(ctx, "tcp", r.hostport)
	if err != nil {
		if r.abortCtx.Err() != nil {
			return nil, errAborted
		}
		// The dialer's own deadline can fire a moment before ctx's.
		var ne net.Error
		if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
			if connectLimited {
				return nil, errConnectTimeout
			}
			return nil, errDialDeadline
		}
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &h1conn{c: nc, br: bufio.NewReaderSize(nc, 4096)}
	r.conns.add(c)
	return c, nil
}

// h1Put returns a healthy connection after an exchange.
func (r *runner) h1Put(u *user, ti int, c *h1conn) {
	if r.pools != nil {
		r.pools[ti].idle <- c // never blocks: at most MaxConns exist
	}
}

// h1Drop closes a connection after an error or a "Connection: close".
func (r *runner) h1Drop(u *user, ti int, c *h1conn) {
	r.conns.close(c)
	if r.pools != nil {
		<-r.pools[ti].tokens
		return
	}
	delete(u.conns, ti)
}

// h1CloseAll closes a closed-loop user's connections.
func (r *runner) h1CloseAll(u *user) {
	for ti, c := range u.conns {
		r.h1Drop(u, ti, c)
	}
}

// h1ClosePools closes the idle pooled connections at the end of a run.
func (r *runner) h1ClosePools() {
	for ti, p := range r.pools {
		for {
			select {
			case c := <-p.idle:
				r.h1Drop(nil, ti, c)
				continue
			default:
			}
			break
		}
	}
}

func (r *runner) appendRequest(b []byte, path, class, client string) []byte {
	b = append(b, "GET "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, r.hostport...)
	b = append(b, "\r\nUser-Agent: sluice-load\r\n"...)
	if class != "" {
		b = append(b, r.cfg.ClassHeader...)
		b = append(b, ": "...)
		b = append(b, class...)
		b = append(b, "\r\n"...)
	}
	if client != "" && r.clientHdr {
		b = append(b, r.cfg.ClientHeader...)
		b = append(b, ": "...)
		b = append(b, client...)
		b = append(b, "\r\n"...)
	}
	if r.cfg.DisableKeepAlives {
		b = append(b, "Connection: close\r\n"...)
	}
	return append(b, "\r\n"...)
}
