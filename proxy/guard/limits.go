// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/reject"
)

// Request size limits. A listener's max_header_bytes is enforced here, in
// the handler, not by net/http: net/http answers a header block over its
// own limit itself, before any handler runs, with an HTTP 431 (HTTP/1) or
// a 431 or a connection error (HTTP/2), which a gRPC client can only read
// as UNKNOWN or UNAVAILABLE. So the server's own limit (http.Server's
// MaxHeaderBytes, which is also the HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE
// it advertises, plus 320 bytes) is TransportHeaderBytes — twice
// max_header_bytes — and a request between the two reaches the guard,
// which measures it and answers 431, or RESOURCE_EXHAUSTED for a gRPC
// call. The cost of a request the guard refuses is bounded by the
// transport limit; past it net/http's own answer stands (and a grpc-go
// client, which reads the advertised limit, fails the call itself with
// INTERNAL "header list size to send violates the maximum size … set by
// server" without sending it).

// TransportHeaderBytes is the http.Server MaxHeaderBytes for a listener
// whose max_header_bytes is n: 2n, or n itself from 1 GiB on (no
// overflow, and HTTP/2's limit is 32 bits).
func TransportHeaderBytes(n int) int {
	if n >= 1<<30 {
		return n
	}
	return 2 * n
}

// headerBytes is the size of r's request line and header block as the
// limit counts it: for HTTP/2 the header list size of RFC 9113 §6.5.2
// (name + value + 32 for every field, the pseudo-header fields
// included), for HTTP/1 the bytes of the request line and the header
// lines with their CRLFs.
func headerBytes(r *http.Request) int {
	if r.ProtoMajor == 2 {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		n := len(":method") + len(r.Method) + len(":path") + len(r.RequestURI) + len(":scheme") + len(scheme) +
			len(":authority") + len(r.Host) + 4*32
		for k, vv := range r.Header {
			for _, v := range vv {
				n += len(k) + len(v) + 32
			}
		}
		return n
	}
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2 + len("Host: ") + len(r.Host) + 2 + 2
	for k, vv := range r.Header {
		for _, v := range vv {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// checkHeaders applies max_header_bytes, max_headers and
// max_header_line_bytes.
func (g *Guard) checkHeaders(r *http.Request) (int, string, string) {
	n := 1 // Host
	if g.lim.maxLine > 0 && len("Host: ")+len(r.Host) > g.lim.maxLine {
		return http.StatusRequestHeaderFieldsTooLarge, "header_line_too_long",
			fmt.Sprintf("header line Host is longer than %d bytes", g.lim.maxLine)
	}
	for k, vv := range r.Header {
		n += len(vv)
		for _, v := range vv {
			if g.lim.maxLine > 0 && len(k)+2+len(v) > g.lim.maxLine {
				return http.StatusRequestHeaderFieldsTooLarge, "header_line_too_long",
					fmt.Sprintf("header line %s is longer than %d bytes", k, g.lim.maxLine)
			}
		}
	}
	if g.lim.maxHeaders > 0 && n > g.lim.maxHeaders {
		return http.StatusRequestHeaderFieldsTooLarge, "too_many_headers",
			fmt.Sprintf("%d header lines, more than %d", n, g.lim.maxHeaders)
	}
	if g.lim.maxHeaderBytes > 0 {
		if size := headerBytes(r); size > g.lim.maxHeaderBytes {
			return http.StatusRequestHeaderFieldsTooLarge, "header_too_large",
				fmt.Sprintf("request header of %d bytes is larger than %d", size, g.lim.maxHeaderBytes)
		}
	}
	return 0, "", ""
}

// refuse answers a client's fault. Over HTTP it closes the connection,
// without waiting for the rest of a request body (the server would
// otherwise read up to 256 KiB of it, at the client's pace, to reuse the
// connection). A gRPC call gets a gRPC answer instead: trailers-only
// RESOURCE_EXHAUSTED naming the limit, with a negative
// grpc-retry-pushback-ms (gRFC A6: do not retry, the same call would be
// refused again); its stream is reset after the answer, and the
// connection's other calls go on. The refusal is counted under the HTTP
// status the limit stands for.
func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, status int, reason, msg string) {
	g.m.refused.WithLabelValues(fmt.Sprint(status), reason).Inc()
	proto := reject.ProtocolOf(r)
	if proto == reject.HTTP {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		w.Header().Set("Connection", "close")
	}
	reject.Write(w, r, proto, reject.Answer{Reason: reject.Limit, Status: status, Detail: msg})
}
