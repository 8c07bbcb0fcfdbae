// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/retry"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/policy"
)

// graph and graph-crowd run the chain of package figure (graph.go) in
// virtual time: a client population → tier 1 → tier 2 → a FIFO backend,
// with the product's objects at every sluice hop — a stage.Stage from
// the same policy the live hops load, driven by sim.Stage (deadlines and
// priorities included), and client.Dest/client.Call for the client side
// (the in-process row's clients and tiers, the proxies' upstream) — and
// package retry's Dest/Call for the lab's policies (naive, budget,
// grpc-throttle), the very objects the live tiers drive. Every attempt
// is a sim.Request: its Deadline is what travels (X-Sluice-Timeout), a
// caller that gives up cancels it (Request.Cancel, as a client closing
// its connection), a stage's queue lets it go, a naive tier stops
// retrying for it, and the backend does its work anyway. Hops take no
// time and have no capacity of their own; the backend is the only
// bottleneck.

func graphChain(crowd bool) func(ps *Params) RunFunc {
	return func(ps *Params) RunFunc {
		var c figure.GraphParams
		figure.DeclareGraph(ps, &c, crowd)
		declareTransport(ps, &c)
		return func(env Env) (*figure.Result, error) { return runGraph(env, c) }
	}
}

// graphRecover is graph-recover (figure/graph_recover.go).
func graphRecover(ps *Params) RunFunc {
	var c figure.GraphParams
	figure.DeclareGraphRecover(ps, &c)
	declareTransport(ps, &c)
	return func(env Env) (*figure.Result, error) { return runGraph(env, c) }
}

func runGraph(env Env, c figure.GraphParams) (*figure.Result, error) {
	if err := checkTransport(&c); err != nil {
		return nil, err
	}
	res := newResult(env)
	var runs []*figure.GraphRun
	for _, row := range c.Rows {
		run, err := runGraphRow(env.Seed, c, row)
		if err != nil {
			return nil, fmt.Errorf("row %s: %w", row, err)
		}
		runs = append(runs, run)
	}
	if err := figure.GraphResult(res, c, runs); err != nil {
		return nil, err
	}
	res.Setup = graphSetup(c)
	return res, nil
}

// graphSetup describes a run of the chain in a few sentences.
func graphSetup(c figure.GraphParams) []string {
	s := []string{fmt.Sprintf("Backend: %d FIFO workers, service %v (C = %.0f req/s); the work of a request is done even if its caller left. Clients: %s arrivals, deadline %v; %d attempts at every hop.",
		c.Workers, c.Service, c.Capacity(), c.Arrivals, c.Deadline, c.Attempts)}
	switch {
	case c.Recover:
		s = append(s, fmt.Sprintf("Load %.2f × C; from %v for %v a crowd at %g × C; capacity ÷ %g from %v for %v; measured %v after.",
			c.Load, c.Warm, c.CrowdLen, c.CrowdLoad, c.TriggerFactor, c.DropStart(), c.TriggerLen, c.After))
	case c.Crowd:
		s = append(s, fmt.Sprintf("Load %.0f req/s: high %.0f %%, low the rest; from %v for %v the low class ×%g.", c.Load*c.Capacity(), 100*c.HighShare, c.Warm, c.CrowdLen, c.CrowdX))
	default:
		s = append(s, fmt.Sprintf("Load %.2f × C; trigger: capacity ÷ %g from %v for %v; measured %v after.", c.Load, c.TriggerFactor, c.Warm, c.TriggerLen, c.After))
	}
	if c.Transport == "grpc" {
		s = append(s, "Over gRPC: the in-process row's client side judges each answer as grpcsluice.Judge does its status (a stage's refusal RESOURCE_EXHAUSTED with a RetryInfo of 1 s, a tier's throttled call RESOURCE_EXHAUSTED without one, a timeout DEADLINE_EXCEEDED, a caller gone CANCELLED).")
	}
	s = append(s, fmt.Sprintf("Lab policies: attempt timeouts client %v, tier 1 %v, tier 2 %v, back-off %v; budget %g of calls + %g/s over %v; grpc-throttle maxTokens %g, tokenRatio %g. Sluice hops: auto, SLO %v.",
		c.ClientTimeout, c.Tier1Timeout, c.Tier2Timeout, c.Backoff, c.BudgetRatio, c.BudgetMinPerSecond, c.BudgetWindow, c.MaxTokens, c.TokenRatio, c.SLO))
	return s
}

