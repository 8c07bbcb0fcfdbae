// SPDX-License-Identifier: Apache-2.0

// Package reject writes sluice's refusals, in the protocol of the request
// refused: one place that knows, for every reason sluice refuses a
// request (a stage that sheds it, a backend pool with no slot, a client
// over its bandwidth share, a stage's hog rule, a deadline that passes, a
// request over a limit), what an HTTP client and a gRPC client are told.
//
// Over HTTP a refusal is a status (503 for overload, 504 for a deadline
// that passed, the limit's own 4xx), Retry-After in whole seconds when the
// client may try again, Cache-Control: no-store and a short text body.
// Over gRPC it is a trailers-only answer (HTTP 200 whose only header
// block carries grpc-status and grpc-message), with a google.rpc.Status
// holding a google.rpc.RetryInfo in grpc-status-details-bin and
// grpc-retry-pushback-ms (gRFC A6) when the client may try again. For a
// gRPC server (package grpcsluice) Answer.GRPC gives the status to
// return.
package reject

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Protocol is the protocol a refusal is written in.
type Protocol uint8

const (
	// HTTP answers with an HTTP status and a text body.
	HTTP Protocol = iota
	// GRPC answers with a trailers-only gRPC status.
	GRPC
)

// ProtocolOf returns the protocol of r as received: GRPC for an HTTP/2
// request whose Content-Type is gRPC's, HTTP otherwise.
func ProtocolOf(r *http.Request) Protocol {
	if r.ProtoMajor == 2 && GRPCContent(r.Header) {
		return GRPC
	}
	return HTTP
}

// GRPCContent reports whether h's Content-Type is gRPC's
// (application/grpc, optionally with a +codec suffix or parameters).
func GRPCContent(h http.Header) bool {
	ct := h["Content-Type"]
	return len(ct) > 0 && (ct[0] == "application/grpc" || strings.HasPrefix(ct[0], "application/grpc+") ||
		strings.HasPrefix(ct[0], "application/grpc;"))
}

// Reason is why a request is refused.
type Reason uint8

const (
	// Overloaded: a stage shed the request (its controller refused it,
	// its queue was full, or it waited in the queue past the queue's
	// timeout). Answer.Stage and Answer.Class name them.
	Overloaded Reason = iota
	// EarlyDiscard: the request's deadline passes before the stage could
	// serve it, so it is refused at once rather than queued in vain.
	EarlyDiscard
	// PoolFull: the backend pool's wait queue is full.
	PoolFull
	// PoolTimeout: the backend pool gave no server slot within its queue
	// timeout (Answer.Detail: that timeout, as text).
	PoolTimeout
	// PoolDeadline: the request's deadline passed while it waited for a
	// backend.
	PoolDeadline
	// ClientShare: the client is over its bandwidth share (Answer.Detail:
	// the share's reason).
	ClientShare
	// Hog: the stage's hog rule cancelled the request in service
	// (Answer.Detail: the cause).
	Hog
	// HandlerDeadline: the request's deadline passed before its handler
	// answered.
	HandlerDeadline
	// Limit: the request is over one of the listener's limits: the
	// client's fault, not to be retried as it is (Answer.Status: the
	// limit's HTTP status, Answer.Detail: which limit and by how much).
	Limit
	numReasons
)

var reasonNames = [numReasons]string{"overloaded", "early_discard", "pool_full", "pool_timeout", "pool_deadline",
	"client_share", "hog", "handler_deadline", "limit"}

// String returns the reason's name, in snake case.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// retry reports whether a client refused for r may try again later: it
// is told when (Retry-After, a gRPC pushback).
func (r Reason) retry() bool {
	switch r {
	case Overloaded, EarlyDiscard, PoolFull, PoolTimeout, ClientShare, Hog:
		return true
	}
	return false
}

// Answer is one refusal: its reason, what the reason needs said, and,
// over HTTP, what a caller that renders its own answer sets (a policy's
// configured status and body).
type Answer struct {
	Reason Reason
	// Stage and Class name the stage and the class of an Overloaded
	// request.
	Stage, Class string
	// RetryAfter is how long the client is asked to wait before it tries
	// again; HTTP sends it in whole seconds, rounded up, at least 1.
	RetryAfter time.Duration
	// Detail completes the message of PoolTimeout, ClientShare, Hog and
	// Limit (see each).
	Detail string
	// Status, ContentType and Body replace the HTTP status, the
	// Content-Type and the body the reason has by default (when not 0,
	// "" and nil).
	Status      int
	ContentType string
	Body        []byte
}

// Write writes the answer a to r in protocol p.
func Write(w http.ResponseWriter, r *http.Request, p Protocol, a Answer) {
	if p == GRPC {
		WriteGRPC(w, a.GRPC())
		return
	}
	status, retry, ctype, body := a.HTTP()
	h := w.Header()
	if a.Reason == Limit {
		// A client's fault is answered as http.Error answers.
		h.Set("X-Content-Type-Options", "nosniff")
	}
	WriteHTTP(w, r, status, retry, ctype, body)
}

// textPlain is the Content-Type of sluice's own text bodies.
const textPlain = "text/plain; charset=utf-8"

// HTTP returns a's HTTP answer: the status, the Retry-After value (""
// for none), the Content-Type and the body.
func (a Answer) HTTP() (status int, retryAfter, contentType string, body []byte) {
	status, contentType, body = a.Status, a.ContentType, a.Body
	var code int
	var msg string
	switch a.Reason {
	case Overloaded:
		code, msg = http.StatusServiceUnavailable, "overloaded (stage "+a.Stage+", class "+a.Class+"): retry after "+
			Seconds(a.RetryAfter)+" s"
	case EarlyDiscard:
		code, msg = http.StatusServiceUnavailable, "the request's deadline passes before it can be served"
	case PoolFull:
		code, msg = http.StatusServiceUnavailable, "backend pool saturated: wait queue full"
	case PoolTimeout:
		code, msg = http.StatusServiceUnavailable, "backend pool saturated: no server slot within "+a.Detail
	case PoolDeadline:
		code, msg = http.StatusGatewayTimeout, "the request's deadline passed while it waited for a backend"
	case ClientShare:
		code, msg = http.StatusServiceUnavailable, "client bandwidth share exceeded ("+a.Detail+")"
	case Hog:
		code, msg = http.StatusServiceUnavailable, a.Detail
	case HandlerDeadline:
		code, msg = http.StatusGatewayTimeout, "the request's deadline passed before its handler answered"
	default: // Limit
		code, msg = http.StatusBadRequest, a.Detail
	}
	status = cmp.Or(status, code)
	contentType = cmp.Or(contentType, textPlain)
	if body == nil {
		body = []byte("sluice: " + msg + "\n")
	}
	if a.Reason.retry() {
		retryAfter = Seconds(a.RetryAfter)
	}
	return status, retryAfter, contentType, body
}

// Seconds is d as a Retry-After value: whole seconds, rounded up, at
// least 1.
func Seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// WriteHTTP writes an HTTP refusal: status, Retry-After when retryAfter
// is not "", Content-Type ctype, Content-Length, Cache-Control: no-store,
// and body (not for a HEAD request).
func WriteHTTP(w http.ResponseWriter, r *http.Request, status int, retryAfter, ctype string, body []byte) {
	h := w.Header()
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
