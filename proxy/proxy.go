// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	sclient "github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/internal/reject"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/buffer"
	"github.com/sluicehq/sluice/proxy/guard"
	"github.com/sluicehq/sluice/proxy/internal/h1"
	"github.com/sluicehq/sluice/proxy/internal/telemetry"
	"github.com/sluicehq/sluice/proxy/overload"
	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// generation is one running configuration: the config, its admission
// policy and its backend pool. Requests keep the generation they started
// with; a reload publishes a new one atomically.
type generation struct {
	cfg           *Config
	pol           *policy.Policy
	pool          *Pool
	degradeHeader string // canonical header name
	overall       time.Duration
	preserveHost  bool
	ignoreAbort   bool          // backends.ignore_client_abort
	retryAfter    time.Duration // Retry-After of sluice's own refusals: reject.retry_after in whole seconds, at least 1
	// The hop headers (canonical): removed from what the client sent,
	// set from this hop's reading of the request.
	priorityHeader, tenantHeader, timeoutHeader string
	reported                                    []overload.ReportedHeader // backend-reported utilization headers
	shares                                      *share.Shares             // client bandwidth shares, or nil
	buf                                         buffer.Policy             // response_buffering
	access                                      *accessSettings           // access_log, or nil
	cluster                                     *cluster.Runner           // cluster mode's runner, or nil
	version                                     uint64
	loaded                                      time.Time
	stop                                        context.CancelFunc // stops the policy's runners; nil until started
}

// Handler is the proxy's request path: smuggling guard, classification,
// the stage's admission gate, the backend pool, and the reverse proxy
// (net/http/httputil.ReverseProxy) with measurement of each response from
// its arrival to its last byte. It is safe for concurrent use; the
// configuration it serves is swapped atomically by Server.Apply.
type Handler struct {
	gen     atomic.Pointer[generation]
	rp      *httputil.ReverseProxy
	buf     *buffer.Buffers    // response buffering's memory, files and counters
	client  *sclient.Transport // sluice's client side on the upstream calls
	m       *metrics
	cm      *guard.Metrics // client-side refusals; nil in Check and benchmarks
	log     *slog.Logger
	warn    rate.Sometimes // rate-limits upstream error logs
	streams atomic.Int64   // long-lived responses in progress
	active  atomic.Int64   // requests in progress
	// offered counts the requests that reached admission control, shed
	// those of them refused with 503 (by a stage, the pool or a client
	// share): /readyz's shed fraction (health.go).
	offered, shed atomic.Uint64
	// ready is the server's readiness, for health.listener_prefix (nil in
	// Check and benchmarks).
	ready *readiness
	// tel exports traces (a server span per request) when configured;
	// nil is off, set once before serving.
	tel *telemetry.Telemetry
	// alog writes every generation's access log (access_log).
	alog *accessLog
}

// stateKey finds a request's *reqState in its context.
type stateKey struct{}

var errOverallTimeout = errors.New("sluice: upstream overall timeout")

func newHandler(m *metrics, log *slog.Logger) *Handler {
	h := &Handler{m: m, log: log, warn: rate.Sometimes{Interval: time.Second}, alog: newAccessLog(log)}
	h.buf = buffer.New(log)
	// The upstream client side, for the handler's life: its destinations'
	// counts survive reloads, which only change its settings (SetConfig).
	// The proxy builds every outgoing request for one call, so the hop
	// headers are stamped on it in place.
	var cfg Config
	cfg.setUpstreamClientDefaults()
	ct, err := sclient.New(genTransport{}, cfg.upstreamClient(), sclient.Options{StampInPlace: true})
	if err != nil {
		panic("proxy: the default upstream client configuration is invalid: " + err.Error())
	}
	h.client = ct
	h.rp = &httputil.ReverseProxy{
		Rewrite:   h.rewrite,
		Transport: ct,
		// 0: a response of known length goes out in as few writes as its
		// size allows; ReverseProxy itself flushes every write of event
		// streams and of bodies of unknown length. -1 (flush every write)
		// cost a second write syscall per small response: 41% of the
		// proxy's CPU was in write syscalls under wrk -c64.
		FlushInterval:  0,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		BufferPool:     h.buf.CopyBuffers(),
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.errorHandler,
	}
	return h
}

