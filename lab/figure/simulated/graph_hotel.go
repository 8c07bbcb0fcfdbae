// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/lab/tune"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/stage"
)

// graph-hotel in virtual time (the spec: figure/hotel.go). Every
// instance of every service is a FIFO of its Workers servers in hold
// mode: a call waits for a worker, holds it for its work (the step's
// work times the scenario's factor when it arrived), then the handler
// makes its calls one after the other and answers. Neither the wait nor
// the work watches the call's caller (the work of a call whose caller
// left is done all the same, recorded as Gone); a handler whose call has
// ended (its caller left, or its deadline passed) makes no calls. Every
// call carries its user's deadline, as grpc-timeout carries it live.
//
// What admits the calls is the row's, with the very objects the live
// services run:
//
//   - sluice: at every instance the policy's stage.Stage (figure's
//     PolicyConfig, classified by policy.ClassifyRequest from the
//     metadata the call carries, as grpcsluice reads it) driven by
//     sim.Stage, and at every caller sluice's client side
//     (client.Dest/client.Call, its defaults), whose answers are judged
//     as grpcsluice.Judge judges gRPC statuses;
//   - a research peer: its Server at every instance (fed by a
//     peers.QueueMeter over the instance's worker queue, the papers'
//     signal), its Client at every caller toward every instance
//     (UserClients client sides per class for the end users), each
//     stepped every Period;
//   - none: nothing.
//
// The callers spread their calls over a service's instances round
// robin.

func graphHotel(ps *Params) RunFunc {
	var c figure.HotelParams
	figure.DeclareHotel(ps, &c)
	return func(env Env) (*figure.Result, error) { return runHotel(env, c) }
}

func runHotel(env Env, c figure.HotelParams) (*figure.Result, error) {
	g, err := c.Graph()
	if err != nil {
		return nil, paramErrorf("%v", err)
	}
	res := newResult(env)
	var runs []*figure.HotelRun
	for _, scn := range c.Scenarios {
		for _, row := range c.Rows {
			run, err := RunHotel(env.Seed, c, g, scn, row, nil)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", scn, row, err)
			}
			runs = append(runs, run)
		}
	}
	if err := figure.HotelResult(res, c, g, runs); err != nil {
		return nil, err
	}
	res.Setup = hotelSetup(c, g)
	return res, nil
}

func hotelSetup(c figure.HotelParams, g *figure.HotelGraph) []string {
	var svcs []string
	for _, s := range g.Services {
		svcs = append(svcs, fmt.Sprintf("%s ×%d", s.Name, s.Instances))
	}
	if len(svcs) > 8 {
		svcs = append(svcs[:8], fmt.Sprintf("… (%d services, %d instances)", len(g.Services), g.Instances()))
	}
	return []string{
		fmt.Sprintf("Graph %s: %s; one worker an instance, a FIFO worker queue of %d; C = %.1f requests/s at the high class's mix.",
			g.Name, strings.Join(svcs, ", "), c.QueueLimit, c.Capacity(g)),
		fmt.Sprintf("Load %.2f × C of evenly spaced requests per API, deadline %v, SLO %v; scenarios %s.",
			c.Load, c.Deadline, c.SLO, strings.Join(c.Scenarios, ", ")),
		"Rows: none; each research peer at every service and caller (peer_params=" + c.PeerParams + "); sluice: the policy's stage at every instance (auto told only the SLO) and sluice's client side at every caller.",
	}
}

// RunHotel runs one row of one scenario and returns its records. point,
// when not nil, is a peer's point (the search's); otherwise the row
// runs c.PeerPoint.
func RunHotel(seed uint64, c figure.HotelParams, g *figure.HotelGraph, scn, row string, point tune.Point) (*figure.HotelRun, error) {
	s, streams, err := c.ScenarioStreams(g, scn)
	if err != nil {
		return nil, err
	}
	e := sim.New(seed)
	h := &hotel{e: e, c: c, g: g, s: s, row: row, rng: e.Stream("client-side"),
		run:  &figure.HotelRun{Scenario: scn, Row: row, Params: c.HotelRowParams(scn, row)},
		pend: make(map[*peers.Call]*hcall)}
	if point != nil {
		h.run.Params = point.String()
	}
	if err := h.build(point); err != nil {
		return nil, err
	}
	for _, st := range streams {
		h.stream(st)
	}
	e.Run(s.Stop + c.Deadline + time.Second)
	return h.run, nil
}

// hotel is one row's graph on one engine.
type hotel struct {
	e   *sim.Engine
	c   figure.HotelParams
	g   *figure.HotelGraph
	s   figure.HotelScenario
	row string
	run *figure.HotelRun
	rng *rand.Rand

	insts [][]*hinst // per service
	users [][]*hside // per class: the end users' client sides
	// sluice
	ccfg *client.Config
	pcfg policy.Config
	// peers
	peer    peers.Peer
	pend    map[*peers.Call]*hcall
	clients []peers.Client
	nextID  uint64
	entryRR int
}

