package proxy

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
)

// Request smuggling guard.
//
// Go's HTTP/1 server already answers 400 to a request with several
// Content-Length headers that differ, 501 to a Transfer-Encoding other
// than a single "chunked", and 400 to malformed header lines. But it
// accepts a request carrying both Content-Length and Transfer-Encoding:
// chunked, following RFC 9112 §6.3 (chunked wins, Content-Length is
// dropped) — by the time a handler runs the Content-Length is gone. The
// RFC adds that such a message "ought to be handled as an error", and it
// is the classic smuggling shape, so the proxy refuses it with 400 and
// closes the connection. It also refuses obsolete line folding in request
// headers (RFC 9112 §5.2 allows either rejecting or unfolding; Go
// unfolds).
//
// To see the raw header lines, plaintext listeners wrap each connection
// in a scanConn that follows the HTTP/1.1 message framing of the bytes the
// server reads (header block, then a Content-Length or chunked body) and
// records, per request on the connection, whether its header block had a
// forbidden shape. The handler asks for the verdict of its request by its
// ordinal on the connection (requests on one connection are served in
// order). Memory per connection is fixed: only the first bytes of each
// line are kept. When the scanner cannot follow the framing (the server
// would fail on the same bytes and close the connection) or the
// connection is upgraded, it stops.
//
// TLS listeners are not scanned (the server needs the *tls.Conn itself to
// negotiate HTTP/2); there HTTP/2 has no such ambiguity, and HTTP/1.1
// keeps Go's behaviour.

// scanListener wraps accepted connections in scanConns. Accept errors are
// returned unchanged, so http.Server's back-off on temporary errors such
// as EMFILE applies.
type scanListener struct{ net.Listener }

func (l scanListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &scanConn{Conn: c}, nil
}

// Parser states.
const (
	scanRequestLine = iota
	scanHeaders
	scanBody
	scanChunkSize
	scanChunkData
	scanChunkCRLF
	scanTrailers
	scanStopped
)

// keepLine is how many leading bytes of a line the scanner keeps: enough
// for a header name and a Content-Length or Transfer-Encoding value.
const keepLine = 64

// scanConn is a connection whose reads are scanned for smuggling shapes.
// Read is called by one goroutine at a time (the server's); verdicts are
// read by handlers under mu.
type scanConn struct {
	net.Conn
	stopped atomic.Bool // set on upgrade; the parser stops at the next Read
	served  atomic.Uint64

	// parser state, owned by the reading goroutine
	state   int
	line    [keepLine]byte
	lineLen int
	lineCut bool // the line was longer than keepLine
	tail    [16]byte
	tailLen int
	http10  bool
	clCount int
	cl      int64
	clBad   bool
	teCount int
	teChunk bool
	folded  bool
	remain  int64
	crlf    int
	blocks  uint64 // header blocks completed

	mu      sync.Mutex
	flagged []scanVerdict
}

type scanVerdict struct {
	ordinal uint64
	reason  string
}

func (c *scanConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.state != scanStopped {
		if c.stopped.Load() {
			c.state = scanStopped
		} else {
			c.scan(p[:n])
		}
	}
	return n, err
}

// next returns the verdict for the next request the server hands to a
// handler on this connection: "" for a clean request, otherwise why it is
// refused.
func (c *scanConn) next() string {
	n := c.served.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	reason := ""
	k := 0
	for _, v := range c.flagged {
		if v.ordinal == n {
			reason = v.reason
		}
		if v.ordinal > n {
			c.flagged[k] = v
			k++
		}
	}
	c.flagged = c.flagged[:k]
	return reason
}

// stop ends scanning (the connection was upgraded to another protocol).
func (c *scanConn) stop() { c.stopped.Store(true) }

// scan advances the parser over b.
func (c *scanConn) scan(b []byte) {
	for len(b) > 0 {
		switch c.state {
		case scanStopped:
			return
		case scanBody, scanChunkData:
			k := int64(len(b))
			if k > c.remain {
				k = c.remain
			}
			c.remain -= k
			b = b[k:]
			if c.remain == 0 {
				if c.state == scanBody {
					c.state = scanRequestLine
				} else {
					c.state, c.crlf = scanChunkCRLF, 0
				}
			}
		case scanChunkCRLF:
			want := "\r\n"[c.crlf]
			if b[0] != want {
				c.state = scanStopped // the server fails on it too
				return
			}
			b = b[1:]
			c.crlf++
			if c.crlf == 2 {
				c.state = scanChunkSize
			}
		default:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				c.addLine(b)
				return
			}
			c.addLine(b[:i])
			b = b[i+1:]
			c.endLine()
			c.lineLen, c.lineCut, c.tailLen = 0, false, 0
		}
	}
}

