// SPDX-License-Identifier: Apache-2.0

package proxyproto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// v2 builds a version 2 header by hand (proxy-protocol.txt §2.2): the
// signature, the version and command byte, the family and transport
// byte, the length, then the address block and the TLVs.
func v2(cmd, fam byte, block, tlvs []byte) []byte {
	b := append([]byte(nil), sigV2...)
	b = append(b, cmd, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(len(block)+len(tlvs)))
	b = append(b, block...)
	return append(b, tlvs...)
}

// block4 and block6 are address blocks: source, destination, ports.
func block4(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	b := append(s[:], d[:]...)
	b = binary.BigEndian.AppendUint16(b, sport)
	return binary.BigEndian.AppendUint16(b, dport)
}

func block6(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	b := append(s[:], d[:]...)
	b = binary.BigEndian.AppendUint16(b, sport)
	return binary.BigEndian.AppendUint16(b, dport)
}

// tlv is one type-length-value entry.
func tlv(typ byte, val string) []byte {
	b := []byte{typ}
	b = binary.BigEndian.AppendUint16(b, uint16(len(val)))
	return append(b, val...)
}

const (
	cmdLocal = 0x20
	cmdProxy = 0x21
	tcp4     = 0x11
	udp4     = 0x12
	tcp6     = 0x21
	unixStr  = 0x31
)