// chainSim is one row's chain on one engine.
type chainSim struct {
	e      *sim.Engine
	c      figure.GraphParams
	row    string
	run    *figure.GraphRun
	rng    *rand.Rand // the client sides' and policies' draws
	svc    dist.Dist
	svcRng *rand.Rand
	scale  float64
	fifo   *sim.FIFO
	// probes are the sluice elements whose state is sampled.
	probes []hopProbe
}

// attemptData is what an attempt carries besides the sim.Request: its
// user's deadline (the lab's own header, for the backend's records) and
// the status a hop answered it with.
type attemptData struct {
	userDeadline time.Duration
	status       int
	retryAfter   time.Duration
	// throttled: the answer is a client side's refusal relayed by a tier
	// (over gRPC, RESOURCE_EXHAUSTED without a RetryInfo).
	throttled bool
}

// answer returns how an attempt was answered: the status a hop set, or
// the backend's 200, or a sluice stage's rejection (503, Retry-After 1s).
func answer(r *sim.Request) (int, time.Duration) {
	d := r.Data.(*attemptData)
	if d.status != 0 {
		return d.status, d.retryAfter
	}
	if r.Outcome == sim.Completed {
		return http.StatusOK, 0
	}
	return http.StatusServiceUnavailable, time.Second
}

// respond finishes r with status (and Retry-After; throttled: a client
// side's refusal): Completed for a success, a failure otherwise (the
// stage in front, if any, counts a 5xx as one, as the middleware and the
// proxy do).
func (ch *chainSim) respond(r *sim.Request, status int, retryAfter time.Duration, throttled bool) {
	d := r.Data.(*attemptData)
	d.status, d.retryAfter, d.throttled = status, retryAfter, throttled
	o := sim.Completed
	if status >= 500 {
		o = sim.Rejected
	}
	r.Finish(ch.e.Now(), o)
}

func (ch *chainSim) at(d time.Duration) time.Time { return ch.e.Base().Add(d) }

// decider is a caller's decisions about one call: package retry's for
// the lab's rows, package client's for sluice's client side.
type decider interface {
	begin(now, deadline time.Time, rng *rand.Rand) client.Verdict
	done(now time.Time, r client.Result, rng *rand.Rand) (client.Stop, time.Duration)
	abandon(now time.Time)
}

type labPolicy struct {
	d *retry.Dest
	c retry.Call
}

func (p *labPolicy) begin(now, _ time.Time, rng *rand.Rand) client.Verdict {
	return p.c.Begin(p.d, now, rng)
}
func (p *labPolicy) done(now time.Time, r client.Result, rng *rand.Rand) (client.Stop, time.Duration) {
	return p.c.Done(now, r, rng)
}
func (p *labPolicy) abandon(now time.Time) { p.c.Abandon(now) }

type sluicePolicy struct {
	d *client.Dest
	c client.Call
}

func (p *sluicePolicy) begin(now, deadline time.Time, rng *rand.Rand) client.Verdict {
	return p.c.Begin(p.d, now, true, deadline, rng)
}
func (p *sluicePolicy) done(now time.Time, r client.Result, rng *rand.Rand) (client.Stop, time.Duration) {
	return p.c.Done(now, r, rng)
}
func (p *sluicePolicy) abandon(now time.Time) {
	p.c.Done(now, client.Result{Outcome: sluice.Ignore}, nil)
}

// caller is one hop's side of its calls to the next: a destination's
// state and how each call's attempts are bounded.
type caller struct {
	ch   *chainSim
	next sim.Handler
	// newPolicy starts a call's decisions on the destination's state.
	newPolicy func() decider
	// perTry bounds each attempt (0: none).
	perTry time.Duration
	// carry: attempts carry the call's deadline (sluice's client side).
	carry bool
	// grpc: the client side judges answers as grpcsluice does.
	grpc bool
}

func (ch *chainSim) labCaller(next sim.Handler, perTry time.Duration) (*caller, error) {
	d, err := retry.NewDest(ch.c.Retry(ch.row, perTry))
	if err != nil {
		return nil, err
	}
	return &caller{ch: ch, next: next, perTry: perTry,
		newPolicy: func() decider { return &labPolicy{d: d} }}, nil
}