// reqState is one admitted request. It is also the request's context, so
// that the ReverseProxy hooks find it without an extra allocation.
type reqState struct {
	context.Context
	h       *Handler
	gen     *generation
	lc      stage.Lifecycle
	backend *Backend
	sc      *h1.ScanConn
	arrival time.Time
	// wait is the time from arrival until the request could leave for its
	// backend (its stage's and pool's slots granted), lat its stage and
	// class's latency histograms.
	wait    time.Duration
	lat     *policy.Latency
	quality float64    // 0 when the stage does not degrade
	hop     sluice.Hop // what travels on to the backend (priority, tenant)
	// dlCancel ends the upstream context's deadline (a request with one),
	// or is nil.
	dlCancel context.CancelFunc

	// client bandwidth share (shares.go); only the handler's goroutine
	// touches these but shareDelay, read by stream.
	res        share.Reservation
	shareOn    bool  // res is held and must be recorded or released
	shareErr   error // a share rejection computed once the headers were in
	shareBytes int64
	shareDelay atomic.Int64 // injected delay so far, ns

	failed      atomic.Bool // 5xx from upstream or a transport failure
	clientFault atomic.Bool // the client's request body failed: not the backend's doing
	clientGone  atomic.Bool
	poolHeld    atomic.Bool // the pool slot is still held (releasePool gives it back once)
	streamed    atomic.Bool // stream ran: the streams gauge counts it
	// unobserved: an upgrade or an event stream, whose length is no
	// latency; switched: an upgrade, whose 101 ReverseProxy writes on the
	// hijacked connection (both set by modifyResponse).
	unobserved, switched bool
	// upstreamNS is the upstream exchange's time once it ended, ns.
	upstreamNS atomic.Int64
	// attempts counts the upstream attempts started (with tracing).
	attempts atomic.Int32
	// ob is the request's observation (the access log's request id goes
	// upstream), or nil.
	ob *observation

	// in is the client's request (for the time spent waiting on the client)
	// and writeWait0 the connection's write wait when it arrived.
	in         *http.Request
	writeWait0 time.Duration
	// upstream wraps the backend's response body to see its end.
	upstream upstreamBody
	// spool is the response's buffer (package buffer), or nil; buffered is
	// set with it, before its filler starts. bpWait sums the filler's
	// waits for the client, ns: with back-pressure, the client's time.
	spool     *buffer.Spool
	buffered  bool
	bpWait    atomic.Int64
	longTimer *time.Timer
	overTimer *time.Timer
	cancel    context.CancelCauseFunc
}

// Value returns the reqState itself for stateKey.
func (rs *reqState) Value(key any) any {
	if key == (stateKey{}) {
		return rs
	}
	return rs.Context.Value(key)
}

func stateOf(ctx context.Context) *reqState {
	rs, _ := ctx.Value(stateKey{}).(*reqState)
	return rs
}

// stream releases the request's stage and pool slots early: its response
// is long-lived (an upgrade, an event stream, or longer than the stage's
// long_lived). It is counted as completed, without a response-time
// sample, when it ends.
func (rs *reqState) stream() {
	if !rs.lc.Stream(time.Now()) {
		return
	}
	if rs.overTimer != nil {
		rs.overTimer.Stop()
	}
	rs.releasePool()
	rs.streamed.Store(true)
	rs.h.streams.Add(1)
}

// releasePool gives the backend slot back, once. It runs before the
// stage's slot is released (Lifecycle.Done): a request waiting at
// the stage is granted that slot at once and picks its backend, and with
// least-in-flight balancing it must see this backend's count already
// down, or it goes to another backend, past that backend's share (two
// backends of which one is slow would queue requests inside the slow
// one).
func (rs *reqState) releasePool() {
	if rs.poolHeld.CompareAndSwap(true, false) {
		rs.gen.pool.Release(rs.backend)
	}
}

