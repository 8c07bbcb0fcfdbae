// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/classify"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/stage"
)

// gRPC through the proxy. A gRPC call is an HTTP/2 POST whose
// Content-Type is application/grpc[+codec]; the proxy forwards it like any
// request (ReverseProxy keeps "TE: trailers" and copies the trailers, so
// grpc-status and grpc-message reach the client intact) and differs in
// four places:
//
//   - upstream, a call to an http:// server goes over h2c (HTTP/2 without
//     TLS, prior knowledge), since gRPC needs HTTP/2; https:// servers
//     negotiate h2 by ALPN as every request does;
//   - its deadline is also its grpc-timeout (the earlier of it and the
//     hop timeout header), and the call goes upstream with grpc-timeout
//     rewritten to the time it has left;
//   - its rejections are gRPC answers, not HTTP 503s: HTTP 200,
//     trailers-only (the status in the response's only HEADERS frame),
//     grpc-status 8 (RESOURCE_EXHAUSTED) with grpc-message, a
//     google.rpc.Status with a google.rpc.RetryInfo in
//     grpc-status-details-bin and grpc-retry-pushback-ms — or grpc-status 4
//     (DEADLINE_EXCEEDED) when the call's deadline passes before it can
//     be served;
//   - stages select calls by service or method (match.grpc_service,
//     match.grpc_method: the request path is the method's full name).

// isGRPC reports whether r, as received, is a gRPC call.
func isGRPC(r *http.Request) bool { return r.ProtoMajor == 2 && grpcContent(r.Header) }

// grpcContent reports whether h's Content-Type is gRPC's.
func grpcContent(h http.Header) bool {
	ct := h["Content-Type"]
	return len(ct) > 0 && (ct[0] == "application/grpc" || strings.HasPrefix(ct[0], "application/grpc+") ||
		strings.HasPrefix(ct[0], "application/grpc;"))
}

// grpcDeadline returns the earlier of d and the deadline r's grpc-timeout
// gives at now (zero: none). A malformed grpc-timeout (one that does not
// parse, or several) is treated as absent, as a malformed timeout header
// is, and counted in sluice_hop_invalid_total{header="timeout"}.
func grpcDeadline(pol *policy.Policy, r *http.Request, now, d time.Time) time.Time {
	v := r.Header["Grpc-Timeout"]
	if len(v) == 0 {
		return d
	}
	t, ok := sluice.ParseTimeout(v[0])
	if !ok || len(v) != 1 {
		pol.CountInvalid(classify.HopTimeout)
		return d
	}
	g := now.Add(t)
	if d.IsZero() || g.Before(d) {
		return g
	}
	return d
}

// gRPC status codes the proxy answers with.
const (
	grpcDeadlineExceeded  = 4
	grpcResourceExhausted = 8
	grpcUnavailable       = 14
)

// rejectGRPC answers a gRPC call that admission control refused (err
// from the stage), shaped as gRPC.
func (h *Handler) rejectGRPC(w http.ResponseWriter, r *http.Request, g *generation, err error) {
	if errors.Is(err, stage.ErrDeadline) {
		writeGRPCStatus(w, grpcDeadlineExceeded, "sluice: the call's deadline passes before it can be served", nil, "")
		return
	}
	rj := g.pol.Rejection(r)
	writeGRPCStatus(w, grpcResourceExhausted, "sluice: overloaded (stage "+rj.Stage+", class "+rj.Class+"): retry after "+
		rj.RetryAfter.String(), retryInfo(rj.RetryAfter), pushbackMs(rj.RetryAfter))
}

// retryInfo is a RetryInfo detail carrying d.
func retryInfo(d time.Duration) *anypb.Any {
	a, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		return nil
	}
	return a
}

// noRetry is the grpc-retry-pushback-ms that forbids a retry (gRFC A6: a
// negative pushback).
const noRetry = "-1"