// sluiceCaller returns sluice's client side toward next; name names the
// destination in the sampled state.
func (ch *chainSim) sluiceCaller(name string, next sim.Handler, cfg client.Config) (*caller, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := client.NewDest(&cfg)
	ch.probeDest(name, d)
	return &caller{ch: ch, next: next, carry: true, perTry: cfg.Retry.PerTryTimeout, grpc: ch.c.Transport == "grpc",
		newPolicy: func() decider { return &sluicePolicy{d: d} }}, nil
}

// call is one call in progress: its attempts, one at a time.
type call struct {
	cl       *caller
	pol      decider
	class    int
	deadline time.Duration // the caller's context's deadline (0: none)
	userDL   time.Duration
	cur      *sim.Request // the attempt in flight
	timer    sim.Timer    // its end: the per-try timeout or the deadline
	wait     sim.Timer    // the back-off before a retry
	last     int          // the last answer's status (0: none)
	lastRA   time.Duration
	lastThr  bool // the last answer was a client side's refusal, relayed
	over     bool
	// end reports the call's end: the last answer's status and
	// Retry-After (0: no answer), and whether a client side refused it
	// (client.ErrThrottled), this one or one further down whose refusal
	// the last answer relays.
	end func(status int, retryAfter time.Duration, throttled bool)
}

// start begins a call for a request of class with the caller's context
// deadline (0: none) and its user's deadline.
func (cl *caller) start(class int, deadline, userDL time.Duration, end func(int, time.Duration, bool)) *call {
	k := &call{cl: cl, pol: cl.newPolicy(), class: class, deadline: deadline, userDL: userDL, end: end}
	e := cl.ch.e
	var dl time.Time
	if deadline > 0 {
		dl = cl.ch.at(deadline)
	}
	switch k.pol.begin(e.Time(), dl, cl.ch.rng) {
	case client.Throttled:
		k.finish(0, 0, true)
	case client.Late:
		k.finish(0, 0, false)
	default:
		if deadline > 0 && cl.perTry == 0 {
			// The context's deadline ends the call, also while it waits
			// for a retry (the last answer stands then).
			k.wait = e.Schedule(deadline, k.expire)
		}
		k.send()
	}
	return k
}

func (k *call) finish(status int, ra time.Duration, throttled bool) {
	if k.over {
		return
	}
	k.over = true
	k.timer.Stop()
	k.wait.Stop()
	k.end(status, ra, throttled)
}

// send sends the next attempt.
func (k *call) send() {
	e := k.cl.ch.e
	r := &sim.Request{ID: e.NextID(), Class: k.class, Sent: e.Now(), User: -1,
		Data: &attemptData{userDeadline: k.userDL}}
	if k.cl.carry {
		r.Deadline = k.deadline
	}
	r.OnFinish = k.answered
	k.cur = r
	if end := k.attemptEnd(); end > 0 {
		k.timer = e.Schedule(end, k.timeout)
	}
	k.cl.next.Handle(r)
}

// attemptEnd is when the attempt in flight ends without an answer: its
// per-try timeout, or the context's deadline (0: never).
func (k *call) attemptEnd() time.Duration {
	end := k.deadline
	if pt := k.cl.perTry; pt > 0 {
		if t := k.cl.ch.e.Now() + pt; end == 0 || t < end {
			return t
		}
	}
	return end
}

// answered takes the attempt's answer.
func (k *call) answered(r *sim.Request) {
	if r != k.cur || k.over {
		return
	}
	k.cur = nil
	k.timer.Stop()
	st, ra := answer(r)
	thr := r.Data.(*attemptData).throttled
	res := client.Result{Status: st, RetryAfter: ra, HasRetryAfter: ra > 0}
	if k.cl.grpc {
		res = grpcResult(st, ra, thr)
	}
	k.lastThr = thr
	k.decide(res)
}

// timeout ends the attempt in flight: at its per-try timeout the call
// decides as after a failure; at the context's deadline it ends.
func (k *call) timeout() {
	r := k.cur
	if r == nil || k.over {
		return
	}
	k.cur = nil
	e := k.cl.ch.e
	if k.deadline > 0 && e.Now() >= k.deadline {
		k.pol.abandon(e.Time())
		r.Cancel()
		k.finish(0, 0, false)
		return
	}
	r.Cancel()
	res := client.Result{}
	k.lastThr = false
	if k.cl.grpc {
		res = grpcResult(http.StatusGatewayTimeout, 0, false)
	}
	k.decide(res)
}