func (h *hotel) id() uint64 { h.nextID++; return h.nextID }

func (h *hotel) at(d time.Duration) time.Time { return h.e.Base().Add(d) }

// hinst is one instance of a service.
type hinst struct {
	h        *hotel
	svc, idx int
	name     string
	fifo     *sim.FIFO
	meter    peers.QueueMeter
	srv      peers.Server
	pol      *policy.Policy
	stages   map[*stage.Stage]*sim.Stage
	reqs     map[[3]int]*http.Request // (api, class, service) → the call as the policy reads it
	out      map[int]*hcallee         // per callee service: the client sides
	lastBusy float64
}

// hcallee is a caller's client sides toward one service: one for all its
// instances (sluice's, per gRPC target), or one per instance (the peers',
// per connection), and the next instance round robin.
type hcallee struct {
	sides []*hside
	next  int
}

// hreq is what a call carries besides its sim.Request.
type hreq struct {
	api, user, class int
	userID           string
	step             *figure.HotelStep
	meta             peers.Metadata // the peer's metadata it arrived with
	fwd              peers.Metadata // what the service forwards (Admission.Forward)
	pc               *peers.Call    // the server side's view
	code             figure.HotelCode
	pushback         time.Duration // a refusal's RetryInfo (−1: none)
	reply            peers.Metadata
}

// build creates the instances and the client sides.
func (h *hotel) build(point tune.Point) error {
	switch h.row {
	case figure.HotelNone:
	case figure.HotelSluice:
		pc, err := h.c.PolicyConfig()
		if err != nil {
			return err
		}
		cc := client.DefaultConfig()
		cc.SetDefaults()
		if err := cc.Validate(); err != nil {
			return err
		}
		h.pcfg, h.ccfg = pc, &cc
	default:
		p := point
		if p == nil {
			p, _ = h.c.PeerPoint(h.s.Name, h.row)
		}
		cfg, err := figure.HotelPeerConfig(h.row, h.g, p)
		if err != nil {
			return err
		}
		if h.peer, err = testbed.NewHotelPeer(h.row, cfg); err != nil {
			return err
		}
	}
	for s, sv := range h.g.Services {
		var row []*hinst
		for i := range sv.Instances {
			in, err := h.newInstance(s, i)
			if err != nil {
				return fmt.Errorf("%s#%d: %w", sv.Name, i, err)
			}
			row = append(row, in)
		}
		h.insts = append(h.insts, row)
	}
	entry := h.g.Entry
	for range figure.HotelClasses {
		n := 1
		if h.peer != nil {
			n = h.c.UserClients
		}
		var sides []*hside
		for range n {
			sd, err := h.newSide(nil, entry)
			if err != nil {
				return err
			}
			sides = append(sides, sd)
		}
		h.users = append(h.users, sides)
	}
	return nil
}

func (h *hotel) newInstance(s, i int) (*hinst, error) {
	name := h.g.Services[s].Name
	if h.g.Services[s].Instances > 1 {
		name = fmt.Sprintf("%s#%d", name, i)
	}
	fifo, err := sim.NewFIFO(h.e, sim.FIFOConfig{Servers: h.g.Services[s].Workers, QueueLimit: h.c.QueueLimit})
	if err != nil {
		return nil, err
	}
	in := &hinst{h: h, svc: s, idx: i, name: name, fifo: fifo, out: make(map[int]*hcallee)}
	switch {
	case h.row == figure.HotelSluice:
		p, err := policy.New(h.pcfg, policy.Options{Now: h.e.Time(), Rand: h.e.Stream("policy-" + name)})
		if err != nil {
			return nil, err
		}
		in.pol, in.stages, in.reqs = p, make(map[*stage.Stage]*sim.Stage), make(map[[3]int]*http.Request)
		for _, st := range p.Stages() {
			ss, err := sim.NewStage(h.e, st, sim.HandlerFunc(in.serve), nil)
			if err != nil {
				return nil, err
			}
			ss.OnReject = func(r *sim.Request, err error) {
				// grpcsluice's answers: DEADLINE_EXCEEDED for a deadline,
				// RESOURCE_EXHAUSTED with a RetryInfo otherwise.
				d := r.Data.(*hreq)
				if errors.Is(err, stage.ErrDeadline) {
					d.code = figure.HotelTimeout
					return
				}
				d.code, d.pushback = figure.HotelRejected, hotelPushback
			}
			in.stages[st] = ss
		}
	case h.peer != nil:
		srv, err := h.peer.Server(h.g.Services[s].Name, s == h.g.Entry)
		if err != nil {
			return nil, err
		}
		if in.srv = srv; srv != nil {
			if err := h.tickServer(in); err != nil {
				return nil, err
			}
		}
	}
	return in, nil
}

