// SPDX-License-Identifier: Apache-2.0

// Package proxyproto reads the PROXY protocol header (HAProxy's
// proxy-protocol.txt: version 1, a text line, and version 2, a binary
// block with optional TLVs) that a load balancer sends before a client's
// first byte, so that the proxy sees the client's address rather than the
// balancer's.
//
// The header is believed only from configured sources (HAProxy's
// accept-proxy behind a trust list): a connection from a trusted source
// must start with a header (a version 2 LOCAL header, or version 1
// UNKNOWN, keeps the socket's address, as the balancer's own health
// checks send); a connection from any other source is served as it
// comes, with its socket's address, unless it starts with a PROXY
// signature, which closes it. Every refusal is reported once per
// connection with a Reason.
//
// Parsing is github.com/pires/go-proxyproto's (both versions, TLV
// framing, the length limits); this package adds the trust policy, the
// header timeout, the reasons, and a net.Conn that reads the header in
// the connection's own goroutine on its first Read or RemoteAddr, never
// in Accept.
package proxyproto

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	pp "github.com/pires/go-proxyproto"
)

// Reason says why a connection was closed for its PROXY header. The
// values are the metric label proxy_proxy_protocol_rejected_total{reason}.
type Reason string

const (
	// ReasonUntrusted: a source that is not trusted started with a PROXY
	// signature (v1 "PROXY" or the v2 signature).
	ReasonUntrusted Reason = "untrusted"
	// ReasonMissing: a trusted source sent bytes that are not a PROXY
	// header.
	ReasonMissing Reason = "missing"
	// ReasonTimeout: a trusted source's header was not complete within the
	// header timeout.
	ReasonTimeout Reason = "timeout"
	// ReasonMalformed: a header that does not parse: bad syntax, a v1
	// line over 107 bytes or not sent in one piece, a v2 length over
	// 4096 bytes or short of its addresses, TLVs that do not frame, the
	// connection closed inside the header.
	ReasonMalformed Reason = "malformed"
	// ReasonUnsupported: a well-formed header for another transport than
	// TCP over IPv4 or IPv6 (UDP, Unix sockets).
	ReasonUnsupported Reason = "unsupported"
)

// Reasons lists every Reason, for metrics that export each from zero.
var Reasons = []Reason{ReasonUntrusted, ReasonMissing, ReasonTimeout, ReasonMalformed, ReasonUnsupported}

// Error is a refused header: its Reason and the parser's error.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "proxy protocol: " + string(e.Reason)
	}
	return fmt.Sprintf("proxy protocol: %s: %v", e.Reason, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Header is what a believed header says.
type Header struct {
	// Version is 1 or 2.
	Version int
	// Source is the client's address and port; the zero AddrPort for a
	// v2 LOCAL or v1 UNKNOWN header, whose connection keeps its socket's
	// address. An IPv4-mapped IPv6 address is given as IPv4.
	Source netip.AddrPort
}

// Local reports whether the header carries no client address (v2 LOCAL,
// v1 UNKNOWN): the connection is the balancer's own, such as a health
// check.
func (h Header) Local() bool { return !h.Source.IsValid() }

// sigV1 and sigV2 start a version 1 and a version 2 header.
var (
	sigV1 = []byte("PROXY")
	sigV2 = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

// errNoSignature: the first bytes are not a PROXY signature.
var errNoSignature = errors.New("no PROXY signature")

// signature reports whether br starts with a PROXY signature, peeking
// (never consuming) only as many bytes as it takes to tell: a plain
// request is told from a header by its first byte or the first byte that
// departs from both signatures. It returns errNoSignature for other
// bytes, io.EOF when the peer closed before sending any, and the read
// error otherwise (io.ErrUnexpectedEOF when the peer closed inside a
// signature).
func signature(br *bufio.Reader) error {
	for n := 1; ; {
		b, err := br.Peek(n)
		if err != nil {
			if err == io.EOF && n > 1 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		v1, v2 := startsLike(b, sigV1), startsLike(b, sigV2)
		switch {
		case (v1 && len(b) >= len(sigV1)) || (v2 && len(b) >= len(sigV2)):
			return nil
		case !v1 && !v2:
			return errNoSignature
		}
		// One byte more, or all that is already buffered.
		n = max(len(b)+1, min(br.Buffered(), len(sigV2)))
	}
}

// startsLike reports whether b and sig agree on their common length.
func startsLike(b, sig []byte) bool {
	n := min(len(b), len(sig))
	return bytes.Equal(b[:n], sig[:n])
}

// Parse reads the PROXY header of a trusted source from the start of br,
// leaving every byte after it in br. It returns io.EOF, unwrapped, when
// the connection closed before its first byte (a TCP check, nothing to
// refuse), and any other failure as an *Error with its Reason: missing
// when the first bytes are not a signature (nothing is consumed then),
// timeout when a read timed out, malformed or unsupported. A v2 header's
// TLVs must frame exactly; their content is ignored.
func Parse(br *bufio.Reader) (Header, error) {
	if err := signature(br); err != nil {
		switch {
		case err == io.EOF:
			return Header{}, io.EOF
		case err == errNoSignature:
			return Header{}, &Error{Reason: ReasonMissing}
		case isTimeout(err):
			return Header{}, &Error{Reason: ReasonTimeout, Err: err}
		}
		return Header{}, &Error{Reason: ReasonMalformed, Err: err}
	}
	h, err := pp.Read(br)
	if err != nil {
		if isTimeout(err) {
			return Header{}, &Error{Reason: ReasonTimeout, Err: err}
		}
		return Header{}, &Error{Reason: ReasonMalformed, Err: err}
	}
	out := Header{Version: int(h.Version)}
	if h.Version == 2 {
		if _, err := h.TLVs(); err != nil {
			return Header{}, &Error{Reason: ReasonMalformed, Err: err}
		}
	}
	if h.Command.IsLocal() {
		return out, nil
	}
	switch h.TransportProtocol {
	case pp.TCPv4, pp.TCPv6:
	default:
		return Header{}, &Error{Reason: ReasonUnsupported, Err: fmt.Errorf("transport %#x", byte(h.TransportProtocol))}
	}
	ta, ok := h.SourceAddr.(*net.TCPAddr)
	if !ok {
		return Header{}, &Error{Reason: ReasonMalformed, Err: errors.New("no source address")}
	}
	a, ok := netip.AddrFromSlice(ta.IP)
	if !ok || ta.Port < 0 || ta.Port > 65535 {
		return Header{}, &Error{Reason: ReasonMalformed, Err: fmt.Errorf("source address %v", ta)}
	}
	out.Source = netip.AddrPortFrom(a.Unmap(), uint16(ta.Port))
	return out, nil
}

// isTimeout reports whether err is, or wraps, a timeout (a read
// deadline that passed).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