// expire is the context's deadline while no attempt is in flight.
func (k *call) expire() {
	if k.cur != nil {
		k.timeout()
		return
	}
	k.finish(k.last, k.lastRA, k.lastThr)
}

func (k *call) decide(res client.Result) {
	e := k.cl.ch.e
	k.last, k.lastRA = res.Status, res.RetryAfter
	stop, wait := k.pol.done(e.Time(), res, k.cl.ch.rng)
	if stop != client.StopRetry {
		k.finish(res.Status, res.RetryAfter, k.lastThr)
		return
	}
	if wait <= 0 {
		k.send()
		return
	}
	k.timer = e.After(wait, k.send)
}

// cancel: the caller's own caller left; the attempt in flight is
// abandoned.
func (k *call) cancel() {
	if k.over {
		return
	}
	k.over = true
	k.timer.Stop()
	k.wait.Stop()
	if r := k.cur; r != nil {
		k.cur = nil
		k.pol.abandon(k.cl.ch.e.Time())
		r.Cancel()
	}
}

// tier is a hop that serves each request by one call to the next hop.
type tier struct {
	cl *caller
	// carry: the request's deadline is the call's (sluice hops); without
	// it the call has no deadline (naive services).
	carry bool
}

// Handle serves r: one call to the next hop, whose answer it relays; a
// call that ended without an answer is 504, one the client side refused
// 503 (ErrThrottled is a rejection).
func (t *tier) Handle(r *sim.Request) {
	ch := t.cl.ch
	var dl time.Duration
	if t.carry {
		dl = r.Deadline
	}
	d := r.Data.(*attemptData)
	k := t.cl.start(r.Class, dl, d.userDeadline, func(st int, ra time.Duration, throttled bool) {
		switch {
		case throttled:
			ch.respond(r, http.StatusServiceUnavailable, time.Second, true)
		case st == 0:
			ch.respond(r, http.StatusGatewayTimeout, 0, false)
		default:
			ch.respond(r, st, ra, false)
		}
	})
	if !r.Done() {
		r.OnCancel(func(r *sim.Request) {
			k.cancel()
			ch.respond(r, http.StatusBadGateway, 0, false)
		})
	}
}

// backend is the FIFO backend: every call's work is done, and recorded.
type backend struct{ ch *chainSim }

func (b backend) Handle(r *sim.Request) {
	ch := b.ch
	d := r.Data.(*attemptData)
	i := len(ch.run.Calls)
	work := ch.svc.Sample(ch.svcRng) * ch.scale
	ch.run.Calls = append(ch.run.Calls, figure.GraphCall{Arrival: ch.e.Now(), Demand: work, UserDeadline: d.userDeadline})
	ch.fifo.Submit(&sim.Job{Req: r, Work: work, Done: func(j *sim.Job) {
		k := &ch.run.Calls[i]
		k.Finish, k.Gone = ch.e.Now(), r.Canceled()
		r.Finish(ch.e.Now(), sim.Completed)
	}})
}

// sluiceStage returns a sluice hop's stage in front of next: the
// policy's stage (figure.GraphParams.Policy), driven by sim.Stage.
func (ch *chainSim) sluiceStage(name string, next sim.Handler) (sim.Handler, error) {
	cfg, err := ch.c.Policy()
	if err != nil {
		return nil, err
	}
	p, err := policy.New(cfg, policy.Options{Now: ch.e.Time(), Rand: ch.e.Stream(name)})
	if err != nil {
		return nil, err
	}
	st := p.Stage(figure.GraphStage)
	ch.probeStage(name, st)
	return sim.NewStage(ch.e, st, next, nil)
}

// proxyUpstream is the client side of `sluice proxy` with its defaults:
// no throttle, one attempt.
func proxyUpstream() client.Config {
	off := false
	return client.Config{Throttle: client.ThrottleConfig{Enabled: &off}, Retry: client.RetryConfig{MaxAttempts: 1}}
}