// outcome is how the request went as the stage should count it: time
// spent on the client (a slow reader or uploader) and injected share
// delays are not the backend's; a client whose request body failed is
// neither a backend failure nor a sample. A buffered response's backend
// is read while the client is written to and while a share delay runs:
// only the time its filler waited for the client is left out.
func (rs *reqState) outcome(aborted bool) stage.Outcome {
	var excluded time.Duration
	if rs.buffered {
		excluded = time.Duration(rs.bpWait.Load())
	} else {
		excluded = time.Duration(rs.shareDelay.Load())
		if rs.in != nil {
			excluded += guard.ClientWriteWait(rs.in) - rs.writeWait0
		}
	}
	if rs.in != nil {
		excluded += guard.ClientReadWait(rs.in)
	}
	if rs.clientFault.Load() {
		return stage.Outcome{OK: true, NoSample: true, Excluded: excluded}
	}
	// A failure, a timeout or a client that gave up is not ok (see
	// stage.Ticket.Finish for when it is still a censored sample). Share
	// rejections carry no response time.
	return stage.Outcome{OK: !rs.failed.Load() && !aborted, NoSample: rs.shareErr != nil, Excluded: excluded}
}

// upstreamDone ends the request's use of the backend when its response
// body has been read to the end: the stage takes its sample and the
// backend slot goes to the next request, while the proxy still writes the
// last bytes to a client that may be slow to read them.
func (rs *reqState) upstreamDone() { rs.endUpstream(time.Now(), false) }

// UpstreamFailed ends the request's use of the backend when a buffered
// response's body failed to read (its filler saw the error): the client
// still gets what came before, and then its connection is aborted.
func (rs *reqState) UpstreamFailed() { rs.endUpstream(time.Now(), true) }

// ClientWait adds d to the time a buffered response's filler waited for
// the client: with back-pressure, the client's time.
func (rs *reqState) ClientWait(d time.Duration) { rs.bpWait.Add(int64(d)) }

// LongLived reports whether the response became long-lived (stream ran).
func (rs *reqState) LongLived() bool { return rs.streamed.Load() }

// endUpstream ends the request's use of the backend at now, the first
// time it is called: the backend slot goes back, the stage takes its
// sample, sluice_upstream_duration_seconds the exchange's time (from the
// end of the request's wait, less the client's time the stage leaves
// out) and
// sluice_queue_wait_seconds the wait before it. It returns the request's
// outcome as of now.
func (rs *reqState) endUpstream(now time.Time, aborted bool) stage.Outcome {
	rs.releasePool()
	o := rs.outcome(aborted)
	if rs.lc.Done(now, o) && !rs.unobserved {
		d := max(now.Sub(rs.arrival)-rs.wait-o.Excluded, 0)
		rs.upstreamNS.Store(int64(d))
		rs.lat.QueueWait(rs.wait)
		rs.lat.Upstream(d)
	}
	return o
}

// finish ends the request (its last byte was written, or it was aborted).
func (rs *reqState) finish(aborted bool) {
	if rs.longTimer != nil {
		rs.longTimer.Stop()
	}
	if rs.overTimer != nil {
		rs.overTimer.Stop()
	}
	if rs.cancel != nil {
		rs.cancel(nil)
	}
	if rs.dlCancel != nil {
		rs.dlCancel()
	}
	if aborted && rs.Context.Err() != nil {
		rs.clientGone.Store(true)
	}
	rs.shareEnd(!aborted)
	now := time.Now()
	o := rs.endUpstream(now, aborted) // the outcome only, when upstreamDone ran
	if !rs.unobserved {
		rs.lat.Request(latencyOutcome(o), now.Sub(rs.arrival))
	}
	if rs.spool != nil {
		_ = rs.spool.Close() // ReverseProxy closed it, unless it panicked first
	}
	if rs.streamed.Load() {
		rs.h.streams.Add(-1)
	}
}

// upstreamBody is the backend's response body, watched for its end.
type upstreamBody struct {
	rs   *reqState
	rc   io.ReadCloser
	done bool           // read by the goroutine reading the body only (the handler's, or a buffer's filler)
	grpc *http.Response // a gRPC answer, whose status comes at the end (grpc.go)
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		if b.grpc != nil && grpcFailed(b.grpc) {
			b.rs.failed.Store(true)
		}
		b.rs.upstreamDone()
	}
	return n, err
}

func (b *upstreamBody) Close() error { return b.rc.Close() }