const rest = "GET / HTTP/1.1\r\n"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     []byte
		src    string // "" for a local header
		reason Reason // "" when accepted
		left   string // what br holds after a header, or after a refused missing one
	}{
		{name: "v1 tcp4", in: []byte("PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\n" + rest), src: "203.0.113.7:56324", left: rest},
		{name: "v1 tcp6", in: []byte("PROXY TCP6 2001:db8::7 2001:db8::1 65535 443\r\n" + rest), src: "[2001:db8::7]:65535", left: rest},
		{name: "v1 unknown", in: []byte("PROXY UNKNOWN\r\n" + rest), left: rest},
		{name: "v1 unknown with addresses", in: []byte("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n" + rest), left: rest},
		{name: "v2 tcp4", in: append(v2(cmdProxy, tcp4, block4("203.0.113.7", "192.0.2.1", 40000, 443), nil), rest...), src: "203.0.113.7:40000", left: rest},
		{name: "v2 tcp6", in: append(v2(cmdProxy, tcp6, block6("2001:db8::7", "2001:db8::1", 40000, 443), nil), rest...), src: "[2001:db8::7]:40000", left: rest},
		{name: "v2 tcp6 mapped", in: v2(cmdProxy, tcp6, block6("::ffff:198.51.100.9", "::1", 1, 2), nil), src: "198.51.100.9:1"},
		{name: "v2 tlvs ignored", in: append(v2(cmdProxy, tcp4, block4("203.0.113.7", "192.0.2.1", 1, 2),
			slices(tlv(0x01, "h2"), tlv(0x04, "\x00\x00"), tlv(0x05, "req-42"), tlv(0xe1, "vendor"))), rest...), src: "203.0.113.7:1", left: rest},
		{name: "v2 local", in: append(v2(cmdLocal, 0x00, nil, nil), rest...), left: rest},
		{name: "v2 local with a block", in: append(v2(cmdLocal, tcp4, block4("10.0.0.1", "10.0.0.2", 1, 2), nil), rest...), left: rest},

		{name: "plain request", in: []byte(rest), reason: ReasonMissing, left: rest},
		{name: "h2 preface", in: []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), reason: ReasonMissing, left: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
		{name: "leading crlf", in: []byte("\r\n" + rest), reason: ReasonMissing, left: "\r\n" + rest},
		{name: "tls client hello", in: []byte("\x16\x03\x01\x02\x00\x01"), reason: ReasonMissing, left: "\x16\x03\x01\x02\x00\x01"},

		{name: "v1 without cr", in: []byte("PROXY TCP4 203.0.113.7 192.0.2.1 1 2\n"), reason: ReasonMalformed},
		{name: "v1 leading zero port", in: []byte("PROXY TCP4 203.0.113.7 192.0.2.1 080 2\r\n"), reason: ReasonMalformed},
		{name: "v1 port too large", in: []byte("PROXY TCP4 203.0.113.7 192.0.2.1 65536 2\r\n"), reason: ReasonMalformed},
		{name: "v1 family mismatch", in: []byte("PROXY TCP4 2001:db8::7 192.0.2.1 1 2\r\n"), reason: ReasonMalformed},
		{name: "v1 ipv4 in tcp6", in: []byte("PROXY TCP6 203.0.113.7 2001:db8::1 1 2\r\n"), reason: ReasonMalformed},
		{name: "v1 zone", in: []byte("PROXY TCP6 fe80::1%eth0 2001:db8::1 1 2\r\n"), reason: ReasonMalformed},
		{name: "v1 double space", in: []byte("PROXY  TCP4 203.0.113.7 192.0.2.1 1 2\r\n"), reason: ReasonMalformed},
		{name: "v1 extra field", in: []byte("PROXY TCP4 203.0.113.7 192.0.2.1 1 2 3\r\n"), reason: ReasonMalformed},
		{name: "v1 unknown protocol", in: []byte("PROXY UDP4 203.0.113.7 192.0.2.1 1 2\r\n"), reason: ReasonMalformed},
		{name: "v1 glued", in: []byte("PROXYTCP4 203.0.113.7 192.0.2.1 1 2\r\n"), reason: ReasonMalformed},
		{name: "v1 oversized", in: []byte("PROXY TCP4 " + strings.Repeat("1", 120) + "\r\n"), reason: ReasonMalformed},
		{name: "v1 truncated", in: []byte("PROXY TCP4 203.0.113.7 192.0"), reason: ReasonMalformed},
		{name: "signature truncated", in: []byte("PROX"), reason: ReasonMalformed},
		{name: "v2 signature truncated", in: sigV2[:7], reason: ReasonMalformed},
		{name: "v2 version 1", in: v2(0x11, tcp4, block4("1.2.3.4", "5.6.7.8", 1, 2), nil), reason: ReasonMalformed},
		{name: "v2 unknown command", in: v2(0x22, tcp4, block4("1.2.3.4", "5.6.7.8", 1, 2), nil), reason: ReasonMalformed},
		{name: "v2 unknown family", in: v2(cmdProxy, 0x41, block4("1.2.3.4", "5.6.7.8", 1, 2), nil), reason: ReasonMalformed},
		{name: "v2 proxy unspec", in: v2(cmdProxy, 0x00, nil, nil), reason: ReasonMalformed},
		{name: "v2 block too short", in: v2(cmdProxy, tcp4, block4("1.2.3.4", "5.6.7.8", 1, 2)[:11], nil), reason: ReasonMalformed},
		{name: "v2 truncated", in: v2(cmdProxy, tcp6, block6("2001:db8::7", "::1", 1, 2), nil)[:30], reason: ReasonMalformed},
		{name: "v2 tlv truncated", in: v2(cmdProxy, tcp4, block4("1.2.3.4", "5.6.7.8", 1, 2), tlv(0x01, "h2")[:4]), reason: ReasonMalformed},
		{name: "v2 oversized", in: v2(cmdProxy, tcp4, block4("1.2.3.4", "5.6.7.8", 1, 2), tlv(0xe0, strings.Repeat("x", 4096))), reason: ReasonMalformed},
		{name: "v2 udp", in: v2(cmdProxy, udp4, block4("1.2.3.4", "5.6.7.8", 1, 2), nil), reason: ReasonUnsupported},
		{name: "v2 unix", in: v2(cmdProxy, unixStr, make([]byte, 216), nil), reason: ReasonUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := bufio.NewReaderSize(bytes.NewReader(c.in), bufSize)
			h, err := Parse(br)
			if c.reason != "" {
				var pe *Error
				if !errors.As(err, &pe) || pe.Reason != c.reason {
					t.Fatalf("Parse = %+v, %v; want a refusal %q", h, err, c.reason)
				}
				if c.left != "" {
					if got := drain(br); got != c.left {
						t.Errorf("left %q, want %q", got, c.left)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if (c.src == "") != h.Local() || (c.src != "" && h.Source.String() != c.src) {
				t.Errorf("source %v (local %v), want %q", h.Source, h.Local(), c.src)
			}
			if got := drain(br); got != c.left {
				t.Errorf("left %q, want %q", got, c.left)
			}
		})
	}
}

func slices(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func drain(br *bufio.Reader) string {
	b, _ := io.ReadAll(br)
	return string(b)
}

// A connection that closes before its first byte is no header to
// refuse (a balancer's TCP check).
func TestParseEmptyIsEOF(t *testing.T) {
	if _, err := Parse(bufio.NewReader(bytes.NewReader(nil))); err != io.EOF {
		t.Fatalf("Parse(empty) = %v, want io.EOF", err)
	}
}

// FuzzParse: Parse never panics, consumes nothing but a header, and
// accepts only what the specification's grammar allows, checked by a
// second reading of the consumed bytes written from the specification.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\nGET /",
		"PROXY TCP6 2001:db8::7 2001:db8::1 1 443\r\n",
		"PROXY UNKNOWN\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n",
		rest, "\r\n\r\n", "PRI * HTTP/2.0\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Add(v2(cmdProxy, tcp4, block4("203.0.113.7", "192.0.2.1", 1, 2), tlv(0x01, "h2")))
	f.Add(v2(cmdProxy, tcp6, block6("2001:db8::7", "::1", 1, 2), nil))
	f.Add(v2(cmdLocal, 0x00, nil, nil))
	f.Add(v2(cmdProxy, udp4, block4("1.2.3.4", "5.6.7.8", 1, 2), nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		br := bufio.NewReaderSize(r, bufSize)
		h, err := Parse(br)
		consumed := len(in) - br.Buffered() - r.Len()
		var pe *Error
		switch {
		case len(in) == 0:
			if err != io.EOF {
				t.Fatalf("empty input: %v", err)
			}
			return
		case errors.As(err, &pe) && pe.Reason == ReasonMissing:
			if consumed != 0 || startsLike(in, sigV1) && len(in) >= len(sigV1) || startsLike(in, sigV2) && len(in) >= len(sigV2) {
				t.Fatalf("missing, with %d bytes consumed, for %q", consumed, in)
			}
			return
		case err != nil:
			if pe == nil {
				t.Fatalf("a refusal that is not an *Error: %v", err)
			}
			return
		}
		if !wellFormed(in[:consumed], h) {
			t.Fatalf("accepted %q as %+v", in[:consumed], h)
		}
	})
}

// wellFormed reads a header again, as proxy-protocol.txt writes it, and
// reports whether it is one and says h.
func wellFormed(b []byte, h Header) bool {
	if bytes.HasPrefix(b, sigV2) {
		return h.Version == 2 && wellFormedV2(b, h)
	}
	return h.Version == 1 && wellFormedV1(b, h)
}

func wellFormedV1(b []byte, h Header) bool {
	line, ok := bytes.CutSuffix(b, []byte("\r\n"))
	if !ok || len(b) > 107 || bytes.ContainsAny(line, "\r\n") {
		return false
	}
	f := strings.Split(string(line), " ")
	if f[0] != "PROXY" || len(f) < 2 {
		return false
	}
	if f[1] == "UNKNOWN" {
		return h.Local()
	}
	if len(f) != 6 || (f[1] != "TCP4" && f[1] != "TCP6") || h.Local() {
		return false
	}
	src, err1 := netip.ParseAddr(f[2])
	dst, err2 := netip.ParseAddr(f[3])
	if err1 != nil || err2 != nil || src.Zone() != "" || dst.Zone() != "" {
		return false
	}
	if want4 := f[1] == "TCP4"; src.Is4() != want4 || dst.Is4() != want4 {
		return false
	}
	sport, ok1 := port(f[4])
	_, ok2 := port(f[5])
	return ok1 && ok2 && h.Source == netip.AddrPortFrom(src.Unmap(), sport)
}

// port reads a decimal port: 1 to 5 digits, no sign, no leading zero.
func port(s string) (uint16, bool) {
	if s == "" || len(s) > 5 || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 16)
	return uint16(n), err == nil
}

