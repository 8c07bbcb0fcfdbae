// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/internal/reject"
)

// Policy decides admission for the HTTP middleware. The policy package
// implements it from a configuration of stages and classes; any other
// implementation works too.
type Policy interface {
	// Admit classifies r and decides it. A rejection is an error wrapping
	// ErrRejected; if r's context ends while the request waits for a
	// concurrency slot, the context's error is returned as is. A nil error
	// comes with a non-nil Admission that the caller must finish with Done.
	Admit(r *http.Request) (Admission, error)
	// Reject writes the explicit rejection answer for err (the error Admit
	// returned): a status such as 503, Retry-After and a short body.
	Reject(w http.ResponseWriter, r *http.Request, err error)
}

// Admission is one admitted request. Its methods are called by the
// goroutine serving the request; none of them may be called after Done.
type Admission interface {
	// Quality returns the service quality level in (0, 1] the response
	// should be produced at; 1 is full service.
	Quality() float64
	// Stream says the response became long-lived (a protocol upgrade, an
	// event stream, or a response still being written after the stage's
	// long-lived limit): the request stops holding any concurrency slot and
	// will not be a response-time sample. Calls after the first have no
	// effect.
	Stream()
	// Done ends the request with its outcome: Failure for a 5xx
	// status, a transport failure (a failed write, a client that went
	// away) or a panic; Ignore for a request that says nothing about the
	// service (neither a sample nor a failure); Success otherwise. It
	// must be called exactly once.
	Done(o Outcome)
}

// StreamDeadline is implemented by an Admission whose response becomes a
// stream when it is still being written some time after admission. The
// middleware calls Stream on the first Write or Flush after the returned
// time; the zero time means never.
type StreamDeadline interface {
	StreamDeadline() time.Time
}

// RequestContext is implemented by an Admission whose handler gets a
// context of its own: the request's, with a deadline its timeout header
// gave and what travels on to the next hop (WithHop). The middleware
// serves the handler with that context when Context returns one (nil
// keeps the request's), until Done.
type RequestContext interface {
	Context() context.Context
}

// qualityKey is the context key of the quality level.
type qualityKey struct{}

// valueCtx carries one value of type V under the key type K: one
// allocation, and valueFrom reads it without boxing V (context.WithValue
// would box a float64 or a Hop in an interface).
type valueCtx[K comparable, V any] struct {
	context.Context
	v V
}

func (c *valueCtx[K, V]) Value(key any) any {
	if _, ok := key.(K); ok {
		return c
	}
	return c.Context.Value(key)
}

// withValue returns a copy of ctx carrying v under K.
func withValue[K comparable, V any](ctx context.Context, v V) context.Context {
	return &valueCtx[K, V]{Context: ctx, v: v}
}

// valueFrom returns the value ctx carries under K, if any.
func valueFrom[K comparable, V any](ctx context.Context) (V, bool) {
	var k K
	if c, ok := ctx.Value(k).(*valueCtx[K, V]); ok {
		return c.v, true
	}
	var zero V
	return zero, false
}

// ResponseHeaders is implemented by an Admission that adds header fields
// to the response of the request it admitted (the policy package's: the
// IETF RateLimit fields of a stage with ratelimit_headers). Middleware
// calls SetResponseHeaders before the handler runs; a handler may
// overwrite them.
type ResponseHeaders interface {
	SetResponseHeaders(h http.Header)
}

// WithQuality returns a copy of ctx carrying the quality level q, which
// should be in (0, 1].
func WithQuality(ctx context.Context, q float64) context.Context {
	return withValue[qualityKey](ctx, q)
}

// QualityFrom returns the quality level carried by ctx, or 1 (full
// service) when there is none. Handlers behind Middleware call
// QualityFrom(r.Context()) to degrade their work: a handler at quality 0.5
// might return half the search results or skip an expensive rendering.
func QualityFrom(ctx context.Context) float64 {
	if q, ok := valueFrom[qualityKey, float64](ctx); ok && q > 0 {
		return q
	}
	return 1
}

// Middleware returns net/http middleware that puts every request through
// p: a rejected request is answered by p.Reject and never reaches the
// handler; an admitted one is served by the handler and then finished with
// Done, exactly once, even if the handler panics (Done(Failure), then the
// panic continues).
//
// A quality level below 1 is put in the request context (read it with
// QualityFrom), and so is the context of an Admission that implements
// RequestContext: the policy package's carries the deadline of the
// request's timeout header and its Hop (priority, tenant), which sluice's
// client side stamps on the calls the handler makes with it. The handler's ResponseWriter is wrapped to see the status
// (a 5xx is Done(Failure)), failed writes and long-lived responses: a
// hijacked connection, a 101 status, a text/event-stream Content-Type or a
// response still being written after the admission's StreamDeadline (seen
// at a Flush, or every 32 KiB written) call Admission.Stream. The wrapper implements http.Flusher, http.Hijacker,
// io.ReaderFrom and Unwrap, so http.ResponseController reaches the
// underlying writer for deadlines and full duplex. A request whose client
// went away before the handler returned is Done(Failure).
//
// A handler that returns without writing anything after its context
// ended is answered for it, never with an empty 200: 503 through
// p.Reject when its stage's hog rule cancelled it (the context's cause
// wraps ErrHog), 504 when its deadline passed. A handler that should
// stop work nobody waits for checks its context (ctx.Done, ctx.Err)
// between steps of its work and returns.
//
// The wrapper is pooled: handlers must not use the ResponseWriter after
// they return, as net/http already requires.
func Middleware(p Policy) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return &middleware{p: p, next: next}
	}
}