// ServeHTTP proxies one request, in phases: the requests the proxy
// answers itself (serveLocal), the request's reading (classify), its
// admission (the stage, the client's share, a backend slot: admit,
// acquire), and the exchange with the backend (forward).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	h.active.Add(1)
	defer h.active.Add(-1)
	g := h.gen.Load()
	if h.serveLocal(w, r, g, arrival) {
		return
	}
	var ob *observation // the span, the OTel metric and the access log's; nil when all are off
	if h.observing(g) {
		ob, r = h.observe(w, r, g, arrival)
		w = ob
		defer h.observed(ob)
	}
	h.offered.Add(1)
	cr, proto := g.classify(r, arrival)
	// The request's deadline (its timeout header's) bounds its waits here
	// (the stage's queue, the pool's) and its upstream exchange.
	ctx := r.Context()
	if !cr.Deadline.IsZero() {
		if d, ok := ctx.Deadline(); !ok || cr.Deadline.Before(d) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, cr.Deadline)
			defer cancel()
		}
	}
	rs := h.admit(ctx, w, r, g, ob, &cr, proto, arrival)
	if rs == nil {
		return
	}
	h.forward(ctx, w, r, rs, cr.Stage)
}

// serveLocal answers the requests the proxy answers itself, never
// admission controlled: "OPTIONS *", the health endpoints under
// health.listener_prefix and the stages' probe paths. It reports whether
// it answered r.
func (h *Handler) serveLocal(w http.ResponseWriter, r *http.Request, g *generation, arrival time.Time) bool {
	if r.Method == http.MethodOptions && r.RequestURI == "*" {
		// "OPTIONS *" asks about the proxy itself (RFC 9110 §9.3.7).
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return true
	}
	if pre := g.cfg.Health.ListenerPrefix; pre != "" && h.ready != nil && strings.HasPrefix(r.URL.Path, pre) {
		switch r.URL.Path[len(pre):] {
		case "/healthz":
			serveHealthz(w, r)
			return true
		case "/readyz":
			h.ready.serve(w, r)
			return true
		}
	}
	if g.isProbePath(r.URL.Path) {
		h.serveProbe(w, r, g, arrival)
		return true
	}
	return false
}

// classify reads r at arrival: its stage, class and hop headers (the
// policy's reading), and its protocol; a gRPC call's grpc-timeout also
// bounds its deadline.
func (g *generation) classify(r *http.Request, arrival time.Time) (policy.Request, reject.Protocol) {
	cr := g.pol.ClassifyRequest(r, arrival)
	proto := reject.ProtocolOf(r)
	if proto == reject.GRPC {
		cr.Deadline = grpcDeadline(g.pol, r, arrival, cr.Deadline)
	}
	return cr, proto
}

// admit puts the request cr read through admission control: its stage
// (within ctx, which carries its deadline), its client's bandwidth
// share, then a backend slot (acquire). It answers a refusal itself and
// returns nil; else the admitted request's state.
func (h *Handler) admit(ctx context.Context, w http.ResponseWriter, r *http.Request, g *generation, ob *observation,
	cr *policy.Request, proto reject.Protocol, arrival time.Time) *reqState {
	st := cr.Stage
	t, err := st.EnterRequest(ctx, stage.Request{Class: cr.Class, Tenant: cr.Tenant, Arrival: arrival})
	ob.decided(*cr, t, err)
	if err != nil {
		cr.Latency.Request(h.refused(w, r, g, proto, err), time.Since(arrival))
		return nil
	}
	g.pol.WriteRateLimit(w.Header(), st.Name(), time.Now())
	var res share.Reservation
	if g.shares != nil {
		if res, err = h.beginShare(w, r, g, t, ob); err != nil {
			cr.Latency.Request(policy.LatencyRejected, time.Since(arrival))
			return nil
		}
	}
	return h.acquire(ctx, w, r, g, ob, cr, proto, t, res, arrival)
}