func wellFormedV2(b []byte, h Header) bool {
	if len(b) < 16 {
		return false
	}
	cmd, fam, n := b[12], b[13], int(binary.BigEndian.Uint16(b[14:16]))
	body := b[16:]
	if len(body) != n || n > 4096 {
		return false
	}
	switch cmd {
	case cmdLocal:
		return h.Local()
	case cmdProxy:
	default:
		return false
	}
	var src netip.Addr
	var sport uint16
	var tlvs []byte
	switch fam {
	case tcp4:
		if n < 12 {
			return false
		}
		src = netip.AddrFrom4([4]byte(body[0:4]))
		sport, tlvs = binary.BigEndian.Uint16(body[8:10]), body[12:]
	case tcp6:
		if n < 36 {
			return false
		}
		src = netip.AddrFrom16([16]byte(body[0:16])).Unmap()
		sport, tlvs = binary.BigEndian.Uint16(body[32:34]), body[36:]
	default:
		return false
	}
	for len(tlvs) > 0 {
		if len(tlvs) < 3 {
			return false
		}
		l := int(binary.BigEndian.Uint16(tlvs[1:3]))
		if len(tlvs) < 3+l {
			return false
		}
		tlvs = tlvs[3+l:]
	}
	return h.Source == netip.AddrPortFrom(src, sport)
}
