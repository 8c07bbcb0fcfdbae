package proxy

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
// *tls.Conn it needs for HTTP/2, one that speaks HTTP/1.x as a scanConn
// over it. For those the server sees no *tls.Conn, so ConnContext keeps
// the TLS state for clientGuard to put back into each request.
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

func newTLSListener(inner net.Listener, cfg *tls.Config, timeout time.Duration) *tlsListener {
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
		c = wrapScan(tc)
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

// connTLSState returns the TLS state of a scanned TLS connection, or nil.
func connTLSState(c net.Conn) *tls.ConnectionState {
	sc, ok := c.(*scanConn)
	if !ok {
		return nil
	}
	tc, ok := sc.Conn.(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	return &st
}

// restoreTLS puts the TLS state of a scanned TLS connection into r, as
// the server does for connections it terminates itself.
func restoreTLS(r *http.Request) {
	if r.TLS == nil {
		if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
			r.TLS = st
		}
	}
}
