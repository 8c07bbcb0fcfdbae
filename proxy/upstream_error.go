// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice"
	sclient "github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/reject"
	"github.com/sluicehq/sluice/proxy/guard"
)

// upstreamError classifies a transport error: the status to answer, a
// metric label and a short message naming the cause.
func upstreamError(err error, rs *reqState, req *http.Request) (status int, cause, msg string) {
	g := rs.gen
	name := rs.backend.Name
	if errors.Is(context.Cause(req.Context()), errOverallTimeout) {
		return http.StatusGatewayTimeout, "overall_timeout",
			fmt.Sprintf("upstream timeout: no complete response from %s within %v", name, g.overall)
	}
	if cause := context.Cause(req.Context()); errors.Is(cause, sluice.ErrHog) {
		return http.StatusServiceUnavailable, "hog", "request cancelled in service: " + cause.Error()
	}
	if rs.Context.Err() != nil {
		return 0, "client_canceled", "the client canceled the request"
	}
	if errors.Is(err, sclient.ErrThrottled) {
		return http.StatusServiceUnavailable, "throttled",
			fmt.Sprintf("upstream %s refuses too many requests: throttled at the proxy", name)
	}
	if errors.Is(err, sclient.ErrDeadline) || errors.Is(req.Context().Err(), context.DeadlineExceeded) {
		return http.StatusGatewayTimeout, "deadline",
			fmt.Sprintf("the request's deadline passed before %s answered", name)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		if op.Timeout() {
			return http.StatusGatewayTimeout, "connect_timeout",
				fmt.Sprintf("upstream connect timeout: %s did not accept a connection within %v", name, g.cfg.Backends.Timeouts.Dial)
		}
		return http.StatusBadGateway, "connect", fmt.Sprintf("backend unreachable: %s: %v", name, op.Err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		if strings.Contains(err.Error(), "TLS handshake") {
			return http.StatusGatewayTimeout, "connect_timeout",
				fmt.Sprintf("upstream connect timeout: TLS handshake with %s took more than %v", name, g.cfg.Backends.Timeouts.Dial)
		}
		return http.StatusGatewayTimeout, "response_header_timeout",
			fmt.Sprintf("upstream timeout: no response headers from %s within %v", name, g.cfg.Backends.Timeouts.ResponseHeader)
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) || strings.Contains(err.Error(), "tls:") {
		return http.StatusBadGateway, "tls", fmt.Sprintf("upstream TLS error with %s", name)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "server closed") {
		return http.StatusBadGateway, "upstream_closed", fmt.Sprintf("upstream %s closed the connection before a response", name)
	}
	if strings.Contains(err.Error(), "malformed HTTP") {
		// The error quotes the backend's bytes: they stay in the log.
		return http.StatusBadGateway, "protocol", fmt.Sprintf("upstream %s sent an invalid HTTP response", name)
	}
	return http.StatusBadGateway, "other", fmt.Sprintf("upstream error from %s", name)
}

// errorHandler answers a failed upstream exchange: 502 (unreachable,
// closed, protocol error) or 504 (timeout), with a short body naming the
// cause.
func (h *Handler) errorHandler(w http.ResponseWriter, req *http.Request, err error) {
	rs := stateOf(req.Context())
	if rs == nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	if rs.shareErr != nil {
		shareRejected(w, req, rs.shareErr)
		return
	}
	if cerr := guard.BodyError(req); cerr != nil {
		// The request body failed to read: the client's fault, not the
		// backend's (RFC 9112 §7.1: a malformed chunked body); neither a
		// failure nor a sample for the stage.
		rs.clientFault.Store(true)
		h.cm.BodyFailed(w, cerr)
		return
	}
	status, cause, msg := upstreamError(err, rs, req)
	if status == 0 {
		rs.clientGone.Store(true)
		return
	}
	rs.failed.Store(true)
	h.m.upstreamErrors.WithLabelValues(rs.backend.Name, cause).Inc()
	hd := w.Header()
	switch cause {
	case "hog":
		// The stage's hog rule cancelled the exchange: answered as the
		// stage's rejection is, 503 with Retry-After (gRPC:
		// RESOURCE_EXHAUSTED).
		reject.Write(w, req, reject.ProtocolOf(req), reject.Answer{Reason: reject.Hog, Detail: msg, RetryAfter: rs.gen.retryAfter})
		return
	case "throttled":
		// A rejection, as the backend's own 503 would be: Retry-After.
		hd.Set("Retry-After", reject.Seconds(rs.gen.retryAfter))
	case "deadline":
		h.m.deadline.WithLabelValues("upstream").Inc()
		h.m.gatewayErrors.WithLabelValues("504").Inc()
	default:
		h.m.gatewayErrors.WithLabelValues(strconv.Itoa(status)).Inc()
		h.warn.Do(func() {
			h.log.Warn("upstream error", "backend", rs.backend.Name, "cause", cause, "status", status, "err", err)
		})
	}
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "sluice: "+msg+"\n")
}
