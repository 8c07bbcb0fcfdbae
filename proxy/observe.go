// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"cmp"
	"errors"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/internal/telemetry"
	"github.com/sluicehq/sluice/stage"
)

// observation is one request as its opt-in observers see it: the server
// span (telemetry.otlp.traces), http.server.request.duration
// (telemetry.otlp.metrics) and the access-log line (access_log). It wraps
// the request's ResponseWriter to see the status and the body bytes
// sent. Observations are pooled; with none of the observers on, a request
// has none (a nil *observation, whose methods do nothing), and the
// request path does no work for them.
type observation struct {
	w       http.ResponseWriter
	status  int   // the final status sent (0: none yet)
	bytes   int64 // body bytes sent
	g       *generation
	r       *http.Request // as served: with the span in its context
	arrival time.Time
	span    trace.Span // nil without tracing
	id      []string   // the request id as a header value, with the access log
	// The admission decision: the stage, class and tenant; why the
	// request was refused (notRefused: admitted); the admitted request's
	// state (nil when refused).
	stage, class, tenant string
	refusal              refusal
	rs                   *reqState
}

var observations = sync.Pool{New: func() any { return new(observation) }}

// observing reports whether any per-request observer is on in g.
func (h *Handler) observing(g *generation) bool {
	return g.access != nil || h.tel.Tracing() || h.tel.Measuring()
}

// observe starts observing r: its server span, its request id (kept from
// the client or made, sent back to the client and on to the backend). It
// returns the observation, which is the ResponseWriter to serve r with,
// and r with the span in its context.
func (h *Handler) observe(w http.ResponseWriter, r *http.Request, g *generation, arrival time.Time) (*observation, *http.Request) {
	ob := observations.Get().(*observation)
	*ob = observation{w: w, g: g, arrival: arrival}
	if h.tel.Tracing() {
		client := ""
		if ip := g.pol.ClientIP(r); ip.IsValid() {
			client = ip.Unmap().String()
		}
		r, ob.span = h.tel.StartServer(r, client)
	}
	if a := g.access; a != nil {
		ob.id = a.requestID(r)
		w.Header()[a.idHeader] = ob.id
	}
	ob.r = r
	return ob, r
}

// observed ends the observation of a request that has been answered (or
// abandoned): the span ends, the duration is recorded, the access log
// gets its line.
func (h *Handler) observed(ob *observation) {
	now := time.Now()
	if ob.status == 0 && ob.rs != nil && ob.rs.switched {
		ob.status = http.StatusSwitchingProtocols // written on the hijacked connection
	}
	if ob.span != nil {
		telemetry.EndServer(ob.span, ob.status)
	}
	if h.tel.Measuring() {
		h.tel.RecordServer(ob.r.Context(), ob.r, ob.status, now.Sub(ob.arrival))
	}
	if a := ob.g.access; a != nil {
		h.alog.record(now, a, ob)
	}
	*ob = observation{}
	observations.Put(ob)
}

// decided records the stage's decision on cr: admitted with ticket t, or
// refused with err (its reason, and on the span the sluice.* attributes
// and, for a refusal, the sluice.shed event).
func (ob *observation) decided(cr policy.Request, t stage.Ticket, err error) {
	if ob == nil {
		return
	}
	g := ob.g
	ob.stage, ob.class, ob.tenant = cr.Stage.Name(), g.pol.ClassName(cr.Class), cr.Tenant
	switch {
	case err == nil:
	case errors.Is(err, stage.ErrDeadline):
		ob.refusal = refusedDeadline
	case errors.Is(err, stage.ErrQueueTimeout):
		ob.refusal = refusedQueueTimeout
	case errors.Is(err, sluice.ErrRejected):
		ob.refusal = refusedShed
	default:
		ob.refusal = refusedClientGone
	}
	if ob.span == nil {
		return
	}
	d := telemetry.Decision{Stage: ob.stage, Class: ob.class, Priority: cr.Hop.Priority,
		Controller: g.controllerOf(ob.stage), Admitted: err == nil, Reason: ob.refusal.String()}
	if err == nil {
		d.QueueWait = t.Start().Sub(t.Arrival())
	}
	telemetry.Record(ob.span, d)
}

// refused records a refusal after the stage admitted the request: by the
// backend pool, the client share, or the client leaving while it waited
// for a backend (the sluice.shed event on the span but for the last).
func (ob *observation) refused(why refusal) {
	if ob == nil {
		return
	}
	ob.refusal = why
	if ob.span != nil && why != refusedClientGone && why != refusedDeadline {
		telemetry.Shed(ob.span, why.String())
	}
}

// admitted records the state of the request sent upstream, which
// carries the request id on to the backend.
func (ob *observation) admitted(rs *reqState) {
	if ob != nil {
		ob.rs, rs.ob = rs, ob
	}
}

// Header returns the underlying writer's header map.
func (ob *observation) Header() http.Header { return ob.w.Header() }

// WriteHeader records the final status (interim 1xx answers other than
// 101 are passed on without it) and passes code on.
func (ob *observation) WriteHeader(code int) {
	if ob.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		ob.status = code
	}
	ob.w.WriteHeader(code)
}

// Write counts the body bytes sent.
func (ob *observation) Write(p []byte) (int, error) {
	ob.status = cmp.Or(ob.status, http.StatusOK)
	n, err := ob.w.Write(p)
	ob.bytes += int64(n)
	return n, err
}

// Unwrap returns the underlying ResponseWriter, for
// http.ResponseController (flushes, hijacking, deadlines).
func (ob *observation) Unwrap() http.ResponseWriter { return ob.w }
