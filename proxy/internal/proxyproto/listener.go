// SPDX-License-Identifier: Apache-2.0

package proxyproto

import (
	"bufio"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Options configure a Listener.
type Options struct {
	// Trusted reports whether a connection whose socket peer is addr may
	// send a header (and then must); nil trusts no source. It is called
	// once per connection, in Accept, and must not block.
	Trusted func(addr netip.Addr) bool
	// HeaderTimeout bounds the wait for a trusted source's complete
	// header, from its connection's first Read or RemoteAddr; it must be
	// positive. An earlier read deadline set on the connection still
	// applies.
	HeaderTimeout time.Duration
	// Rejected, when set, is called once for each connection refused for
	// its header, from that connection's goroutine, with the reason and
	// the socket's peer address.
	Rejected func(reason Reason, peer net.Addr)
}

// Listener wraps a net.Listener whose trusted sources send a PROXY
// header. Accept returns at once with a *Conn: the header is read by the
// connection's first Read, Write or RemoteAddr, so one slow source never
// holds up Accept. A Listener is safe for concurrent use.
type Listener struct {
	net.Listener
	opts Options
}

// NewListener returns inner with the PROXY protocol on it.
func NewListener(inner net.Listener, opts Options) *Listener {
	return &Listener{Listener: inner, opts: opts}
}

// Accept waits for the next connection and wraps it. It reads nothing.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	trusted := false
	if l.opts.Trusted != nil {
		if a := peerAddr(c.RemoteAddr()); a.IsValid() {
			trusted = l.opts.Trusted(a)
		}
	}
	return &Conn{Conn: c, opts: &l.opts, trusted: trusted}, nil
}

// peerAddr returns the IP address of a, unmapped, or the zero Addr.
func peerAddr(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case nil:
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// Conn is an accepted connection of a Listener. Its first Read, Write or
// RemoteAddr reads the header (a trusted source's, within the header
// timeout) or looks for a signature (any other source's, within the
// deadlines its reader set); a refused connection fails every Read and
// Write with an *Error, and its owner closes it. RemoteAddr is the
// header's source address when one was believed, else the socket's peer.
// A Conn is safe for concurrent use, as a net.Conn is.
type Conn struct {
	net.Conn
	opts    *Options
	trusted bool

	once   sync.Once
	err    error    // why the connection is refused, or the read error that ended the header
	remote net.Addr // the believed client address, or nil

	bufMu sync.Mutex
	br    *bufio.Reader // bytes read past the header, until drained

	dlMu     sync.Mutex
	userRead time.Time // the read deadline the connection's owner set
	hdrUntil time.Time // the header's deadline while it is read, else zero
}

// bufSize is the header reader's buffer: a v1 line (107 bytes) must fit;
// longer v2 headers are read through it.
const bufSize = 256

// handshake reads the header once and returns why the connection is
// refused, if it is.
func (c *Conn) handshake() error {
	c.once.Do(c.readHeader)
	return c.err
}

func (c *Conn) readHeader() {
	br := bufio.NewReaderSize(c.Conn, bufSize)
	c.br = br
	if !c.trusted {
		// Never believed, so never waited for: only the first bytes the
		// client sends anyway are looked at, under its reader's deadlines.
		switch err := signature(br); {
		case err == nil:
			c.reject(&Error{Reason: ReasonUntrusted})
		case !errors.Is(err, errNoSignature):
			c.err = err
		}
		return
	}
	c.setHeaderDeadline(time.Now().Add(c.opts.HeaderTimeout))
	h, err := Parse(br)
	c.setHeaderDeadline(time.Time{})
	var pe *Error
	switch {
	case errors.As(err, &pe):
		c.reject(pe)
	case err != nil:
		c.err = err
	case !h.Local():
		c.remote = &net.TCPAddr{IP: h.Source.Addr().AsSlice(), Port: int(h.Source.Port())}
	}
}

func (c *Conn) reject(e *Error) {
	c.err = e
	if c.opts.Rejected != nil {
		c.opts.Rejected(e.Reason, c.Conn.RemoteAddr())
	}
}

// setHeaderDeadline sets the header's deadline t (zero: the header is
// read) and the socket's read deadline to the earlier of it and the
// owner's.
func (c *Conn) setHeaderDeadline(t time.Time) {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.hdrUntil = t
	_ = c.Conn.SetReadDeadline(earliest(c.userRead, t))
}

// earliest returns the earlier of two deadlines, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// Read reads the header first, then the connection's bytes.
func (c *Conn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	c.bufMu.Lock()
	if br := c.br; br != nil {
		if br.Buffered() > 0 {
			n, err := br.Read(b) // from the buffer only: never blocks
			c.bufMu.Unlock()
			return n, err
		}
		c.br = nil
	}
	c.bufMu.Unlock()
	return c.Conn.Read(b)
}

// Write reads the header first: nothing is sent to a connection that is
// refused.
func (c *Conn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// RemoteAddr returns the client's address from a believed header, else
// the socket's peer. From a trusted source it waits for the header.
func (c *Conn) RemoteAddr() net.Addr {
	if !c.trusted {
		return c.Conn.RemoteAddr()
	}
	_ = c.handshake()
	if c.remote != nil {
		return c.remote
	}
	return c.Conn.RemoteAddr()
}

// SetReadDeadline sets the owner's read deadline; while the header is
// read, the earlier of it and the header's deadline applies.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.userRead = t
	return c.Conn.SetReadDeadline(earliest(t, c.hdrUntil))
}

// SetDeadline sets the write deadline and, as SetReadDeadline, the read
// deadline.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// SetLinger passes on to the socket (a reset at the connection cap).
func (c *Conn) SetLinger(sec int) error {
	if s, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
		return s.SetLinger(sec)
	}
	return nil
}

// SyscallConn returns the socket's raw connection, for socket options.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if s, ok := c.Conn.(syscall.Conn); ok {
		return s.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// NetConn returns the wrapped connection.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Trusted reports whether the connection's socket peer is a trusted
// source.
func (c *Conn) Trusted() bool { return c.trusted }