// build wires the row's chain and returns the clients' caller for each
// class.
func (ch *chainSim) build() ([]*caller, error) {
	c, row := ch.c, ch.row
	var next sim.Handler = backend{ch: ch}
	// hop returns a tier in front of next: name is the tier's, front the
	// proxy's in front of next (proxy row).
	hop := func(name, front, to string, perTry time.Duration, next sim.Handler) (sim.Handler, error) {
		switch {
		case figure.InProcessRow(row):
			cl, err := ch.sluiceCaller(name+"→"+to, next, c.SluiceClientOf(row))
			if err != nil {
				return nil, err
			}
			if !c.Admission {
				return &tier{cl: cl, carry: true}, nil
			}
			return ch.sluiceStage(name, &tier{cl: cl, carry: true})
		case row == figure.GraphProxy:
			// A proxy in front of the next hop, then this naive tier.
			up, err := ch.sluiceCaller(front+"→"+to, next, proxyUpstream())
			if err != nil {
				return nil, err
			}
			px, err := ch.sluiceStage(front, &tier{cl: up, carry: true})
			if err != nil {
				return nil, err
			}
			cl, err := ch.labCaller(px, perTry)
			if err != nil {
				return nil, err
			}
			return &tier{cl: cl}, nil
		}
		cl, err := ch.labCaller(next, perTry)
		if err != nil {
			return nil, err
		}
		return &tier{cl: cl}, nil
	}
	var err error
	if next, err = hop("tier2", "backend-proxy", "backend", c.Tier2Timeout, next); err != nil {
		return nil, err
	}
	if next, err = hop("tier1", "tier2-proxy", "tier2", c.Tier1Timeout, next); err != nil {
		return nil, err
	}
	if row == figure.GraphProxy {
		// The proxy in front of tier 1.
		up, err := ch.sluiceCaller("tier1-proxy→tier1", next, proxyUpstream())
		if err != nil {
			return nil, err
		}
		if next, err = ch.sluiceStage("tier1-proxy", &tier{cl: up, carry: true}); err != nil {
			return nil, err
		}
	}
	var out []*caller
	for _, class := range c.Classes() {
		var cl *caller
		if figure.InProcessRow(row) {
			cl, err = ch.sluiceCaller("clients("+class+")→tier1", next, c.SluiceClientOf(row))
		} else {
			cl, err = ch.labCaller(next, c.ClientTimeout)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

func runGraphRow(seed uint64, c figure.GraphParams, row string) (*figure.GraphRun, error) {
	e := sim.New(seed)
	fifo, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: c.Workers})
	if err != nil {
		return nil, err
	}
	ch := &chainSim{e: e, c: c, row: row, run: &figure.GraphRun{Row: row}, rng: e.Stream("client-side"),
		svc: c.Service, svcRng: e.Stream("service"), scale: 1, fifo: fifo}
	callers, err := ch.build()
	if err != nil {
		return nil, err
	}
	if from, to, ok := c.TriggerSpan(); ok {
		e.Schedule(from, func() { ch.scale = c.TriggerFactor })
		e.Schedule(to, func() { ch.scale = 1 })
	}
	if _, err := e.Every(stateEvery, ch.sample); err != nil {
		return nil, err
	}
	end := c.End()
	for cl, caller := range callers {
		arr, err := c.ArrivalsOf(cl)
		if err != nil {
			return nil, err
		}
		rng := e.Stream(fmt.Sprintf("users-%d", cl))
		var last time.Duration
		var fire func()
		fire = func() {
			ch.user(caller, cl)
			next := arr.Next(rng, last)
			if next == dist.Never || next >= end {
				return
			}
			last = next
			e.Schedule(next, fire)
		}
		if first := arr.Next(rng, 0); first != dist.Never && first < end {
			last = first
			e.Schedule(first, fire)
		}
	}
	e.Run(end + c.Deadline + time.Second)
	return ch.run, nil
}

// user sends one user request of class cl through its population's
// caller: its deadline is the client's context's; the user gives up then.
func (ch *chainSim) user(cl *caller, class int) {
	e := ch.e
	i := len(ch.run.Users)
	sent := e.Now()
	dl := sent + ch.c.Deadline
	ch.run.Users = append(ch.run.Users, figure.GraphUser{Class: class, Sent: sent})
	done := false
	k := cl.start(class, dl, dl, func(st int, _ time.Duration, _ bool) {
		if done {
			return
		}
		done = true
		u := &ch.run.Users[i]
		u.Done, u.Status = e.Now(), st
	})
	if !done {
		e.Schedule(dl, func() {
			if done {
				return
			}
			k.cancel()
			done = true
			u := &ch.run.Users[i]
			u.Done, u.Status = e.Now(), 0
		})
	}
}