// callee returns in's client sides toward service s.
func (in *hinst) callee(s int) (*hcallee, error) {
	if ce := in.out[s]; ce != nil {
		return ce, nil
	}
	ce := &hcallee{}
	n := 1
	if in.h.peer != nil {
		n = in.h.g.Services[s].Instances
	}
	for range n {
		sd, err := in.h.newSide(in, s)
		if err != nil {
			return nil, err
		}
		ce.sides = append(ce.sides, sd)
	}
	in.out[s] = ce
	return ce, nil
}

// pick returns the client side and the instance of the next call.
func (ce *hcallee) pick(h *hotel, s int) (*hside, *hinst) {
	insts := h.insts[s]
	i := ce.next % len(insts)
	ce.next++
	if len(ce.sides) == 1 {
		return ce.sides[0], insts[i]
	}
	return ce.sides[i], insts[i]
}

// tickServer schedules a server side's periodic update on its queue's
// signal.
func (h *hotel) tickServer(in *hinst) error {
	_, err := h.e.Every(in.srv.Period(), func() {
		now := h.e.Time()
		in.srv.Update(now, in.meter.Read(now))
	})
	return err
}

// addClient schedules a client side's periodic update, once per client
// (TopFull's entry is one for every end user); a load observer is told
// the services' utilization before each.
func (h *hotel) addClient(cl peers.Client) error {
	for _, x := range h.clients {
		if x == cl {
			return nil
		}
	}
	h.clients = append(h.clients, cl)
	obs, _ := cl.(peers.LoadObserver)
	lastAt := h.e.Now()
	_, err := h.e.Every(cl.Period(), func() {
		now := h.e.Time()
		if obs != nil {
			h.observe(obs, now, (h.e.Now() - lastAt).Seconds())
			lastAt = h.e.Now()
		}
		h.dispatch(cl.Update(now))
	})
	return err
}

// observe tells a load observer (TopFull) every service's utilization
// since its last update: its instances' mean busy fraction.
func (h *hotel) observe(obs peers.LoadObserver, now time.Time, el float64) {
	if el <= 0 {
		return
	}
	for s, row := range h.insts {
		u := 0.0
		for _, in := range row {
			b := in.fifo.Busy()
			u += (b - in.lastBusy) / el
			in.lastBusy = b
		}
		obs.ObserveLoad(now, h.g.Services[s].Name, u/float64(len(row)))
	}
}

// stream schedules one stream's user requests.
func (h *hotel) stream(st figure.HotelStream) {
	arr := dist.Constant{Rate: st.Rate}
	rng := h.e.Stream(fmt.Sprintf("users-%d", st.API))
	end := h.s.Stop
	var last time.Duration
	var fire func()
	fire = func() {
		h.user(st.API, st.Class, rng)
		next := arr.Next(rng, last)
		if next == dist.Never || next >= end {
			return
		}
		last = next
		h.e.Schedule(next, fire)
	}
	if first := arr.Next(rng, 0); first != dist.Never && first < end {
		last = first
		h.e.Schedule(first, fire)
	}
}

// user sends one user request and records how it ends.
func (h *hotel) user(api, class int, rng *rand.Rand) {
	i := len(h.run.Users)
	sent := h.e.Now()
	h.run.Users = append(h.run.Users, figure.HotelUser{API: api, Class: class, Sent: sent})
	u := rng.IntN(h.c.Users)
	sides := h.users[class]
	k := &hcall{h: h, side: sides[u%len(sides)], to: h.insts[h.g.Entry], api: api, user: i, class: class,
		step: &h.g.APIs[api].Root, deadline: sent + h.c.Deadline, userID: fmt.Sprintf("%s-%d", figure.HotelClasses[class], u)}
	k.end = func(code figure.HotelCode, _ time.Duration) {
		rec := &h.run.Users[i]
		rec.Done, rec.Code = h.e.Now(), code
	}
	k.start()
}

// httpReq returns the call (api, class) at in as the policy reads it: a
// POST of the method, its class in x-sluice-class, its priority and its
// API as tenant in the hop headers, from 127.0.0.1 (a trusted hop).
func (in *hinst) httpReq(api, class int) *http.Request {
	key := [3]int{api, class, in.svc}
	if r := in.reqs[key]; r != nil {
		return r
	}
	prio, tenant, _ := in.pol.HopHeaders()
	cl := figure.HotelClasses[class]
	r := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: in.h.g.Method(api, in.svc)}, Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: http.Header{figure.GraphClassHeader: {cl}, prio: {cl}, tenant: {in.h.g.APIs[api].Name},
			"Content-Type": {"application/grpc"}}, RemoteAddr: "127.0.0.1:1"}
	r.Host = in.name
	in.reqs[key] = r
	return r
}