// pushbackMs is d as grpc-retry-pushback-ms.
func pushbackMs(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// writeGRPCStatus writes a trailers-only gRPC answer: HTTP 200 whose only
// header block carries grpc-status code, grpc-message msg (percent-encoded
// as the protocol asks), the google.rpc.Status with detail in
// grpc-status-details-bin when detail is set, and grpc-retry-pushback-ms
// when pushback is not "".
func writeGRPCStatus(w http.ResponseWriter, code int32, msg string, detail *anypb.Any, pushback string) {
	hd := w.Header()
	hd.Set("Content-Type", "application/grpc")
	hd.Set("Grpc-Status", strconv.Itoa(int(code)))
	hd.Set("Grpc-Message", encodeGRPCMessage(msg))
	if detail != nil {
		st := &spb.Status{Code: code, Message: msg, Details: []*anypb.Any{detail}}
		if b, err := proto.Marshal(st); err == nil {
			hd.Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(b))
		}
	}
	if pushback != "" {
		hd.Set("Grpc-Retry-Pushback-Ms", pushback)
	}
	w.WriteHeader(http.StatusOK)
}

// encodeGRPCMessage percent-encodes what grpc-message may not carry raw
// (the gRPC over HTTP/2 protocol: printable ASCII but '%').
func encodeGRPCMessage(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c)>>4, 16)+strconv.FormatUint(uint64(c)&15, 16)))
	}
	return b.String()
}

// h2cTransport is a pool's transport for gRPC calls to http:// servers:
// HTTP/2 with prior knowledge, made on first use.
type h2cTransport struct {
	mu sync.Mutex
	t  *http.Transport
}

// get returns the transport for cfg.
func (h *h2cTransport) get(cfg *BackendsConfig) *http.Transport {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.t == nil {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		d := &net.Dialer{Timeout: cfg.Timeouts.Dial, KeepAlive: 30 * time.Second}
		h.t = &http.Transport{Proxy: nil, DialContext: d.DialContext, Protocols: &p, DisableCompression: true,
			MaxIdleConnsPerHost: cfg.MaxIdleConnsPerHost, IdleConnTimeout: cfg.IdleConnTimeout,
			ResponseHeaderTimeout: cfg.Timeouts.ResponseHeader}
	}
	return h.t
}

// closeIdle closes the idle connections of the transport, if it was made.
func (h *h2cTransport) closeIdle() {
	h.mu.Lock()
	t := h.t
	h.mu.Unlock()
	if t != nil {
		t.CloseIdleConnections()
	}
}

// roundTripGRPC sends a gRPC call upstream: over h2c to an http://
// server, with grpc-timeout set to the time the call has left (and
// without one that was malformed).
func (p *Pool) roundTripGRPC(req *http.Request) (*http.Response, error) {
	if dl, ok := req.Context().Deadline(); ok {
		req.Header.Set("Grpc-Timeout", sluice.FormatTimeout(time.Until(dl)))
	} else {
		// A grpc-timeout that gave no deadline was malformed: treated as
		// absent here, it does not go on to fail the call upstream.
		req.Header.Del("Grpc-Timeout")
	}
	if req.URL.Scheme == "http" {
		return p.h2c.get(&p.cfg).RoundTrip(req)
	}
	return p.transport.RoundTrip(req)
}

// poolRejectedGRPC is poolRejected for a gRPC call: RESOURCE_EXHAUSTED
// with the pool's Retry-After as the pushback.
func (h *Handler) poolRejectedGRPC(w http.ResponseWriter, g *generation, err error) {
	cause := "queue_full"
	if errors.Is(err, ErrPoolQueueTimeout) {
		cause = "queue_timeout"
	}
	h.m.poolRejected.WithLabelValues(cause).Inc()
	secs, _ := strconv.Atoi(g.retryAfter)
	d := time.Duration(secs) * time.Second
	writeGRPCStatus(w, grpcResourceExhausted, "sluice: backend pool saturated ("+cause+")", retryInfo(d), pushbackMs(d))
}

// cleartextProtocols are the protocols of a listener without TLS:
// HTTP/1.1, and HTTP/2 with prior knowledge (h2c, as gRPC clients speak
// it without TLS; no Upgrade: h2c).
func cleartextProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// grpcFailed reports whether a gRPC answer, read to its end, failed as
// the service's fault (its grpc-status, in the trailers or, trailers-only,
// in the header): UNKNOWN, CANCELLED, DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE or DATA_LOSS, as a 5xx is.
// The caller's errors (INVALID_ARGUMENT, NOT_FOUND, …) are not, as a 4xx
// is not.
func grpcFailed(res *http.Response) bool {
	v := res.Trailer["Grpc-Status"]
	if len(v) == 0 {
		v = res.Header["Grpc-Status"]
	}
	if len(v) == 0 {
		return true // no status: the call did not end properly
	}
	switch v[0] {
	case "1", "2", "4", "8", "13", "14", "15":
		return true
	}
	return false
}
