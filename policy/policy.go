// SPDX-License-Identifier: Apache-2.0

// Package policy turns a Config (classes, stages, rejection, shadow mode,
// degradation) into a live admission policy: a request classifier, one
// stage.Stage per configured stage plus an implicit "default" stage for
// requests no stage matches, the rejection answer and Prometheus metrics.
// The proxy and the root package's Middleware both drive a *Policy.
//
// Lifecycle: read a file with Load (or Parse: strict, defaulted and
// validated, every error a *ConfigError naming the file, line and
// setting) or write the Config in Go (a stage's controller as a Go value,
// StageConfig.Control), then New (a *sluice.FieldError names the setting's
// path), then Run in a goroutine; Wrap does the last two and wraps a
// handler, and Auto is the policy of the proxy's quick start told an SLO.
// On reload, build the new policy with Options.Previous: stages whose
// configuration did not change are carried over with their controller
// state and counters.
package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/classify"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/stage"
)

// Options are the run-time inputs of New that are not configuration.
type Options struct {
	// Now is the creation time of new stages (zero: time.Now()).
	Now time.Time
	// Rand seeds the sources of droppers and of the Retry-After jitter
	// (each stage gets its own source derived from it, and New draws from
	// it only while it runs); nil uses the concurrency-safe global source.
	// A seeded source makes decisions reproducible but serialises draws
	// with a mutex: use it in tests and simulations.
	Rand *rand.Rand
	// Previous is the policy being replaced, or nil. A stage of Previous
	// with the same name and the same configuration (controller and its
	// parameters, class order, burst, window, queue, shadow) is reused as
	// is: its controller state, gate settings, counters and decision count
	// carry over. The caller then cancels Previous's Run.
	Previous *Policy
	// Logger receives stage decisions (debug level) and warnings; nil:
	// slog.Default().
	Logger *slog.Logger
	// Registerer, when set, gets the policy's metrics (Collector) at New;
	// nil registers none (register Collector, or CollectorFor, yourself).
	// A policy that replaces one registered with the same Registerer
	// (Previous) takes its place there, so a reload keeps one set of
	// metrics.
	Registerer prometheus.Registerer
	// Utilization binds a utilization source to a stage by name (the kihl
	// and voigt-cpu controllers need one; without it they hold their
	// setting). A reused stage keeps the source it was built with.
	Utilization map[string]monitor.UtilizationSource
	// Queue binds a queue-length sensor to a stage by name (the
	// voigt-queue controller's input). Without it a stage with a
	// concurrency limit reports its wait queue, others 0.
	Queue map[string]func() float64
	// Controllers replaces, by stage name, the controller configuration
	// compiled from a configured stage's params with one the caller built
	// (the proxy resolves kihl's auto-tuning this way). It must set the
	// same kind of setting. Reuse on reload still compares the compiled
	// configuration, and a reused stage keeps the controller it was built
	// with. nil replaces nothing.
	Controllers map[string]control.Config
	// RecordsUpstream says that the caller records each admitted
	// request's upstream exchange (Request.Latency.Upstream): the proxy
	// does. Only then has sluice_upstream_duration_seconds series; behind
	// the middleware and the gRPC interceptors, where the handler is the
	// service itself, it has none (false, the default).
	RecordsUpstream bool
}

// Policy is a live admission policy. All methods are safe for concurrent
// use; a Policy is immutable apart from the state of its stages.
type Policy struct {
	cfg     Config
	cls     *classify.Classifier
	entries []*entry // configured stages in order, then the implicit one
	byName  map[string]*entry
	classes []string
	reject  *rejecter
	log     *slog.Logger
	// reg and registered: the Registerer of Options and the collector New
	// registered there (nil: none).
	reg        prometheus.Registerer
	registered prometheus.Collector
	hops       *hopCounts   // shared with the successor on reload
	lat        *latencyVecs // the latency histograms, shared with the successor on reload
	// defClass is the index of classes.default.
	defClass int
	// anyRateLimit: some stage has ratelimit_headers.
	anyRateLimit bool
}

