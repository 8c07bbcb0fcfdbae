// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"net"
	"net/netip"
	"time"
)

// Listener is a net.Listener that polices connections at accept time
// (early discard). Accept loops: it accepts a connection from the inner
// listener, asks the Policer, and
//
//   - for a rejected connection sets SO_LINGER 0 and closes it, so the
//     kernel answers with a TCP RST (the client's read or write fails with
//     ECONNRESET, having received no byte), then accepts the next one;
//   - returns an admitted connection, wrapped in a *Conn and added to the
//     Registry when one is set (TCP only; other connections are returned
//     as they are).
//
// Nothing is read from a rejected connection and no goroutine is started
// for it; an http.Server serving the Listener starts its per-connection
// goroutine only for admitted ones. A rejection costs one setsockopt and
// one close on top of the accept, and does not allocate beyond what the
// inner listener's Accept allocates.
//
// Errors of the inner Accept are counted (Stats.AcceptErrors) and returned
// unchanged, never retried here: http.Server.Serve already retries
// temporary errors (EMFILE, ENFILE) with a back-off from 5 ms to 1 s, and
// other callers keep control of their own policy; ECONNABORTED is retried
// by the net package itself. Accept therefore never spins: it loops only
// after a successful inner Accept of a connection it rejected, and it
// returns the inner listener's error once the listener is closed.
//
// A Listener is safe for concurrent use, like the inner listener. Several
// Listeners may share one Policer and one Registry (an IPv4 and an IPv6
// socket, for instance).
type Listener struct {
	inner net.Listener
	p     *Policer
	reg   *Registry

	// Now is the clock for policing decisions; nil (the default) means
	// time.Now. Set it before the first Accept.
	Now func() time.Time
}

// Wrap returns a Listener that polices the connections of inner with p. If
// reg is not nil, admitted TCP connections are tracked in it; nil tracks
// nothing and returns the inner connections unwrapped (the cheapest path).
func (p *Policer) Wrap(inner net.Listener, reg *Registry) *Listener {
	return &Listener{inner: inner, p: p, reg: reg}
}

// Policer returns the listener's policer.
func (l *Listener) Policer() *Policer { return l.p }

// Registry returns the listener's registry, or nil.
func (l *Listener) Registry() *Registry { return l.reg }

// Accept waits for and returns the next admitted connection; see Listener.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			l.p.noteAcceptError()
			return nil, err
		}
		var now time.Time
		if l.Now != nil {
			now = l.Now()
		} else {
			now = time.Now()
		}
		tc, isTCP := c.(*net.TCPConn)
		var src netip.Addr
		if l.p.sources != nil {
			src = sourceOf(c, tc)
		}
		if l.p.Admit(now, src) != Admitted {
			if isTCP {
				_ = tc.SetLinger(0)
			} else if s, ok := c.(interface{ SetLinger(int) error }); ok {
				_ = s.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		if l.reg != nil && isTCP {
			return l.reg.track(tc), nil
		}
		return c, nil
	}
}

// sourceOf returns the remote address of c, or the zero Addr if unknown.
func sourceOf(c net.Conn, tc *net.TCPConn) netip.Addr {
	var ra net.Addr
	if tc != nil {
		ra = tc.RemoteAddr()
	} else {
		ra = c.RemoteAddr()
	}
	if a, ok := ra.(*net.TCPAddr); ok {
		return a.AddrPort().Addr()
	}
	return netip.Addr{}
}

// Close closes the inner listener. Connections already accepted are not
// affected.
func (l *Listener) Close() error { return l.inner.Close() }

// Addr returns the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }
