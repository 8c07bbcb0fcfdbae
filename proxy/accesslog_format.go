// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// The access log's two line formats. Both carry the same facts: the
// client, the request, the status and body bytes sent, the request id,
// the decision (admit or reject) and its reason, the stage, class and
// tenant, the queue wait, the upstream exchange's time and the whole
// duration, in seconds. A request that got no answer (its client left
// first) has status 499, nginx's "client closed request".

// appendJSON appends ob's line as one JSON object:
//
//	{"time":"2026-01-02T15:04:05.000Z","request_id":"…","client":"192.0.2.1",
//	 "method":"GET","uri":"/a?b","proto":"HTTP/1.1","host":"example.com",
//	 "status":200,"bytes":1234,"duration_s":0.012,"decision":"admit",
//	 "reason":"","stage":"api","class":"default","tenant":"",
//	 "queue_wait_s":0.0001,"upstream_s":0.011,"backend":"http://10.0.0.7:8080",
//	 "referer":"","user_agent":"curl/8.5.0"}
func (ob *observation) appendJSON(b []byte, now time.Time) []byte {
	r := ob.r
	b = append(b, `{"time":"`...)
	b = now.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, '"')
	b = appendStringMember(b, "request_id", ob.requestID())
	b = append(b, `,"client":"`...)
	b = ob.appendClient(b)
	b = append(b, '"')
	b = appendStringMember(b, "method", r.Method)
	b = appendStringMember(b, "uri", r.RequestURI)
	b = appendStringMember(b, "proto", r.Proto)
	b = appendStringMember(b, "host", r.Host)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(ob.loggedStatus()), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, ob.bytes, 10)
	b = append(b, `,"duration_s":`...)
	b = appendSeconds(b, now.Sub(ob.arrival))
	b = append(b, `,"decision":"`...)
	b = append(b, ob.decision()...)
	b = append(b, `","reason":"`...)
	b = append(b, ob.refusal.String()...)
	b = append(b, '"')
	b = appendStringMember(b, "stage", ob.stage)
	b = appendStringMember(b, "class", ob.class)
	b = appendStringMember(b, "tenant", ob.tenant)
	wait, upstream, backend := ob.upstream()
	b = append(b, `,"queue_wait_s":`...)
	b = appendSeconds(b, wait)
	b = append(b, `,"upstream_s":`...)
	b = appendSeconds(b, upstream)
	b = appendStringMember(b, "backend", backend)
	b = appendStringMember(b, "referer", headerValue(r.Header, "Referer"))
	b = appendStringMember(b, "user_agent", headerValue(r.Header, "User-Agent"))
	return append(b, "}\n"...)
}

// appendStringMember appends the next member of a JSON object whose
// value is a string: a comma, the key (which needs no escaping) and
// appendJSONString's s.
func appendStringMember(b []byte, key, s string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendJSONString(b, s)
}

// appendCombined appends ob's line in nginx's combined format, which log
// tools parse by its leading fields, followed by sluice's as key=value
// pairs (as Traefik appends its own to the common log format):
//
//	192.0.2.1 - - [02/Jan/2026:15:04:05 +0000] "GET /a?b HTTP/1.1" 200 1234 "-" "curl/8.5.0"
//	  request_id=… decision=admit reason=- stage=api class=default tenant="-"
//	  queue_wait_s=0.000100 upstream_s=0.011000 duration_s=0.012000
//
// (one line). Quoted fields escape '"', '\' and bytes outside printable
// ASCII as \xHH, as nginx does.
func (ob *observation) appendCombined(b []byte, now time.Time) []byte {
	r := ob.r
	b = ob.appendClient(b)
	b = append(b, " - - ["...)
	b = now.AppendFormat(b, "02/Jan/2006:15:04:05 -0700")
	b = append(b, `] "`...)
	b = appendEscaped(b, r.Method)
	b = append(b, ' ')
	b = appendEscaped(b, r.RequestURI)
	b = append(b, ' ')
	b = appendEscaped(b, r.Proto)
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(ob.loggedStatus()), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, ob.bytes, 10)
	b = append(b, ` "`...)
	b = appendEscaped(b, orDash(headerValue(r.Header, "Referer")))
	b = append(b, `" "`...)
	b = appendEscaped(b, orDash(headerValue(r.Header, "User-Agent")))
	b = append(b, `" request_id=`...)
	b = append(b, orDash(ob.requestID())...) // valid ids are visible ASCII without quotes
	b = append(b, " decision="...)
	b = append(b, ob.decision()...)
	b = append(b, " reason="...)
	b = append(b, orDash(ob.refusal.String())...)
	b = append(b, " stage="...)
	b = appendEscaped(b, orDash(ob.stage))
	b = append(b, " class="...)
	b = appendEscaped(b, orDash(ob.class))
	b = append(b, ` tenant="`...)
	b = appendEscaped(b, orDash(ob.tenant))
	wait, upstream, _ := ob.upstream()
	b = append(b, `" queue_wait_s=`...)
	b = appendSeconds(b, wait)
	b = append(b, " upstream_s="...)
	b = appendSeconds(b, upstream)
	b = append(b, " duration_s="...)
	b = appendSeconds(b, now.Sub(ob.arrival))
	return append(b, '\n')
}

// loggedStatus is the status sent, or 499 when none was.
func (ob *observation) loggedStatus() int {
	if ob.status == 0 {
		return 499
	}
	return ob.status
}

func (ob *observation) decision() string {
	if ob.refusal != notRefused {
		return "reject"
	}
	return "admit"
}

func (ob *observation) requestID() string {
	if len(ob.id) == 0 {
		return ""
	}
	return ob.id[0]
}

// upstream returns an admitted request's wait before its upstream
// exchange, the exchange's time (0 for an upgrade or an event stream,
// not observed) and its backend; zeros for a refused one.
func (ob *observation) upstream() (wait, upstream time.Duration, backend string) {
	rs := ob.rs
	if rs == nil {
		return 0, 0, ""
	}
	return rs.wait, time.Duration(rs.upstreamNS.Load()), rs.backend.Name
}

// appendClient appends the client's address: the one sluice believes
// (classes.trusted_proxies), else the connection's peer.
func (ob *observation) appendClient(b []byte) []byte {
	if ip := ob.g.pol.ClientIP(ob.r); ip.IsValid() {
		return ip.Unmap().AppendTo(b)
	}
	return appendEscaped(b, ob.r.RemoteAddr)
}

func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// appendSeconds appends d in seconds with microsecond precision.
func appendSeconds(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, d.Seconds(), 'f', 6, 64)
}

const (
	hexDigits = "0123456789abcdef"
	upperHex  = "0123456789ABCDEF" // nginx's
)

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// appendEscaped appends s with '"', '\' and bytes outside printable
// ASCII as \xHH (nginx's escaping of variables in its log formats).
func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b = append(b, '\\', 'x', upperHex[c>>4], upperHex[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

// requestIDMax is the longest request id kept from a client, in bytes.
const requestIDMax = 128

// validRequestID reports whether a client's request id is kept: 1 to
// requestIDMax visible ASCII characters other than '"' and '\', so that
// it needs no escaping in either format.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > requestIDMax {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// requestID returns r's request id as a header value: the one its
// header carries when it is valid (no allocation), else a new one.
func (s *accessSettings) requestID(r *http.Request) []string {
	if v := r.Header[s.idHeader]; len(v) == 1 && validRequestID(v[0]) {
		return v
	}
	return []string{newRequestID()}
}

// newRequestID returns 128 random bits as 32 hex digits (nginx's
// $request_id form), from math/rand/v2's per-thread generator: cheap, not
// a secret.
func newRequestID() string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], rand.Uint64())
	binary.BigEndian.PutUint64(raw[8:], rand.Uint64())
	var out [32]byte
	hex.Encode(out[:], raw[:])
	return string(out[:])
}