// hopCounts counts the hop headers that were malformed or untrusted, by
// header (classify.HopPriority, HopTenant, HopTimeout).
type hopCounts struct {
	invalid, untrusted [3]atomic.Uint64
}

// hopHeaders are the hop headers in the order of hopCounts' arrays.
var hopHeaders = [3]classify.HopHeader{classify.HopPriority, classify.HopTenant, classify.HopTimeout}

func (h *hopCounts) add(info *classify.HopInfo) {
	if info.Invalid|info.Untrusted == 0 {
		return
	}
	for i, hh := range hopHeaders {
		if info.Invalid&hh != 0 {
			h.invalid[i].Add(1)
		}
		if info.Untrusted&hh != 0 {
			h.untrusted[i].Add(1)
		}
	}
}

// entry is one stage of the policy.
type entry struct {
	idx       int
	name      string
	st        *stage.Stage
	longLived time.Duration
	rateLimit bool // send RateLimit-Policy and RateLimit (ratelimit_headers)
	tenantKey tenantKey
	reported  bool // tenants.cost: reported (handlers report their cost)
	hog       bool // the stage has a hog rule: admissions are cancellable
	fp        fingerprint
	decisions *atomic.Uint64 // shared with the successor that reuses st
	lat       []Latency      // the latency observers of each class
}

// New builds a policy from cfg: a copy of cfg is given its defaults and
// validated (the first problem is returned as a *sluice.FieldError), then every
// stage is built, or reused from opts.Previous. cfg itself is not
// modified.
func New(cfg Config, opts Options) (*Policy, error) {
	c := cfg.clone()
	c.SetDefaults()
	comp, err := compile(&c)
	if err != nil {
		return nil, err
	}
	cls, err := classify.New(comp.cls)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	p := &Policy{cfg: c, cls: cls, byName: map[string]*entry{}, classes: c.Classes.Order, reject: comp.reject, log: log,
		hops: new(hopCounts), lat: newLatencyVecs()}
	if opts.Previous != nil {
		p.hops, p.lat = opts.Previous.hops, opts.Previous.lat
	}
	p.defClass = comp.cls.DefaultClass
	build := func(name string, ctrl control.Config, fp fingerprint, sc *StageConfig) (*entry, error) {
		e := &entry{idx: len(p.entries), name: name, fp: fp, longLived: DefaultLongLived,
			reported: fp.tenants.Cost == stage.CostReported, hog: fp.hog != (stage.Hog{})}
		if sc != nil {
			e.longLived, e.rateLimit = sc.LongLived, sc.RateLimitHeaders
		}
		if prev := opts.Previous; prev != nil {
			if old, ok := prev.byName[name]; ok && old.fp.equal(&fp) {
				e.st, e.decisions = old.st, old.decisions
				return e, nil
			}
		}
		so := stage.Options{Name: name, Controller: ctrl, ClassNames: c.Classes.Order, Shadow: c.Shadow, Rand: derive(opts.Rand),
			Utilization: opts.Utilization[name], Queue: opts.Queue[name]}
		if rc, ok := opts.Controllers[name]; ok && sc != nil && rc != nil {
			so.Controller = rc
		}
		if sc != nil {
			so.Burst, so.Window, so.MaxQueue, so.QueueTimeout = sc.Burst, sc.Window, sc.Queue.Max, sc.Queue.Timeout
			so.Priority = fp.priority
			so.Tenants = fp.tenants
			so.Hog = fp.hog
		}
		st, err := stage.New(so, now)
		if err != nil {
			return nil, err
		}
		e.st, e.decisions = st, new(atomic.Uint64)
		if sc != nil && control.NeedsOf(so.Controller).Utilization == control.NeedRequired && so.Utilization == nil {
			log.Warn("stage has no utilization source: its controller will hold its setting", "stage", name, "controller", sc.Controller)
		}
		return e, nil
	}
	for i := range comp.stages {
		cs := &comp.stages[i]
		e, err := build(cs.cfg.Name, cs.ctrl, cs.fp, &cs.cfg)
		if err != nil {
			return nil, &sluice.FieldError{Path: fmt.Sprintf("stages[%d]", i), Msg: err.Error()}
		}
		e.tenantKey = cs.tenantKey
		p.entries = append(p.entries, e)
		p.byName[e.name] = e
		p.anyRateLimit = p.anyRateLimit || e.rateLimit
	}
	implicit, err := control.NewConfig(c.ImplicitController())
	if err != nil {
		return nil, fmt.Errorf("policy: implicit stage: %w", err)
	}
	dfp := fingerprint{ctrl: implicit, classes: c.Classes.Order, burst: DefaultBurst, window: DefaultWindow,
		maxQueue: DefaultQueueMax, queueTimeout: DefaultQueueTimeout, shadow: c.Shadow}
	e, err := build(ImplicitStage, implicit, dfp, nil)
	if err != nil {
		return nil, fmt.Errorf("policy: implicit stage: %w", err)
	}
	p.entries = append(p.entries, e)
	p.byName[e.name] = e
	p.reject.bind(len(p.entries), len(p.classes), derive(opts.Rand))
	p.bindLatency(opts.Previous, opts.RecordsUpstream)
	if err := p.register(opts.Registerer, opts.Previous); err != nil {
		return nil, err
	}
	return p, nil
}