func (c *scanConn) addLine(seg []byte) {
	k := copy(c.line[c.lineLen:], seg)
	c.lineLen += k
	if k < len(seg) {
		c.lineCut = true
	}
	if len(seg) >= len(c.tail) {
		c.tailLen = copy(c.tail[:], seg[len(seg)-len(c.tail):])
		return
	}
	// shift the tail left to make room for seg
	keep := min(c.tailLen, len(c.tail)-len(seg))
	copy(c.tail[:], c.tail[c.tailLen-keep:c.tailLen])
	c.tailLen = keep + copy(c.tail[keep:], seg)
}

// lineBytes returns the kept line without its trailing CR.
func (c *scanConn) lineBytes() []byte {
	l := c.line[:c.lineLen]
	if !c.lineCut && len(l) > 0 && l[len(l)-1] == '\r' {
		l = l[:len(l)-1]
	}
	return l
}

func (c *scanConn) endLine() {
	l := c.lineBytes()
	switch c.state {
	case scanRequestLine:
		if len(l) == 0 && !c.lineCut {
			return // tolerate empty lines between requests
		}
		if bytes.HasPrefix(l, []byte("PRI * HTTP/2")) {
			c.state = scanStopped // HTTP/2 prior knowledge: not ours
			return
		}
		tail := c.tail[:c.tailLen]
		tail = bytes.TrimSuffix(tail, []byte("\r"))
		c.http10 = bytes.HasSuffix(tail, []byte("HTTP/1.0"))
		c.clCount, c.cl, c.clBad, c.teCount, c.teChunk, c.folded = 0, 0, false, 0, false, false
		c.state = scanHeaders
	case scanHeaders:
		if len(l) == 0 && !c.lineCut {
			c.endHeaders()
			return
		}
		if l[0] == ' ' || l[0] == '\t' {
			c.folded = true
			return
		}
		colon := bytes.IndexByte(l, ':')
		if colon < 0 {
			return // the server refuses the line and closes
		}
		name, value := l[:colon], bytes.Trim(l[colon+1:], " \t")
		switch {
		case asciiEqualFold(name, "content-length"):
			c.clCount++
			v, ok := parseDecimal(value, c.lineCut)
			if !ok {
				c.clBad = true
			} else if c.clCount == 1 {
				c.cl = v
			} else if v != c.cl {
				c.clBad = true
			}
		case asciiEqualFold(name, "transfer-encoding"):
			c.teCount++
			c.teChunk = !c.lineCut && asciiEqualFold(value, "chunked")
		}
	case scanChunkSize:
		v, ok := parseChunkSize(l, c.lineCut)
		if !ok {
			c.state = scanStopped
			return
		}
		if v == 0 {
			c.state = scanTrailers
			return
		}
		c.remain, c.state = v, scanChunkData
	case scanTrailers:
		if len(l) == 0 && !c.lineCut {
			c.state = scanRequestLine
		}
	}
}

// endHeaders ends a request's header block: record the verdict, then
// follow the body framing the server will use.
func (c *scanConn) endHeaders() {
	c.blocks++
	reason := ""
	switch {
	case c.teCount > 0 && c.clCount > 0:
		reason = "request has both Content-Length and Transfer-Encoding"
	case c.folded:
		reason = "request headers use obsolete line folding"
	}
	if reason != "" {
		c.mu.Lock()
		c.flagged = append(c.flagged, scanVerdict{ordinal: c.blocks, reason: reason})
		c.mu.Unlock()
		c.state = scanStopped // the connection is closed after the 400
		return
	}
	switch {
	case c.teCount > 0 && !c.http10:
		if c.teCount != 1 || !c.teChunk {
			c.state = scanStopped // the server answers 501 and closes
			return
		}
		c.state = scanChunkSize
	case c.clBad:
		c.state = scanStopped // the server answers 400 and closes
	case c.clCount > 0 && c.cl > 0:
		c.remain, c.state = c.cl, scanBody
	default:
		c.state = scanRequestLine
	}
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x := b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		y := s[i]
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// parseDecimal parses a Content-Length value (digits only; empty is 0 as
// in Go's server).
func parseDecimal(b []byte, cut bool) (int64, bool) {
	if cut || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, x := range b {
		if x < '0' || x > '9' {
			return 0, false
		}
		v = v*10 + int64(x-'0')
	}
	return v, true
}

// parseChunkSize parses a chunk-size line: hex digits, optional
// whitespace and extensions after ';'.
func parseChunkSize(b []byte, cut bool) (int64, bool) {
	if i := bytes.IndexByte(b, ';'); i >= 0 {
		b = b[:i]
	} else if cut {
		return 0, false
	}
	b = bytes.TrimRight(b, " \t")
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var v int64
	for _, x := range b {
		var d byte
		switch {
		case '0' <= x && x <= '9':
			d = x - '0'
		case 'a' <= x && x <= 'f':
			d = x - 'a' + 10
		case 'A' <= x && x <= 'F':
			d = x - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | int64(d)
	}
	return v, true
}
