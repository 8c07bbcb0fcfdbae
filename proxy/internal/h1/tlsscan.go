// SPDX-License-Identifier: Apache-2.0

package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// tlsListener terminates TLS in the listener so that HTTP/1.1 over TLS
// is scanned for smuggling shapes like plaintext: each accepted
// connection is handshaken on its own goroutine (within the handshake
// timeout); one that negotiated HTTP/2 is handed to the server as the
// *tls.Conn it needs for HTTP/2, one that speaks HTTP/1.x as a ScanConn
// over it. For those the server sees no *tls.Conn, so the server's
// ConnContext keeps the TLS state (WithTLSState) for the handler to put
// back into each request (RestoreTLS).
type tlsListener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration

	once  sync.Once
	ready chan net.Conn
	errc  chan error
	done  chan struct{}
	close sync.Once
}

// NewTLSListener returns a listener that accepts connections from inner
// and terminates TLS on them with a clone of cfg (its NextProtos set to
// h2 and http/1.1), each handshake on its own goroutine and bounded by
// timeout (0: the handshake fails at once). Accept returns a *tls.Conn
// for HTTP/2 and a *ScanConn over the *tls.Conn for HTTP/1.x; a failed
// handshake is closed and never returned. Accept errors of inner are
// passed on, and the listener backs off on temporary ones (5 ms doubling
// to 1 s). Close closes inner and ends the accept loop; the listener is
// safe for concurrent use.
func NewTLSListener(inner net.Listener, cfg *tls.Config, timeout time.Duration) net.Listener {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	return &tlsListener{inner: inner, cfg: cfg, timeout: timeout,
		ready: make(chan net.Conn), errc: make(chan error), done: make(chan struct{})}
}

func (l *tlsListener) Accept() (net.Conn, error) {
	l.once.Do(func() { go l.loop() })
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// loop accepts connections and starts their handshakes. Accept errors
// are passed on (http.Server backs off on temporary ones); the loop backs
// off the same way, from 5 ms doubling to 1 s.
func (l *tlsListener) loop() {
	var backoff time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case l.errc <- err:
			case <-l.done:
				return
			}
			var ne net.Error
			if errors.Is(err, net.ErrClosed) || !(errors.As(err, &ne) && ne.Timeout()) && !isTemporary(err) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-l.done:
				return
			}
			continue
		}
		backoff = 0
		go l.handshake(c)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (l *tlsListener) handshake(raw net.Conn) {
	tc := tls.Server(raw, l.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		_ = tc.Close()
		return
	}
	var c net.Conn = tc
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		c = NewScanConn(tc)
	}
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *tlsListener) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.inner.Close()
}

func (l *tlsListener) Addr() net.Addr { return l.inner.Addr() }

// tlsStateKey finds the TLS state of a scanned TLS connection in its
// context.
type tlsStateKey struct{}

// TLSState returns the TLS state of c's connection when it is TLS (from
// NewTLSListener), or nil.
func (c *ScanConn) TLSState() *tls.ConnectionState {
	tc, ok := c.Conn.(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	return &st
}

// WithTLSState returns ctx carrying st, the TLS state of the connection
// (a ScanConn's TLSState), for RestoreTLS. Call it from the server's
// ConnContext.
func WithTLSState(ctx context.Context, st *tls.ConnectionState) context.Context {
	return context.WithValue(ctx, tlsStateKey{}, st)
}

// RestoreTLS puts the TLS state of a scanned TLS connection, kept by
// WithTLSState, into r, as the server does for connections it terminates
// itself. A request that has its TLS state, or comes over plaintext, is
// left as it is.
func RestoreTLS(r *http.Request) {
	if r.TLS == nil {
		if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
			r.TLS = st
		}
	}
}