// acquire takes a backend slot for the request the stage admitted with
// t (and its client's share reserved with res), and returns its state;
// or answers the pool's refusal and returns nil.
func (h *Handler) acquire(ctx context.Context, w http.ResponseWriter, r *http.Request, g *generation, ob *observation,
	cr *policy.Request, proto reject.Protocol, t stage.Ticket, res share.Reservation, arrival time.Time) *reqState {
	b, granted, err := g.pool.acquireAt(ctx)
	if err != nil {
		res.Release()
		// A saturated pool, a deadline that passed in the pool's queue, or
		// a client that left while queued, fails the request, but its wait
		// says nothing about the backend: no sample (a queue timeout is
		// not a response time).
		t.Finish(time.Now(), stage.Outcome{OK: false, NoSample: true})
		cr.Latency.Request(h.poolFailed(w, r, g, ob, proto, err), time.Since(arrival))
		return nil
	}
	sent := t.Start() // the stage's grant (arrival when it admitted at once), unless the pool's came later
	if !granted.IsZero() {
		sent = granted
	}
	sc := guard.ScanConnOf(r.Context()) // its verdict was checked by the listener's guard
	rs := &reqState{Context: r.Context(), h: h, gen: g, backend: b, sc: sc, arrival: arrival, wait: sent.Sub(arrival), lat: cr.Latency,
		hop: cr.Hop, res: res, shareOn: g.shares != nil, in: r, writeWait0: guard.ClientWriteWait(r)}
	rs.poolHeld.Store(true)
	rs.lc.Reset(t)
	ob.admitted(rs)
	if cr.Stage.Degrading() {
		rs.quality = cr.Stage.Quality()
	}
	return rs
}

// forward sends the admitted request rs to its backend through the
// reverse proxy, with the deadline ctx carries and its stage st's timers,
// and finishes it once its answer was written or aborted.
func (h *Handler) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, rs *reqState, st *stage.Stage) {
	uctx := rs.upstreamContext(ctx, st, rs.lc.Ticket())
	completed := false
	defer func() {
		if !completed { // ReverseProxy aborted the response (panic)
			rs.finish(true)
		}
	}()
	h.rp.ServeHTTP(w, r.WithContext(uctx))
	completed = true
	rs.finish(false)
}

// upstreamContext returns the context of rs's upstream request, which
// keeps ctx's deadline, and starts rs's timers (the overall timeout,
// long_lived). The stage st admitted rs with ticket t.
func (rs *reqState) upstreamContext(ctx context.Context, st *stage.Stage, t stage.Ticket) context.Context {
	g, b := rs.gen, rs.backend
	// The upstream request's context: the client's (rs), or with
	// ignore_client_abort one that keeps rs's values but not its
	// cancellation. Either way it gets a Done channel of its own when a
	// timer or ignore_client_abort needs one, which also keeps
	// ReverseProxy from watching the client's connection itself.
	var uctx context.Context = rs
	if g.ignoreAbort {
		uctx = context.WithoutCancel(rs)
	}
	if dl, ok := ctx.Deadline(); ok {
		// The request's deadline bounds the exchange (the client may
		// leave before it under ignore_client_abort; the deadline still
		// holds).
		uctx, rs.dlCancel = context.WithDeadline(uctx, dl)
	}
	hog := st.HogRule() != (stage.Hog{})
	if g.overall > 0 || g.ignoreAbort || hog {
		uctx, rs.cancel = context.WithCancelCause(uctx)
	}
	if hog {
		// The stage's hog rule may cancel the exchange: the upstream call
		// ends, and the client gets 503 (upstreamError).
		t.Watch(rs.cancel)
	}
	if st.MeasuresOvertakes() {
		// The stage orders requests by when they reach their backend,
		// among those of the same backend, and measures the share of
		// their time spent there.
		uctx = httptrace.WithClientTrace(uctx, &httptrace.ClientTrace{
			WroteRequest:         func(httptrace.WroteRequestInfo) { t.SentTo(time.Now(), b.index) },
			GotFirstResponseByte: func() { t.Answered(time.Now()) },
		})
	}
	if g.overall > 0 {
		rs.overTimer = time.AfterFunc(g.overall, func() { rs.cancel(errOverallTimeout) })
	}
	if ll := g.pol.LongLived(st); ll > 0 {
		rs.longTimer = time.AfterFunc(ll, rs.stream)
	}
	return uctx
}

// beginShare reserves the client's bandwidth share for the request the
// stage admitted with t, or answers the share policy's refusal (err).
func (h *Handler) beginShare(w http.ResponseWriter, r *http.Request, g *generation, t stage.Ticket, ob *observation) (share.Reservation, error) {
	c := g.identify(r)
	g.shares.RateLimit(w.Header(), c)
	res, err := g.shares.Begin(time.Now(), c)
	if err != nil {
		// An explicit rejection by the share policy: not a backend
		// failure, not a response-time sample.
		t.Finish(time.Now(), stage.Outcome{OK: true, NoSample: true})
		h.shed.Add(1)
		ob.refused(refusedShare)
		shareRejected(w, r, err)
	}
	return res, err
}