// arrive takes a call at the instance: the row's admission, then serve.
func (in *hinst) arrive(r *sim.Request) {
	d := r.Data.(*hreq)
	switch {
	case in.pol != nil:
		cr := in.pol.ClassifyRequest(in.httpReq(d.api, d.class), in.h.e.Time())
		r.Class, r.Tenant = cr.Class, cr.Tenant
		in.stages[cr.Stage].Handle(r)
	case in.srv != nil:
		now := in.h.e.Time()
		d.pc = &peers.Call{ID: r.ID, Method: in.h.g.Method(d.api, in.svc), User: d.userID, Meta: d.meta, Deadline: in.h.at(r.Deadline)}
		a := in.srv.Admit(now, d.pc)
		if !a.Admit {
			d.code, d.reply = figure.HotelRejected, a.Reply
			r.Finish(in.h.e.Now(), sim.Rejected)
			return
		}
		d.fwd = a.Forward
		srv := in.srv
		r.Defer(func(r *sim.Request) {
			o := peers.OK
			switch d.code {
			case figure.HotelRejected:
				o = peers.Rejected
			case figure.HotelTimeout:
				o = peers.Canceled
			case figure.HotelFailed:
				o = peers.Failed
			}
			d.reply = srv.Done(in.h.e.Time(), d.pc, o)
		})
		in.serve(r)
	default:
		in.serve(r)
	}
}

// serve is the handler: the worker queue, the work, the calls.
func (in *hinst) serve(r *sim.Request) {
	h := in.h
	d := r.Data.(*hreq)
	i := len(h.run.Calls)
	factor := h.s.Factor(h.g, d.api, in.svc, h.e.Now())
	work := d.step.Work.Seconds() * factor
	h.run.Calls = append(h.run.Calls, figure.HotelCall{Service: in.svc, Instance: in.idx, API: d.api, User: d.user,
		Arrival: h.e.Now(), Demand: work, Deadline: r.Deadline})
	if in.srv != nil {
		in.meter.Arrive(h.e.Time(), r.ID)
	}
	job := &sim.Job{Req: r}
	job.OnStart = func(j *sim.Job) {
		h.run.Calls[i].Start = h.e.Now()
		if in.srv != nil {
			in.meter.Begin(h.e.Time(), r.ID)
		}
		h.e.After(sim.Seconds(work), func() { in.fifo.Release(j) })
	}
	job.Done = func(j *sim.Job) {
		if j.Outcome == sim.Rejected {
			// A full worker queue.
			h.run.Calls[i].Arrival = 0
			h.run.Calls[i].Demand = 0
			if in.srv != nil {
				in.meter.Leave(r.ID)
			}
			in.answer(r, figure.HotelRejected, -1)
			return
		}
		rec := &h.run.Calls[i]
		rec.Finish, rec.Gone = h.e.Now(), r.Canceled() || r.Done()
		in.next(r, 0)
	}
	in.fifo.Submit(job)
}

// next makes the handler's call j (after its work), or answers.
func (in *hinst) next(r *sim.Request, j int) {
	h := in.h
	d := r.Data.(*hreq)
	if r.Done() {
		return
	}
	if r.Canceled() || (r.Deadline > 0 && h.e.Now() >= r.Deadline) {
		in.answer(r, figure.HotelTimeout, -1)
		return
	}
	if j == len(d.step.Calls) {
		in.answer(r, figure.HotelOK, -1)
		return
	}
	child := &d.step.Calls[j]
	ce, err := in.callee(child.Service)
	if err != nil {
		panic(err) // a graph validated at build: cannot happen
	}
	side, to := ce.pick(h, child.Service)
	k := &hcall{h: h, side: side, to: []*hinst{to}, api: d.api, user: d.user, class: d.class, step: child,
		deadline: r.Deadline, fwd: d.fwd, userID: d.userID}
	k.end = func(code figure.HotelCode, pushback time.Duration) {
		if code != figure.HotelOK {
			in.answer(r, code, pushback)
			return
		}
		in.next(r, j+1)
	}
	r.OnCancel(func(*sim.Request) { k.cancel() })
	k.start()
}

// answer ends the call r with code.
func (in *hinst) answer(r *sim.Request, code figure.HotelCode, pushback time.Duration) {
	d := r.Data.(*hreq)
	d.code, d.pushback = code, pushback
	o := sim.Completed
	if code != figure.HotelOK {
		o = sim.Rejected
	}
	r.Finish(in.h.e.Now(), o)
}
