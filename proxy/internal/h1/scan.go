// SPDX-License-Identifier: Apache-2.0

package h1

import (
	"net"
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
// unfolds), and an HTTP/1.0 request with Transfer-Encoding, whose
// framing RFC 9112 §6.1 says to treat as faulty (Go ignores the header
// and frames the body by Content-Length, so the chunked body would be
// read as the next request).
//
// To see the raw bytes, plaintext listeners wrap each connection in a
// ScanConn that follows the HTTP/1.1 message framing of everything the
// server reads — request line, header block, then a Content-Length or
// chunked body (RFC 9112 §6, §7.1) — exactly as net/http frames it, with
// a fixed amount of memory per connection whatever the line lengths.
//
// The scanner fails closed. Whatever it does not accept as a framing
// net/http follows identically — a refused shape above, a chunk line Go
// would reject (bare LF, a CR inside, a size that is not 1–16 hex
// digits, whitespace before ';'), a chunk not followed by CRLF, an
// unusual trailer section, a Content-Length that is not digits, an HTTP
// version other than 1.x — poisons the connection from the request it
// occurs in: the handler refuses that request and every later one on
// the connection with 400 and closes it. A request whose own body was
// poisoned is refused once its body has been read (request buffering,
// the default) or its upstream exchange fails and is answered 400. A
// handler that asks for a request the scanner has not seen the header
// block of (the two parsers disagree) is refused too. So the scanner
// never goes quiet: after it gives up, nothing more on the connection
// reaches a backend.
//
// TLS listeners terminate TLS in the listener (NewTLSListener) and scan
// HTTP/1.x over TLS the same way; HTTP/2, whose framing has no such
// ambiguity, is handed to the server unscanned.

// Parser states.
const (
	scanRequestLine = iota
	scanHeaderStart // at the first byte of a header line
	scanHeaderName
	scanHeaderValue
	scanBody
	scanChunkSize
	scanChunkData
	scanChunkCR // after chunk data: want CR
	scanChunkLF // after chunk data and CR: want LF
	scanTrailerStart
	scanTrailerLine
	scanStopped
)

// Header fields the scanner follows.
const (
	hdrOther = iota
	hdrContentLength
	hdrTransferEncoding
)

// Limits of the scanner, stricter than net/http's where they differ (a
// longer line poisons the connection).
const (
	// maxChunkLine is the longest chunk-size line, extensions included,
	// in bytes without its CRLF (net/http: 4094).
	maxChunkLine = 4000
	// maxTrailer is the longest trailer section in bytes (net/http needs
	// it within its 4096-byte read buffer).
	maxTrailer = 4000
	// maxChunkSize is the largest chunk size accepted, in bytes: 2^62.
	maxChunkSize = 1 << 62
)

// ScanConn is a client connection whose reads are scanned for smuggling
// shapes, in a fixed amount of memory whatever the lines it sees.
//
// Read is called by one goroutine at a time (the server's); Next,
// Ordinal, BodyFault and Stop may be called by the request handlers
// concurrently with it (the verdicts are atomics). The zero value has no
// connection: make one with NewScanConn.
type ScanConn struct {
	// Conn is the connection scanned (a *tls.Conn on a TLS listener).
	net.Conn
	stopped atomic.Bool   // set on upgrade; the parser stops at the next Read
	h2      atomic.Bool   // the connection opened with HTTP/2's preface (h2c)
	pre     int           // bytes of HTTP/2's preface matched at the start; -1: not HTTP/2
	served  atomic.Uint64 // requests handed to handlers so far

	blocks    atomic.Uint64 // header blocks completed
	poisonAt  atomic.Uint64 // first refused request ordinal; 0: none
	poisonWhy string        // written once, before poisonAt

	// parser state, owned by the reading goroutine
	state   int
	cr      bool // the previous byte was a CR inside a line
	phase   int  // position inside the current line (per state)
	lineLen int  // bytes of the current chunk line or trailer section
	http10  bool // the request's version is below 1.1
	proto   [8]byte
	protoN  int
	name    [17]byte // lower-cased header name, up to len("transfer-encoding")
	nameN   int
	nameCut bool // the name is longer than name
	hdr     int  // hdrOther, hdrContentLength, hdrTransferEncoding
	match   int  // bytes of "chunked" matched
	val     uint64
	valN    int // digits of a Content-Length value
	clCount int
	cl      uint64
	teCount int
	remain  uint64
	excess  int64 // net/http's chunk-overhead account
}

// NewScanConn wraps c in a ScanConn.
func NewScanConn(c net.Conn) *ScanConn { return &ScanConn{Conn: c} }

// Read reads from the connection and scans what it read.
func (c *ScanConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.state != scanStopped {
		if c.stopped.Load() {
			c.state = scanStopped
		} else {
			b := p[:n]
			if c.pre >= 0 {
				b = c.preface(b)
			}
			c.scan(b)
		}
	}
	return n, err
}

// h2Preface opens every HTTP/2 connection with prior knowledge (RFC 9113
// §3.4): an h2c client, such as a gRPC client without TLS.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// preface matches the start of the connection against HTTP/2's preface
// and returns what is left to scan as HTTP/1. A connection that opens
// with the whole preface is HTTP/2: HTTP/1 framing, and so smuggling,
// does not apply to it, and the parser stops (HTTP2 reports it). On the
// first byte that differs, the bytes matched so far are scanned as the
// HTTP/1 request line they begin, then the rest.
func (c *ScanConn) preface(b []byte) []byte {
	for i := 0; i < len(b); i++ {
		if b[i] != h2Preface[c.pre] {
			matched := c.pre
			c.pre = -1
			c.scan([]byte(h2Preface[:matched]))
			return b[i:]
		}
		if c.pre++; c.pre == len(h2Preface) {
			c.pre = -1
			c.h2.Store(true)
			c.state = scanStopped
			return nil
		}
	}
	return nil
}

// HTTP2 reports whether the connection opened with HTTP/2's preface: its
// requests are HTTP/2 streams, which the scanner does not follow (Next
// does not apply to them).
func (c *ScanConn) HTTP2() bool { return c.h2.Load() }

// Next returns the verdict for the next request the server hands to a
// handler on this connection: "" for a clean request, otherwise why it is
// refused. Call it exactly once per request, first.
func (c *ScanConn) Next() string {
	n := c.served.Add(1)
	if at := c.poisonAt.Load(); at != 0 && n >= at {
		return c.poisonWhy
	}
	if n > c.blocks.Load() {
		return "the proxy could not follow the request framing"
	}
	return ""
}

// Ordinal returns the ordinal of the request being handled (after Next),
// from 1.
func (c *ScanConn) Ordinal() uint64 { return c.served.Load() }

// BodyFault returns why request n (its Ordinal) is refused once its body
// has been read: the scanner failed inside it, or "".
func (c *ScanConn) BodyFault(n uint64) string {
	if at := c.poisonAt.Load(); at != 0 && at <= n {
		return c.poisonWhy
	}
	return ""
}

// Stop ends scanning (the connection was upgraded to another protocol):
// the parser stops at the next Read.
func (c *ScanConn) Stop() { c.stopped.Store(true) }

// poison refuses the request being parsed and every later one, and stops
// the parser.
func (c *ScanConn) poison(why string) {
	n := c.blocks.Load()
	if c.state < scanBody {
		n++ // inside a request line or header block: that request
	}
	if c.poisonAt.Load() == 0 {
		c.poisonWhy = why
		c.poisonAt.Store(max(n, 1))
	}
	c.state = scanStopped
}

// scan advances the parser over b.
func (c *ScanConn) scan(b []byte) {
	for len(b) > 0 {
		switch c.state {
		case scanStopped:
			return
		case scanBody, scanChunkData:
			k := uint64(len(b))
			if k > c.remain {
				k = c.remain
			}
			c.remain -= k
			b = b[k:]
			if c.remain == 0 {
				if c.state == scanBody {
					c.state = scanRequestLine
					c.phase = 0
				} else {
					c.state = scanChunkCR
				}
			}
		default:
			c.step(b[0])
			b = b[1:]
		}
	}
}

// step advances the line-oriented states by one byte.
func (c *ScanConn) step(x byte) {
	// Line endings: CRLF, or a bare LF where net/http accepts one (request
	// line, header and trailer lines: no; see each state). A CR anywhere
	// else inside a line is refused: net/http rejects it in every place.
	if c.cr {
		c.cr = false
		if x != '\n' {
			c.poison("bare CR in the request")
			return
		}
		c.endLine()
		return
	}
	switch c.state {
	case scanRequestLine:
		c.stepRequestLine(x)
	case scanHeaderStart:
		switch x {
		case '\r':
			c.cr = true
			c.phase = -1 // an empty line
		case '\n':
			c.phase = -1
			c.endLine()
		case ' ', '\t':
			c.poison("request headers use obsolete line folding")
		default:
			c.nameN, c.nameCut, c.hdr = 0, false, hdrOther
			c.state = scanHeaderName
			c.stepName(x)
		}
	case scanHeaderName:
		c.stepName(x)
	case scanHeaderValue:
		c.stepValue(x)
	case scanChunkSize:
		c.stepChunkSize(x)
	case scanChunkCR:
		if x != '\r' {
			c.poison("chunk data not followed by CRLF")
			return
		}
		c.state = scanChunkLF
	case scanChunkLF:
		if x != '\n' {
			c.poison("chunk data not followed by CRLF")
			return
		}
		c.state, c.phase, c.lineLen = scanChunkSize, 0, 0
	case scanTrailerStart, scanTrailerLine:
		if !c.countLine(maxTrailer, "chunked trailer section too long") {
			return
		}
		switch {
		case x == '\r':
			if c.state == scanTrailerLine && c.phase != 1 {
				c.poison("malformed chunked trailer field")
				return
			}
			c.cr = true
		case x == '\n':
			c.poison("bare LF in the chunked trailer section")
		case c.state == scanTrailerStart && (x == ' ' || x == '\t' || x == ':'):
			c.poison("malformed chunked trailer field")
		case c.state == scanTrailerStart:
			c.state, c.phase = scanTrailerLine, 0
		case c.phase == 0 && x == ':':
			c.phase = 1 // the value: anything but CR and LF
		case c.phase == 0 && (x == ' ' || x == '\t'):
			c.poison("malformed chunked trailer field")
		}
	}
}

// stepRequestLine follows "method SP target SP HTTP/x.y".
func (c *ScanConn) stepRequestLine(x byte) {
	switch c.phase {
	case 0: // before the method: tolerate CR and LF between requests
		if x == '\r' || x == '\n' {
			return // net/http skips up to 4 after a POST, else refuses: either way no handler
		}
		c.phase, c.protoN = 1, 0
		fallthrough
	case 1, 2: // method, then target: each ends at its space
		switch x {
		case ' ':
			c.phase++
		case '\r', '\n':
			c.poison("malformed request line")
		}
	case 3: // version
		switch x {
		case '\r':
			c.cr = true
		case '\n':
			c.endLine()
		default:
			if !push(c.proto[:], &c.protoN, x) {
				c.poison("malformed HTTP version")
			}
		}
	}
}

// countLine counts a byte of the current chunk line or trailer section
// and, past most bytes, poisons the connection with why and reports
// false.
func (c *ScanConn) countLine(most int, why string) bool {
	c.lineLen++
	if c.lineLen > most {
		c.poison(why)
		return false
	}
	return true
}

// push stores x at buf[*n] and advances *n, or reports false when buf
// is full.
func push(buf []byte, n *int, x byte) bool {
	if *n == len(buf) {
		return false
	}
	buf[*n] = x
	*n++
	return true
}

// stepName follows a header name up to its colon.
func (c *ScanConn) stepName(x byte) {
	switch x {
	case ':':
		c.hdr = hdrOther
		if !c.nameCut {
			switch string(c.name[:c.nameN]) {
			case "content-length":
				c.hdr = hdrContentLength
			case "transfer-encoding":
				c.hdr = hdrTransferEncoding
			}
		}
		c.state, c.phase, c.match, c.val, c.valN = scanHeaderValue, 0, 0, 0, 0
	case ' ', '\t', '\r', '\n':
		c.poison("malformed header line")
	default:
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if !push(c.name[:], &c.nameN, x) {
			c.nameCut = true
		}
	}
}

// stepValue follows a header value. Content-Length must be OWS digits
// OWS and Transfer-Encoding OWS "chunked" OWS (case-insensitive), the
// only values net/http frames a request by; anything else poisons (Go
// answers 400 or 501 to them).
func (c *ScanConn) stepValue(x byte) {
	switch x {
	case '\r':
		c.cr = true
		return
	case '\n':
		c.endLine()
		return
	}
	ows := x == ' ' || x == '\t'
	if x == '\t' && c.hdr != hdrOther {
		// RFC 9110 §5.6.3 allows HTAB as OWS, but no client puts one
		// around a framing value and nginx refuses it: so do we.
		c.poison("tab in a Content-Length or Transfer-Encoding value")
		return
	}
	switch c.hdr {
	case hdrContentLength:
		switch {
		case ows && c.phase != 1:
		case ows: // after the digits
			c.phase = 2
		case x >= '0' && x <= '9' && c.phase < 2:
			c.phase = 1
			if c.val > (1<<63-1)/10 {
				c.poison("Content-Length out of range")
				return
			}
			c.val = c.val*10 + uint64(x-'0')
			if c.val > 1<<63-1 {
				c.poison("Content-Length out of range")
				return
			}
			c.valN++
		default:
			c.poison("invalid Content-Length")
		}
	case hdrTransferEncoding:
		const want = "chunked"
		switch {
		case ows && (c.phase == 0 || c.match == len(want)):
			if c.match == len(want) {
				c.phase = 2
			}
		case c.phase < 2 && c.match < len(want) && (x|0x20) == want[c.match]:
			c.phase = 1
			c.match++
		default:
			c.poison("unsupported Transfer-Encoding")
		}
	}
}

// stepChunkSize follows a chunk-size line: 1–16 hex digits, then
// optionally ';' and an extension, then CRLF (net/http's readChunkLine,
// removeChunkExtension and parseHexUint). Whitespace after the digits,
// which net/http trims but RFC 9112 §7.1 does not allow, poisons.
func (c *ScanConn) stepChunkSize(x byte) {
	if !c.countLine(maxChunkLine, "chunk-size line too long") {
		return
	}
	switch {
	case x == '\r':
		if c.valN == 0 {
			c.poison("empty chunk size")
			return
		}
		c.cr = true
	case x == '\n':
		c.poison("bare LF in a chunk-size line")
	case c.phase == 0 && hexDigit(x) >= 0:
		if c.valN == 16 {
			c.poison("chunk size longer than 16 hex digits")
			return
		}
		c.val = c.val<<4 | uint64(hexDigit(x))
		c.valN++
	case c.phase == 0 && x == ';' && c.valN > 0:
		c.phase = 2 // an extension: anything but CR and LF
	case c.phase == 2:
	default:
		c.poison("invalid chunk-size line")
	}
}

func hexDigit(x byte) int {
	switch {
	case '0' <= x && x <= '9':
		return int(x - '0')
	case 'a' <= x && x <= 'f':
		return int(x-'a') + 10
	case 'A' <= x && x <= 'F':
		return int(x-'A') + 10
	}
	return -1
}

// endLine ends the current line, at its LF (the states that refuse a
// bare LF poison before calling it).
func (c *ScanConn) endLine() {
	switch c.state {
	case scanRequestLine:
		c.endRequestLine()
	case scanHeaderStart:
		c.endHeaders()
	case scanHeaderName:
		c.poison("malformed header line") // unreachable: stepName poisons first
	case scanHeaderValue:
		c.endHeaderLine()
	case scanChunkSize:
		c.endChunkSize()
	case scanTrailerStart:
		c.state, c.phase = scanRequestLine, 0 // the empty line ends the body
	case scanTrailerLine:
		c.state = scanTrailerStart
	}
}

func (c *ScanConn) endRequestLine() {
	if c.phase != 3 {
		c.poison("malformed request line")
		return
	}
	p := c.proto[:c.protoN]
	if c.protoN != 8 || string(p[:5]) != "HTTP/" || p[6] != '.' || p[5] < '0' || p[5] > '9' || p[7] < '0' || p[7] > '9' {
		c.poison("malformed HTTP version")
		return
	}
	if p[5] != '1' {
		c.poison("HTTP version " + string(p[5:]) + " on an HTTP/1 connection")
		return
	}
	c.http10 = p[7] == '0'
	c.clCount, c.cl, c.teCount = 0, 0, 0
	c.state = scanHeaderStart
}

func (c *ScanConn) endHeaderLine() {
	switch c.hdr {
	case hdrContentLength:
		if c.valN == 0 {
			c.poison("invalid Content-Length")
			return
		}
		c.clCount++
		if c.clCount > 1 {
			// net/http accepts identical copies (RFC 9112 §6.3 allows
			// either); nginx refuses any duplicate, and so do we.
			c.poison("request has several Content-Length headers")
			return
		}
		c.cl = c.val
	case hdrTransferEncoding:
		if c.match != len("chunked") {
			c.poison("unsupported Transfer-Encoding")
			return
		}
		c.teCount++
	}
	c.state = scanHeaderStart
}

// endHeaders ends a request's header block: count it, then follow the
// body framing the server will use.
func (c *ScanConn) endHeaders() {
	switch {
	case c.teCount > 0 && c.http10:
		c.poison("HTTP/1.0 request with Transfer-Encoding (RFC 9112 §6.1)")
	case c.teCount > 0 && c.clCount > 0:
		c.poison("request has both Content-Length and Transfer-Encoding")
	case c.teCount > 1:
		c.poison("unsupported Transfer-Encoding")
	}
	if c.state == scanStopped {
		return
	}
	c.blocks.Add(1)
	c.phase, c.lineLen, c.val, c.valN, c.excess = 0, 0, 0, 0, 0
	switch {
	case c.teCount == 1:
		c.state = scanChunkSize
	case c.clCount > 0 && c.cl > 0:
		c.remain, c.state = c.cl, scanBody
	default:
		c.state = scanRequestLine
	}
}

func (c *ScanConn) endChunkSize() {
	n := c.val
	if n > maxChunkSize {
		c.poison("chunk size out of range")
		return
	}
	// net/http's guard against chunk-extension abuse: 16 bytes of
	// overhead per chunk plus twice its data, at most 16 KiB in excess.
	c.excess += int64(c.lineLen) + 1 // lineLen counted the CR: the line without CRLF, plus 2
	c.excess -= 16 + 2*int64(n)
	c.excess = max(c.excess, 0)
	if c.excess > 16*1024 {
		c.poison("chunked encoding contains too much non-data")
		return
	}
	c.phase, c.val, c.valN, c.lineLen = 0, 0, 0, 0
	if n == 0 {
		c.state = scanTrailerStart
		return
	}
	c.remain, c.state = n, scanChunkData
}