// refused answers a request its stage refused (err wraps
// sluice.ErrRejected), and returns its outcome: a request whose client
// left while it queued gets no answer, an error. Over HTTP the answer is
// the policy's (its reject section sets the status and the body).
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, g *generation, proto reject.Protocol, err error) policy.LatencyOutcome {
	if !errors.Is(err, sluice.ErrRejected) {
		return policy.LatencyError
	}
	h.shed.Add(1)
	if proto == reject.HTTP {
		g.pol.Reject(w, r, err)
		return policy.LatencyRejected
	}
	a := reject.Answer{Reason: reject.EarlyDiscard}
	if !errors.Is(err, stage.ErrDeadline) {
		rj := g.pol.Rejection(r)
		a = reject.Answer{Reason: reject.Overloaded, Stage: rj.Stage, Class: rj.Class, RetryAfter: rj.RetryAfter}
	}
	reject.Write(w, r, proto, a)
	return policy.LatencyRejected
}

// poolFailed answers a request the backend pool gave no slot (err is
// Pool.Acquire's), and returns its outcome: a saturated pool is a
// rejection (503 with Retry-After, or RESOURCE_EXHAUSTED for a gRPC
// call), a deadline that passed in its queue a 504 (DEADLINE_EXCEEDED), a
// client that left while queued no answer at all.
func (h *Handler) poolFailed(w http.ResponseWriter, r *http.Request, g *generation, ob *observation, proto reject.Protocol, err error) policy.LatencyOutcome {
	if full := errors.Is(err, ErrPoolQueueFull); full || errors.Is(err, ErrPoolQueueTimeout) {
		h.shed.Add(1)
		a, cause := reject.Answer{Reason: reject.PoolFull, RetryAfter: g.retryAfter}, "queue_full"
		if full {
			ob.refused(refusedPoolQueueFull)
		} else {
			ob.refused(refusedPoolQueueTimeout)
			a.Reason, a.Detail, cause = reject.PoolTimeout, g.pool.timeout.String(), "queue_timeout"
		}
		h.m.poolRejected.WithLabelValues(cause).Inc()
		reject.Write(w, r, proto, a)
		return policy.LatencyRejected
	}
	if !errors.Is(err, context.DeadlineExceeded) || r.Context().Err() != nil {
		ob.refused(refusedClientGone)
		return policy.LatencyError
	}
	ob.refused(refusedDeadline)
	h.m.deadline.WithLabelValues("pool_queue").Inc()
	if proto == reject.HTTP {
		h.m.gatewayErrors.WithLabelValues("504").Inc()
	}
	reject.Write(w, r, proto, reject.Answer{Reason: reject.PoolDeadline})
	return policy.LatencyError
}

// latencyOutcome is the outcome label of an admitted request that ended
// with o.
func latencyOutcome(o stage.Outcome) policy.LatencyOutcome {
	if o.OK {
		return policy.LatencyOK
	}
	return policy.LatencyError
}