// register registers p's collector with reg (nil: none), in place of
// prev's when prev registered its own there.
func (p *Policy) register(reg prometheus.Registerer, prev *Policy) error {
	if reg == nil {
		return nil
	}
	if prev != nil && prev.registered != nil && prev.reg == reg {
		reg.Unregister(prev.registered)
	}
	c := p.Collector()
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("policy: registering its metrics: %w", err)
	}
	p.reg, p.registered = reg, c
	return nil
}

// derive returns a new source seeded from rng, or nil for nil: each stage
// and the rejecter get their own source, since a *rand.Rand is not safe
// for concurrent use, and the whole policy stays reproducible from one
// seed.
func derive(rng *rand.Rand) *rand.Rand {
	if rng == nil {
		return nil
	}
	return rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
}

// Config returns the policy's configuration with its defaults filled in.
// The caller must not modify it.
func (p *Policy) Config() Config { return p.cfg }

// ClassNames returns the class names in priority order (index 0 is the
// highest), the class indexes of Classify.
func (p *Policy) ClassNames() []string { return append([]string(nil), p.classes...) }

// ClassName returns the name of class index c (the default class for an
// index out of range). It does not allocate.
func (p *Policy) ClassName(c int) string {
	if c >= 0 && c < len(p.classes) {
		return p.classes[c]
	}
	return DefaultClass
}

// Classify returns r's stage (the implicit "default" stage when no stage
// matches) and class index: the class of a believed priority header, or
// of the class rules. It does not allocate.
func (p *Policy) Classify(r *http.Request) (st *stage.Stage, class int) {
	e, class, _ := p.classifyHop(r)
	return e.st, class
}

// classifyHop is classify with the hop headers (Config.Hops).
func (p *Policy) classifyHop(r *http.Request) (*entry, int, classify.HopInfo) {
	i, class, h := p.cls.ClassifyHop(r)
	if i < 0 {
		return p.entries[len(p.entries)-1], class, h
	}
	return p.entries[i], class, h
}