type middleware struct {
	p    Policy
	next http.Handler
}

var writerPool = sync.Pool{New: func() any { return new(responseWriter) }}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, err := m.p.Admit(r)
	if err != nil {
		m.p.Reject(w, r, err)
		return
	}
	if a == nil { // a policy without accounting for this request
		m.next.ServeHTTP(w, r)
		return
	}
	if h, ok := a.(ResponseHeaders); ok {
		h.SetResponseHeaders(w.Header())
	}
	rw := writerPool.Get().(*responseWriter)
	rw.reset(w, a)
	ctx := r.Context()
	if c, ok := a.(RequestContext); ok {
		if hc := c.Context(); hc != nil {
			ctx = hc
		}
	}
	if q := a.Quality(); q < 1 {
		ctx = WithQuality(ctx, q)
	}
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	finished := false
	defer func() {
		if !finished { // the handler panicked or called runtime.Goexit
			a.Done(Failure)
		}
	}()
	m.next.ServeHTTP(rw, r)
	if !rw.wroteHeader && ctx.Err() != nil {
		m.abandoned(rw, r, ctx)
	}
	ok := rw.status < 500 && !rw.failed && r.Context().Err() == nil
	finished = true
	a.Done(OutcomeOf(ok))
	rw.reset(nil, nil)
	writerPool.Put(rw)
}

// abandoned answers a request whose handler returned without answering
// after its context ended, so that an admitted request never gets an
// empty 200: cancelled by its stage's hog rule (ErrHog), the policy's
// rejection (503 with Retry-After); past its deadline, 504. A client
// that went away is not answered: nobody reads it.
func (m *middleware) abandoned(w http.ResponseWriter, r *http.Request, ctx context.Context) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrHog):
		m.p.Reject(w, r, cause)
	case errors.Is(cause, context.DeadlineExceeded):
		reject.Write(w, r, reject.HTTP, reject.Answer{Reason: reject.HandlerDeadline})
	}
}

// responseWriter observes a handler's response for the middleware.
type responseWriter struct {
	rw          http.ResponseWriter
	a           Admission
	deadline    time.Time
	status      int
	wroteHeader bool
	streamed    bool
	failed      bool
	unchecked   int // bytes written since the last stream-deadline check
}

func (w *responseWriter) reset(rw http.ResponseWriter, a Admission) {
	*w = responseWriter{rw: rw, a: a, status: http.StatusOK}
	if d, ok := a.(StreamDeadline); ok {
		w.deadline = d.StreamDeadline()
	}
}

func (w *responseWriter) stream() {
	if !w.streamed {
		w.streamed = true
		w.a.Stream()
	}
}

// checkLong turns the response into a stream once it is past the deadline.
func (w *responseWriter) checkLong() {
	if !w.streamed && !w.deadline.IsZero() && time.Now().After(w.deadline) {
		w.stream()
	}
}

// Header returns the underlying writer's header map.
func (w *responseWriter) Header() http.Header { return w.rw.Header() }

// WriteHeader records the final status and passes code on. Informational
// statuses other than 101 are passed on without being recorded.
func (w *responseWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			w.rw.WriteHeader(code)
			return
		}
		w.headerDone(code)
	}
	w.rw.WriteHeader(code)
}

// headerDone records the final status and detects long-lived responses.
func (w *responseWriter) headerDone(code int) {
	w.wroteHeader = true
	w.status = code
	if code == http.StatusSwitchingProtocols || httpx.IsEventStream(contentType(w.rw.Header())) {
		w.stream()
	}
}

// contentType returns h's Content-Type without allocating ("" if none).
func contentType(h http.Header) string {
	if v := h["Content-Type"]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Write writes to the underlying writer and records a failure.
func (w *responseWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.headerDone(http.StatusOK)
	}
	// Reading the clock costs as much as the rest of a small write: check
	// the stream deadline every longCheckBytes written (and at every
	// Flush), so short responses never pay for it.
	if w.unchecked += len(b); w.unchecked >= longCheckBytes {
		w.unchecked = 0
		w.checkLong()
	}
	n, err := w.rw.Write(b)
	if err != nil {
		w.failed = true
	}
	return n, err
}

// longCheckBytes is how many bytes Write passes on between two checks of
// the stream deadline.
const longCheckBytes = 32 << 10

// ReadFrom copies src to the response, through the underlying writer's
// io.ReaderFrom (sendfile) when it has one.
func (w *responseWriter) ReadFrom(src io.Reader) (int64, error) {
	if !w.wroteHeader {
		w.headerDone(http.StatusOK)
	}
	w.checkLong()
	var n int64
	var err error
	if rf, ok := w.rw.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{w.rw}, src)
	}
	if err != nil {
		w.failed = true
	}
	return n, err
}

type writerOnly struct{ io.Writer }

// Flush flushes the underlying writer, if it can.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError flushes the underlying writer and returns its error
// (http.ErrNotSupported when it cannot flush); http.ResponseController
// calls it.
func (w *responseWriter) FlushError() error {
	if !w.wroteHeader {
		w.headerDone(http.StatusOK)
	}
	w.checkLong()
	err := http.NewResponseController(w.rw).Flush()
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		w.failed = true
	}
	return err
}

// Hijack takes over the connection (http.ErrNotSupported when the
// underlying writer cannot). A hijacked request is a stream.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.rw).Hijack()
	if err == nil {
		w.wroteHeader = true
		w.stream()
	}
	return c, brw, err
}

// Unwrap returns the underlying ResponseWriter, for
// http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.rw }