// rewrite builds the outbound request: the chosen server, the Host,
// X-Forwarded-For/Proto/Host, and the quality header. ReverseProxy has
// already removed hop-by-hop headers (RFC 9110 §7.6.1, including those
// named in Connection) and any incoming Forwarded/X-Forwarded-* headers
// from pr.Out.
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	rs := stateOf(pr.In.Context())
	g := rs.gen
	pr.SetURL(rs.backend.URL)
	if g.preserveHost {
		pr.Out.Host = pr.In.Host
	}
	in, out := pr.In.Header, pr.Out.Header
	peer := peerAddr(pr.In.RemoteAddr)
	trusted := peer.IsValid() && g.pol.PeerTrusted(pr.In)
	ip := peer.Unmap().String()
	if !peer.IsValid() {
		ip = pr.In.RemoteAddr
	}
	vals := make([]string, 3) // one allocation for the three headers
	vals[0] = ip
	if prior, ok := in["X-Forwarded-For"]; ok && trusted && len(prior) > 0 {
		vals[0] = strings.Join(prior, ", ") + ", " + ip
	}
	vals[1] = pr.In.Host
	if v, ok := in["X-Forwarded-Host"]; ok && trusted && len(v) > 0 {
		vals[1] = v[0]
	}
	switch v, ok := in["X-Forwarded-Proto"]; {
	case ok && trusted && len(v) > 0:
		vals[2] = v[0]
	case pr.In.TLS != nil:
		vals[2] = "https"
	default:
		vals[2] = "http"
	}
	out["X-Forwarded-For"] = vals[0:1:1]
	out["X-Forwarded-Host"] = vals[1:2:2]
	out["X-Forwarded-Proto"] = vals[2:3:3]
	// The proxy answers the client's "Expect: 100-continue" itself, as
	// nginx does: Go's server sends the 100 when the body is first read
	// (by request buffering, or by the upstream transport as it streams
	// the body). Passed on, the backend's own 100 would follow it (two
	// 100s with request buffering), or race it: the standard transport
	// starts the body, whose first read sends the server's 100, as it
	// hands the backend's 100 to ReverseProxy to forward.
	delete(out, "Expect")
	if g.degradeHeader != "" {
		delete(out, g.degradeHeader)
		if rs.quality > 0 {
			out[g.degradeHeader] = []string{strconv.FormatFloat(rs.quality, 'f', 3, 64)}
		}
	}
	// What travels on is this hop's reading of the request, never the
	// client's headers as sent: an untrusted client's priority or tenant
	// must not reach a backend that trusts this proxy. The client side
	// (h.client) stamps the time left when it sends the request.
	delete(out, g.priorityHeader)
	delete(out, g.tenantHeader)
	delete(out, g.timeoutHeader)
	if rs.ob != nil && rs.ob.id != nil {
		out[g.access.idHeader] = rs.ob.id
	}
	if rs.hop.Priority != "" {
		out[g.priorityHeader] = []string{rs.hop.Priority}
	}
	if rs.hop.Tenant != "" {
		out[g.tenantHeader] = []string{rs.hop.Tenant}
	}
}

func peerAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err == nil {
		return ap.Addr()
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(host)
	return a
}

// modifyResponse notes upstream 5xx responses and long-lived responses.
func (h *Handler) modifyResponse(res *http.Response) error {
	rs := stateOf(res.Request.Context())
	if rs == nil {
		return nil
	}
	if a := rs.gen.access; a != nil {
		// The client gets sluice's request id (set before the handler
		// wrote anything), not a copy of the backend's echo beside it.
		delete(res.Header, a.idHeader)
	}
	overload.ReportedHeaders(rs.gen.reported).Take(res.Header)
	switch {
	case res.StatusCode >= 500:
		rs.failed.Store(true)
	case res.StatusCode == http.StatusSwitchingProtocols:
		if rs.sc != nil {
			rs.sc.Stop()
		}
		rs.unobserved, rs.switched = true, true
		rs.stream()
	case httpx.IsEventStream(res.Header.Get("Content-Type")):
		rs.unobserved = true
		rs.stream()
	}
	// The end of the upstream body ends the request's use of the backend
	// (a 101's body is the upgraded connection: left alone). Response
	// buffering reads it as fast as the backend sends it.
	if res.StatusCode != http.StatusSwitchingProtocols {
		body := buffer.HasBody(res)
		rs.upstream = upstreamBody{rs: rs, rc: res.Body}
		if reject.GRPCContent(res.Header) {
			rs.upstream.grpc = res
		}
		res.Body = &rs.upstream
		if s := rs.h.buf.NewSpool(rs, &rs.gen.buf, rs.in, res, body, rs.lc.Streamed()); s != nil {
			rs.spool, rs.buffered = s, true // before the spool's first read, which may end the exchange
			s.Start(res)
		}
	}
	return rs.shareBefore(res)
}

// genTransport sends each request with the transport of its generation's
// pool.
type genTransport struct{}

func (genTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rs := stateOf(req.Context())
	if rs == nil {
		return nil, errors.New("sluice: request without proxy state")
	}
	if rs.h.tel.Tracing() {
		return rs.tracedRoundTrip(req)
	}
	return rs.roundTrip(req)
}

// roundTrip sends one attempt of rs's upstream request.
func (rs *reqState) roundTrip(req *http.Request) (*http.Response, error) {
	if reject.GRPCContent(req.Header) && req.ProtoMajor == 2 {
		return rs.gen.pool.roundTripGRPC(req)
	}
	return rs.gen.pool.rt.RoundTrip(req)
}

func (h *Handler) policy() *policy.Policy {
	if g := h.gen.Load(); g != nil {
		return g.pol
	}
	return nil
}