// Request is one request as the policy reads it: its stage, its class,
// what travels on with it to the next hop, and its deadline.
type Request struct {
	// Stage is the request's stage (the implicit "default" stage when no
	// stage matches) and Class its class index.
	Stage *stage.Stage
	Class int
	// Hop is what the request carries to the next hop: the priority it
	// came with when that was believed (as it came: a class name or a
	// criticality), else the name of its class here unless that is the
	// default class (classes.default: absent, the next hop gives the
	// request its own default); and its tenant, when believed.
	Hop sluice.Hop
	// Deadline is now plus the timeout header's time, clamped to
	// hops.min_timeout and hops.max_timeout (zero: no header). The
	// request's context may have an earlier one.
	Deadline time.Time
	// Tenant is the request's tenant for its stage's fair queueing, as
	// the stage's tenants.key names it: by default Hop.Tenant ("" when
	// the request names none).
	Tenant string
	// Latency records the request's latency histograms, those of its
	// stage and class (Policy.Collector exports them).
	Latency *Latency
}

// ClassifyRequest reads r at now: its stage and class, its hop headers
// (counting those that are malformed or untrusted in
// sluice_hop_invalid_total and sluice_hop_untrusted_total), its deadline
// and its tenant (tenants.key). It does not allocate, but for the tenant
// of a stage whose tenants.key is client (the address's text).
func (p *Policy) ClassifyRequest(r *http.Request, now time.Time) Request {
	_, out := p.classifyRequest(r, now)
	return out
}

// classifyRequest is ClassifyRequest with the request's entry; a zero
// now reads the clock, only when the request has a timeout.
func (p *Policy) classifyRequest(r *http.Request, now time.Time) (*entry, Request) {
	e, class, h := p.classifyHop(r)
	p.hops.add(&h)
	out := Request{Stage: e.st, Class: class, Hop: sluice.Hop{Priority: h.Priority, Tenant: h.Tenant}, Tenant: h.Tenant,
		Latency: e.latency(class)}
	if e.tenantKey.kind != tenantHop {
		out.Tenant = p.tenant(e.tenantKey, r, h.Tenant)
	}
	if out.Hop.Priority == "" && class != p.defClass && class >= 0 && class < len(p.classes) {
		out.Hop.Priority = p.classes[class]
	}
	if h.HasTimeout {
		if now.IsZero() {
			now = time.Now()
		}
		out.Deadline = now.Add(h.Timeout)
	}
	return e, out
}

// HopHeaders returns the names of the headers that carry a request's
// priority, tenant and remaining time (hops.priority_header,
// hops.tenant_header, hops.timeout_header).
func (p *Policy) HopHeaders() (priority, tenant, timeout string) {
	h := &p.cfg.Hops
	return h.PriorityHeader, h.TenantHeader, h.TimeoutHeader
}

// ClientIP returns r's client address: the peer, or the first untrusted
// X-Forwarded-For entry from the right when the peer is a trusted proxy
// (see classify.ClientFrom). It is the zero Addr when RemoteAddr holds no
// IP address.
func (p *Policy) ClientIP(r *http.Request) netip.Addr { return p.cls.ClientIP(r) }

// PeerTrusted reports whether r's direct peer is one of
// classes.trusted_proxies.
func (p *Policy) PeerTrusted(r *http.Request) bool { return p.cls.PeerTrusted(r) }

// Stages returns the stages in configuration order, the implicit
// "default" stage last.
func (p *Policy) Stages() []*stage.Stage {
	out := make([]*stage.Stage, len(p.entries))
	for i, e := range p.entries {
		out[i] = e.st
	}
	return out
}

// Stage returns the stage called name, or nil.
func (p *Policy) Stage(name string) *stage.Stage {
	if e, ok := p.byName[name]; ok {
		return e.st
	}
	return nil
}

// DegradeHeader returns the name of the request header that carries a
// degrading stage's quality level to the backend.
func (p *Policy) DegradeHeader() string { return p.cfg.Degrade.Header }

// Shadow reports whether the policy admits everything and only records
// would-be rejections.
func (p *Policy) Shadow() bool { return p.cfg.Shadow }

// LongLived returns the response duration beyond which a response of st
// is a stream (the stage's long_lived), or 0 when st is not a stage of p.
func (p *Policy) LongLived(st *stage.Stage) time.Duration {
	for _, e := range p.entries {
		if e.st == st {
			return e.longLived
		}
	}
	return 0
}

