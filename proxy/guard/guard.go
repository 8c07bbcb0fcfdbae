// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/proxy/internal/h1"
)

// Metrics count what the guard refused, and the client connections.
type Metrics struct {
	refused   *prometheus.CounterVec // status, reason
	connsOpen prometheus.GaugeFunc
	connsMax  prometheus.GaugeFunc
	connsRst  prometheus.CounterFunc
	connsIdle prometheus.CounterFunc
}

// NewMetrics exports the refusals and conns's connections (a function,
// so that the metrics can be built before the cap).
func NewMetrics(conns func() *Conns) *Metrics {
	return &Metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "proxy_client_refused_total",
			Help: "Requests refused before admission for the client's fault, by status and reason (smuggling, framing, uri_too_long, header_line_too_long, too_many_headers, header_too_large, body_malformed, body_timeout, body_too_large).",
		}, []string{"status", "reason"}),
		connsOpen: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "proxy_client_connections_open",
			Help: "Open client connections, every listener."}, func() float64 { return float64(conns().live.Load()) }),
		connsMax: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "proxy_client_connections_max",
			Help: "The cap on client connections (max_client_connections)."}, func() float64 { return float64(conns().max) }),
		connsRst: prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "proxy_client_connections_reset_total",
			Help: "Client connections reset at accept because the cap was reached and no idle connection could be closed."},
			func() float64 { return float64(conns().reset.Load()) }),
		connsIdle: prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "proxy_client_connections_reclaimed_total",
			Help: "Idle keep-alive client connections closed to make room for a new one at the cap."},
			func() float64 { return float64(conns().reclaimed.Load()) }),
	}
}

// Collectors returns the metrics, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.refused, m.connsOpen, m.connsMax, m.connsRst, m.connsIdle}
}

// Guard is the handler of a client listener: the smuggling verdict, the
// size limits and the request body (buffered, or watched while it
// streams), then the next handler, the proxy's.
type Guard struct {
	next http.Handler
	lim  limits
	m    *Metrics
	bad  prometheus.Counter // proxy_smuggling_rejected_total
}

// New returns the guard of a listener with settings c (its defaults
// set) in front of next; m counts its refusals, smuggling the requests
// refused as smuggling attempts.
func New(next http.Handler, c *Config, m *Metrics, smuggling prometheus.Counter) *Guard {
	return &Guard{next: next, lim: limitsOf(c), m: m, bad: smuggling}
}

func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if cc, _ := r.Context().Value(clientConnKey{}).(*clientConn); cc != nil {
		cc.lim.dispatched(cc)
	}
	h1.RestoreTLS(r)
	sc := ScanConnOf(r.Context())
	var ord uint64
	if sc != nil && r.ProtoMajor == 2 && sc.HTTP2() {
		sc = nil // h2c: HTTP/2 framing, nothing to smuggle through
	}
	if sc != nil {
		if reason := sc.Next(); reason != "" {
			g.bad.Inc()
			g.refuse(w, r, http.StatusBadRequest, "smuggling", "bad request: "+reason)
			return
		}
		ord = sc.Ordinal()
	}
	if g.lim.maxURI > 0 && len(r.RequestURI) > g.lim.maxURI {
		g.refuse(w, r, http.StatusRequestURITooLong, "uri_too_long",
			fmt.Sprintf("request target of %d bytes is longer than %d", len(r.RequestURI), g.lim.maxURI))
		return
	}
	if status, reason, msg := g.checkHeaders(r); status != 0 {
		g.refuse(w, r, status, reason, msg)
		return
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if g.lim.maxBody > 0 && r.ContentLength > g.lim.maxBody {
			g.refuse(w, r, http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("request body of %d bytes is larger than %d", r.ContentLength, g.lim.maxBody))
			return
		}
		rc := http.NewResponseController(w)
		if g.lim.buffering && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			body, err := g.buffer(r, rc, sc, ord)
			if err != nil {
				status, reason, msg := bodyFailure(err)
				g.refuse(w, r, status, reason, msg)
				return
			}
			if sc != nil {
				if why := sc.BodyFault(ord); why != "" {
					g.bad.Inc()
					g.refuse(w, r, http.StatusBadRequest, "smuggling", "bad request: "+why)
					return
				}
			}
			defer body.Close()
		} else {
			gb := &guardedBody{rc: r.Body, ctl: rc, lim: &g.lim, start: time.Now(), h2: r.ProtoMajor == 2}
			r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, gb))
			r.Body = gb
			defer gb.handlerDone()
		}
	}
	g.next.ServeHTTP(w, r)
}

// Body failures.
var (
	errBodyTimeout  = errors.New("request body timeout")
	errBodyTooLarge = errors.New("request body too large")
	errBodyFraming  = errors.New("request body framing refused")
)

// bodyError is a failure to read a request body: the client's fault.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// bodyFailure maps a body error to its answer.
func bodyFailure(err error) (status int, reason, msg string) {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge, "body_too_large", "request body too large"
	case errors.Is(err, errBodyTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, "body_timeout", "request body not received in time"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return http.StatusBadRequest, "body_incomplete", "request body incomplete"
	}
	return http.StatusBadRequest, "body_malformed", "malformed request body"
}

// BodyFailed answers a request whose body failed to read while it
// streamed upstream (err is BodyError's), and closes the connection. A
// nil m counts nothing.
func (m *Metrics) BodyFailed(w http.ResponseWriter, err error) {
	status, reason, msg := bodyFailure(err)
	if m != nil {
		m.refused.WithLabelValues(fmt.Sprint(status), reason).Inc()
	}
	hd := w.Header()
	hd.Set("Connection", "close")
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "sluice: "+msg+"\n")
}
