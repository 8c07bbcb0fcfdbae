// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/classify"
	"github.com/sluicehq/sluice/policy"
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