// State returns every stage's state with its last n decisions, in the
// order of Stages.
func (p *Policy) State(n int) []stage.State {
	out := make([]stage.State, len(p.entries))
	for i, e := range p.entries {
		out[i] = e.st.State(n)
	}
	return out
}

// Decisions returns the number of controller steps st has taken under
// Run or Step (carried over on reuse), or 0 when st is not a stage of p.
func (p *Policy) Decisions(st *stage.Stage) uint64 {
	for _, e := range p.entries {
		if e.st == st {
			return e.decisions.Load()
		}
	}
	return 0
}

// Step runs every stage's due control steps at now (see stage.Step) and
// returns their decisions. Run calls it per stage on a ticker; tests and
// simulations call it directly.
func (p *Policy) Step(now time.Time) []sluice.Decision {
	var out []sluice.Decision
	for _, e := range p.entries {
		out = append(out, p.step(e, now)...)
	}
	return out
}

func (p *Policy) step(e *entry, now time.Time) []sluice.Decision { return p.runner(e).Step(now) }

// runner is the stage.Runner of e's stage: it counts and logs every
// decision.
func (p *Policy) runner(e *entry) stage.Runner {
	return stage.Runner{Stepper: e.st, OnStep: func(_ time.Time, ds []sluice.Decision) {
		e.decisions.Add(uint64(len(ds)))
		for _, d := range ds {
			p.log.Debug("decision", "stage", e.name, "controller", d.Controller, "class", d.Class,
				"old", d.Old, "new", d.New, "acted", d.Acted, "reason", d.Reason)
		}
	}}
}

// Run drives every stage with the wall clock until ctx ends, one
// stage.Runner per stage: each steps at its controller's period, or every
// stage.MaxPoll for a sample-triggered controller (SEDA's nreq). It
// returns when all of them have stopped.
func (p *Policy) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range p.entries {
		wg.Go(func() { p.runner(e).Run(ctx) })
	}
	wg.Wait()
}

// Admit classifies r and puts it through its stage's gate (Policy
// implements sluice.Policy). A rejection is an error wrapping
// sluice.ErrRejected; if r's context ends while the request waits for a
// concurrency slot, the context's error. The Admission is pooled: it must
// not be used after Done. Admit does not allocate in the steady state.
//
// The request's deadline is its context's, or the timeout header's when
// that is earlier: a request whose deadline has passed, or would pass
// before it gets a slot, is rejected (stage.ErrDeadline). An admitted
// request's handler gets, through the Admission's Context, that deadline
// and what travels on to the next hop (sluice.WithHop); sluice's client
// side (package client) stamps them on the calls made with it. That costs
// allocations only for a request that has a deadline from its header or a
// hop to carry (a believed priority or tenant, or a class other than the
// default).
func (p *Policy) Admit(r *http.Request) (sluice.Admission, error) {
	return p.AdmitContext(r.Context(), r)
}

// AdmitContext is Admit with ctx as the request's context instead of
// r.Context(): for a caller that reads another protocol's call as an
// HTTP request (gRPC: package grpcsluice) and so saves the copy that
// r.WithContext makes.
func (p *Policy) AdmitContext(ctx context.Context, r *http.Request) (sluice.Admission, error) {
	now := time.Now()
	e, cr := p.classifyRequest(r, now)
	var cancel context.CancelFunc
	if !cr.Deadline.IsZero() {
		if d, ok := ctx.Deadline(); !ok || cr.Deadline.Before(d) {
			ctx, cancel = context.WithDeadline(ctx, cr.Deadline)
		}
	}
	t, err := cr.Stage.EnterRequest(ctx, stage.Request{Class: cr.Class, Tenant: cr.Tenant, Arrival: now})
	if err != nil {
		if cancel != nil {
			cancel()
		}
		// A refusal is answered now; a request whose client left while
		// it queued is not answered at all: an error.
		o := LatencyError
		if errors.Is(err, sluice.ErrRejected) {
			o = LatencyRejected
		}
		cr.Latency.Request(o, time.Since(now))
		return nil, err
	}
	a := admissionPool.Get().(*admission)
	a.lc.Reset(t)
	a.e, a.q, a.lat, a.early = e, cr.Stage.Quality(), cr.Latency, false
	a.ctx, a.cancel, a.cost, a.hogCancel = nil, cancel, nil, nil
	if e.hog {
		// The stage's hog rule may cancel the request in service: its
		// handler's context ends with a *stage.HogError as the cause.
		var hc context.CancelCauseFunc
		ctx, hc = context.WithCancelCause(ctx)
		a.hogCancel = hc
		t.Watch(hc)
	}
	if cr.Hop != (sluice.Hop{}) {
		a.ctx = sluice.WithHop(ctx, cr.Hop)
	} else if cancel != nil || e.hog {
		a.ctx = ctx
	}
	if e.reported {
		// The handler may report what the request cost (tenants.cost:
		// reported).
		base := a.ctx
		if base == nil {
			base = ctx
		}
		a.ctx, a.cost = sluice.WithCostReport(base)
	}
	return a, nil
}

// Reject writes the rejection answer for r: the configured status
// (reject.status, 503 by default), Retry-After in whole seconds (the
// stage's computed wait, stage.Stage.RetryAfter, bounded to
// [retry_after, retry_after_max], plus a uniform jitter in [0,
// retry_jitter], rounded up),
// Cache-Control: no-store and the body:
// JSON {"error":"overloaded","stage":…,"class":…,"retry_after_s":…}
// when the client's Accept prefers application/json, the configured
// template otherwise, nothing for HEAD. Bodies are rendered once per stage,
// class and Retry-After value. err is the error of Admit; any error gets
// the same answer (a client that went away does not read it).
func (p *Policy) Reject(w http.ResponseWriter, r *http.Request, err error) {
	e, class, cn, wait := p.rejected(r)
	if e.rateLimit {
		writeRateLimit(w.Header(), e, time.Now())
	}
	p.reject.write(w, r, e.idx, e.name, class, cn, wait)
}

// Rejection is what a rejection says, for a caller that answers it in
// another protocol than Reject's HTTP (gRPC: package grpcsluice).
type Rejection struct {
	// Stage and Class name the rejected request's stage and class.
	Stage, Class string
	// RetryAfter is the delay the caller is asked to wait before trying
	// again: the stage's computed wait bounded to [retry_after,
	// retry_after_max] plus a uniform jitter in [0, retry_jitter], drawn
	// as Reject draws it (Reject then rounds it up to whole seconds).
	RetryAfter time.Duration
}

// Rejection returns what the rejection of r says (see Reject).
func (p *Policy) Rejection(r *http.Request) Rejection {
	e, _, cn, wait := p.rejected(r)
	return Rejection{Stage: e.name, Class: cn, RetryAfter: p.reject.retryDelay(wait)}
}

// rejected classifies a rejected request: its stage entry, class index
// and name, and the stage's computed Retry-After wait before bounds and
// jitter (stage.Stage.RetryAfter; 0 without a stage).
func (p *Policy) rejected(r *http.Request) (e *entry, class int, className string, wait time.Duration) {
	e, class, _ = p.classifyHop(r)
	className = DefaultClass
	if class >= 0 && class < len(p.classes) {
		className = p.classes[class]
	}
	if e.st != nil {
		wait = e.st.RetryAfter(time.Now(), class)
	}
	return e, class, className, wait
}

// CountInvalid counts a hop value that was malformed and treated as
// absent, read elsewhere than in the hop headers (the proxy's reading of
// a gRPC call's grpc-timeout), in sluice_hop_invalid_total{header}.
func (p *Policy) CountInvalid(h classify.HopHeader) { p.hops.add(&classify.HopInfo{Invalid: h}) }

// HeaderNames returns the canonical names of the request headers the
// policy reads to classify a request (classify.Classifier.HeaderNames).
func (p *Policy) HeaderNames() []string { return p.cls.HeaderNames() }

// ReadsRequest returns what the policy reads of a request to decide it:
// the canonical names of the headers (HeaderNames), whether it always
// reads the client's connection — its address and its TLS client
// certificate (class rules may; so does a stage whose tenants.key is
// client or client-cert) —, and whether it reads the host (a stage
// matches by host). Package grpcsluice fills in only those when it reads
// a gRPC call as an HTTP request.
func (p *Policy) ReadsRequest() (headers []string, remoteAddr, host bool) {
	remoteAddr = len(p.cfg.Classes.Rules) > 0
	for _, st := range p.cfg.Stages {
		host = host || st.Match.Host != ""
	}
	for _, e := range p.entries {
		remoteAddr = remoteAddr || e.tenantKey.kind == tenantClient || e.tenantKey.kind == tenantClientCert
	}
	return p.HeaderNames(), remoteAddr, host
}

// Is reports whether err is a rejection by admission control (as opposed
// to a client that gave up while queued).
func Is(err error) bool { return errors.Is(err, sluice.ErrRejected) }

var _ sluice.Policy = (*Policy)(nil)

// admission implements sluice.Admission for a stage ticket.
type admission struct {
	lc     stage.Lifecycle
	e      *entry
	lat    *Latency
	early  bool // a stream before its long-lived time: an upgrade or an event stream, not observed
	q      float64
	ctx    context.Context    // the handler's context; nil: the request's
	cancel context.CancelFunc // ends the deadline's context, or nil
	cost   func() time.Duration
	// hogCancel ends the context a stage's hog rule cancels, or is nil.
	hogCancel context.CancelCauseFunc
}

var admissionPool = sync.Pool{New: func() any { return new(admission) }}

var (
	_ sluice.Admission       = (*admission)(nil)
	_ sluice.ResponseHeaders = (*admission)(nil)
	_ sluice.StreamDeadline  = (*admission)(nil)
	_ sluice.RequestContext  = (*admission)(nil)
)

// Context returns the handler's context: the request's with the
// deadline of its timeout header and what travels on to the next hop, or
// nil when there is neither.
func (a *admission) Context() context.Context { return a.ctx }

// Quality returns the stage's quality level at admission.
func (a *admission) Quality() float64 { return a.q }

// StreamDeadline returns admission time + the stage's long_lived.
func (a *admission) StreamDeadline() time.Time { return a.lc.Ticket().Start().Add(a.e.longLived) }

// Stream releases the request's concurrency slot and makes it a
// non-sample. Later calls have no effect.
func (a *admission) Stream() {
	now := time.Now()
	if a.lc.Stream(now) && now.Before(a.StreamDeadline()) {
		a.early = true
	}
}

// Done records the request's end and recycles the admission. The
// latency histograms take the request and its wait for admission unless
// it became a stream before the stage's long_lived (an upgrade or an
// event stream, whose length says nothing of latency) or its outcome is
// sluice.Ignore.
func (a *admission) Done(oc sluice.Outcome) {
	now := time.Now()
	o := stage.OutcomeOf(oc)
	if a.cost != nil {
		o.Cost = a.cost()
	}
	if !a.lc.Done(now, o) {
		return
	}
	if !a.early && oc != sluice.Ignore {
		t := a.lc.Ticket()
		o := LatencyOK
		if oc == sluice.Failure {
			o = LatencyError
		}
		a.lat.QueueWait(t.Start().Sub(t.Arrival()))
		a.lat.Request(o, now.Sub(t.Arrival()))
	}
	if a.cancel != nil {
		a.cancel()
	}
	if a.hogCancel != nil {
		a.hogCancel(nil)
	}
	a.lc.Reset(stage.Ticket{})
	a.e, a.lat, a.ctx, a.cancel, a.cost, a.hogCancel = nil, nil, nil, nil, nil, nil
	admissionPool.Put(a)
}
