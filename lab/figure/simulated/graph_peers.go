// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/lab/sim"
)

// The chain of figure/graph.go in virtual time with a research peer
// (package lab/peers) at every hop instead of sluice: the same clients
// (GraphParams.ArrivalsOf, the deadline), the same FIFO backend (Workers
// servers, Service times, the trigger's slowdown), the same records
// (figure.GraphRun), so figure.GraphResult's metrics hold for both. Each
// service (tier1, tier2, backend) runs the peer's server side, each
// caller its client side (the end users as UserClients client sides per
// class, users spread over them); every call carries the user's
// deadline, and a caller whose deadline passes leaves (the backend
// finishes the work anyway, as in the chain). Calls are not retried:
// the peers' ports and their papers' applications do not retry. The
// tiers have no capacity of their own, so their queueing delay is 0;
// the backend's is measured on its queue (peers.QueueMeter: a request
// waits from its arrival until a worker takes it). A client side that
// reads utilization (TopFull) is told each service's before each of its
// updates: the backend's busy fraction of the period, 0 for the tiers.
//
// This file uses only the public API of package figure and package sim,
// beside graph.go's own rows.

// The chain's services, as peers.Peer sees them.
const (
	PeerTier1   = "tier1"
	PeerTier2   = "tier2"
	PeerBackend = "backend"
)

// PeerAPI returns the API (Call.Method) of a class's requests: the chain
// serves each class as its own API, "/chain/high" and "/chain/low".
func PeerAPI(class string) string { return "/chain/" + class }

// PeerPaths returns every API's execution path in the chain (TopFull's
// Paths).
func PeerPaths(c figure.GraphParams) map[string][]string {
	m := make(map[string][]string)
	for _, cl := range c.Classes() {
		m[PeerAPI(cl)] = []string{PeerTier1, PeerTier2, PeerBackend}
	}
	return m
}

// GraphPeerOptions configure RunGraphPeer.
type GraphPeerOptions struct {
	// UserClients is how many end-user client sides each class has
	// (default 16): Breakwater's windows, Rajomon's wallets.
	UserClients int
	// Users is how many users each class has (default 1000); each
	// request is a uniformly drawn user's, on the client side of
	// user mod UserClients.
	Users int
}

// RunGraphPeer runs one row of the chain with peer p (nil: no control)
// and returns its records; seed seeds every stream.
func RunGraphPeer(seed uint64, c figure.GraphParams, p peers.Peer, o GraphPeerOptions) (*figure.GraphRun, error) {
	if o.UserClients <= 0 {
		o.UserClients = 16
	}
	if o.Users <= 0 {
		o.Users = 1000
	}
	name := "none"
	if p != nil {
		name = p.Name()
	}
	e := sim.New(seed)
	fifo, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: c.Workers})
	if err != nil {
		return nil, err
	}
	pc := &pchain{e: e, c: c, run: &figure.GraphRun{Row: name}, svc: c.Service, svcRng: e.Stream("service"),
		scale: 1, fifo: fifo, pend: make(map[*peers.Call]*pcall)}
	if err := pc.build(p, o); err != nil {
		return nil, fmt.Errorf("row %s: %w", name, err)
	}
	if err := pc.tick(); err != nil {
		return nil, err
	}
	if !c.Crowd && c.TriggerFactor != 1 {
		e.Schedule(c.EventStart(), func() { pc.scale = c.TriggerFactor })
		e.Schedule(c.EventEnd(), func() { pc.scale = 1 })
	}
	for cl, class := range c.Classes() {
		arr, err := c.ArrivalsOf(cl)
		if err != nil {
			return nil, err
		}
		rng := e.Stream("users-" + class)
		pc.arrivals(cl, class, arr, rng, o)
	}
	e.Run(c.End() + c.Deadline + time.Second)
	return pc.run, nil
}

// pchain is one row's chain on one engine.
type pchain struct {
	e      *sim.Engine
	c      figure.GraphParams
	run    *figure.GraphRun
	svc    dist.Dist
	svcRng *rand.Rand
	scale  float64
	fifo   *sim.FIFO
	nextID uint64

	services []*pservice // tier1, tier2, backend
	users    [][]*pcaller
	clients  []peers.Client // each once, for their updates
	pend     map[*peers.Call]*pcall
}

type pservice struct {
	ch      *pchain
	name    string
	srv     peers.Server
	meter   peers.QueueMeter
	down    *pcaller
	backend bool
}

type pcaller struct {
	ch *pchain
	cl peers.Client
	to *pservice
}

// pcall is one call from a caller to a service.
type pcall struct {
	cr     *pcaller
	call   *peers.Call
	class  int
	userDL time.Duration
	sent   bool
	ended  bool
	timer  sim.Timer
	end    func(o peers.Outcome)
}

func (pc *pchain) id() uint64 {
	pc.nextID++
	return pc.nextID
}

func (pc *pchain) at(d time.Duration) time.Time { return pc.e.Base().Add(d) }

func (pc *pchain) addClient(cl peers.Client) {
	if cl == nil {
		return
	}
	for _, x := range pc.clients {
		if x == cl {
			return
		}
	}
	pc.clients = append(pc.clients, cl)
}

// build creates the services and callers.
func (pc *pchain) build(p peers.Peer, o GraphPeerOptions) error {
	names := []string{PeerTier1, PeerTier2, PeerBackend}
	for i, n := range names {
		s := &pservice{ch: pc, name: n, backend: n == PeerBackend}
		if p != nil {
			srv, err := p.Server(n, i == 0)
			if err != nil {
				return fmt.Errorf("%s's server side: %w", n, err)
			}
			s.srv = srv
		}
		pc.services = append(pc.services, s)
	}
	for i := 0; i+1 < len(names); i++ {
		cr := &pcaller{ch: pc, to: pc.services[i+1]}
		if p != nil {
			cl, err := p.Client(names[i], names[i+1])
			if err != nil {
				return fmt.Errorf("%s's client side: %w", names[i], err)
			}
			cr.cl = cl
			pc.addClient(cl)
		}
		pc.services[i].down = cr
	}
	for range pc.c.Classes() {
		var row []*pcaller
		for range o.UserClients {
			cr := &pcaller{ch: pc, to: pc.services[0]}
			if p != nil {
				cl, err := p.Client("", names[0])
				if err != nil {
					return fmt.Errorf("an end user's client side: %w", err)
				}
				cr.cl = cl
				pc.addClient(cl)
			}
			row = append(row, cr)
		}
		pc.users = append(pc.users, row)
	}
	return nil
}

// tick schedules every side's periodic update.
func (pc *pchain) tick() error {
	for _, s := range pc.services {
		if s.srv == nil {
			continue
		}
		if _, err := pc.e.Every(s.srv.Period(), func() {
			now := pc.e.Time()
			s.srv.Update(now, s.meter.Read(now))
		}); err != nil {
			return err
		}
	}
	for _, cl := range pc.clients {
		obs, _ := cl.(peers.LoadObserver)
		lastBusy, lastAt := 0.0, time.Duration(0)
		if _, err := pc.e.Every(cl.Period(), func() {
			now := pc.e.Time()
			if obs != nil {
				busy, el := pc.fifo.Busy(), (pc.e.Now() - lastAt).Seconds()
				if el > 0 {
					obs.ObserveLoad(now, PeerBackend, (busy-lastBusy)/el)
				}
				obs.ObserveLoad(now, PeerTier1, 0)
				obs.ObserveLoad(now, PeerTier2, 0)
				lastBusy, lastAt = busy, pc.e.Now()
			}
			pc.dispatch(cl.Update(now))
		}); err != nil {
			return err
		}
	}
	return nil
}

// arrivals schedules a class's user requests.
func (pc *pchain) arrivals(cl int, class string, arr dist.Arrivals, rng *rand.Rand, o GraphPeerOptions) {
	end := pc.c.End()
	var last time.Duration
	var fire func()
	fire = func() {
		u := rng.IntN(o.Users)
		pc.user(cl, class, fmt.Sprintf("%s-%d", class, u), pc.users[cl][u%o.UserClients])
		next := arr.Next(rng, last)
		if next == dist.Never || next >= end {
			return
		}
		last = next
		pc.e.Schedule(next, fire)
	}
	if first := arr.Next(rng, 0); first != dist.Never && first < end {
		last = first
		pc.e.Schedule(first, fire)
	}
}

// user sends one user request and records how it ends.
func (pc *pchain) user(cl int, class, user string, cr *pcaller) {
	i := len(pc.run.Users)
	sent := pc.e.Now()
	dl := sent + pc.c.Deadline
	pc.run.Users = append(pc.run.Users, figure.GraphUser{Class: cl, Sent: sent})
	call := &peers.Call{ID: pc.id(), Method: PeerAPI(class), User: user, Deadline: pc.at(dl)}
	cr.start(cl, call, dl, func(o peers.Outcome) {
		u := &pc.run.Users[i]
		u.Done = pc.e.Now()
		switch o {
		case peers.OK:
			u.Status = 200
		case peers.Rejected:
			u.Status = 503
		case peers.Failed:
			u.Status = 502
		}
	})
}

// start begins a call: the client side decides, the deadline ends it.
func (cr *pcaller) start(class int, call *peers.Call, userDL time.Duration, end func(peers.Outcome)) {
	pc := cr.ch
	k := &pcall{cr: cr, call: call, class: class, userDL: userDL, end: end}
	if !call.Deadline.IsZero() {
		k.timer = pc.e.Schedule(call.Deadline.Sub(pc.e.Base()), k.expire)
	}
	if cr.cl == nil {
		k.send(nil)
		return
	}
	d := cr.cl.Send(pc.e.Time(), call)
	switch d.Verdict {
	case peers.Send:
		k.send(d.Meta)
	case peers.Deny:
		k.finish(peers.Rejected)
	default:
		pc.pend[call] = k
	}
}

// dispatch carries out a client side's releases.
func (pc *pchain) dispatch(rs []peers.Release) {
	for _, r := range rs {
		k := pc.pend[r.Call]
		if k == nil {
			continue
		}
		delete(pc.pend, r.Call)
		if k.ended {
			continue
		}
		if r.Decision.Verdict == peers.Send {
			k.send(r.Decision.Meta)
		} else {
			k.finish(peers.Rejected)
		}
	}
}

// send delivers the call to the service, at once but as its own event.
func (k *pcall) send(meta peers.Metadata) {
	pc := k.cr.ch
	k.sent = true
	k.call.Sent = pc.e.Time()
	in := &peers.Call{ID: pc.id(), Method: k.call.Method, User: k.call.User, Deadline: k.call.Deadline, Meta: meta}
	pc.e.After(0, func() { k.cr.to.serve(in, k.class, k.userDL, k.answered) })
}

// answered takes the service's answer; it reports whether the caller
// was still there.
func (k *pcall) answered(o peers.Outcome, reply peers.Metadata) bool {
	if k.ended {
		return false
	}
	k.ended = true
	k.timer.Stop()
	pc := k.cr.ch
	if k.cr.cl != nil {
		pc.dispatch(k.cr.cl.Received(pc.e.Time(), k.call, reply, o))
	}
	k.end(o)
	return true
}

// expire ends the call at its deadline.
func (k *pcall) expire() {
	if k.ended {
		return
	}
	k.ended = true
	pc := k.cr.ch
	if cl := k.cr.cl; cl != nil {
		if k.sent {
			pc.dispatch(cl.Received(pc.e.Time(), k.call, nil, peers.Canceled))
		} else {
			delete(pc.pend, k.call)
			pc.dispatch(cl.Cancel(pc.e.Time(), k.call))
		}
	}
	k.end(peers.Canceled)
}

// finish ends a call the client side refused.
func (k *pcall) finish(o peers.Outcome) {
	k.ended = true
	k.timer.Stop()
	k.end(o)
}

// serve is the service's handling of a call; reply reports its end.
func (s *pservice) serve(in *peers.Call, class int, userDL time.Duration, reply func(peers.Outcome, peers.Metadata) bool) {
	pc := s.ch
	var fw peers.Metadata
	if s.srv != nil {
		a := s.srv.Admit(pc.e.Time(), in)
		if !a.Admit {
			reply(peers.Rejected, a.Reply)
			return
		}
		fw = a.Forward
	}
	done := func(o peers.Outcome) bool {
		var md peers.Metadata
		if s.srv != nil {
			md = s.srv.Done(pc.e.Time(), in, o)
		}
		return reply(o, md)
	}
	now := pc.e.Time()
	s.meter.Arrive(now, in.ID)
	if s.backend {
		s.work(in, userDL, done)
		return
	}
	s.meter.Begin(now, in.ID)
	call := &peers.Call{ID: pc.id(), Method: in.Method, User: in.User, Deadline: in.Deadline, Meta: fw}
	s.down.start(class, call, userDL, func(o peers.Outcome) { done(o) })
}

// work is the backend's FIFO service of a call, recorded.
func (s *pservice) work(in *peers.Call, userDL time.Duration, done func(peers.Outcome) bool) {
	pc := s.ch
	i := len(pc.run.Calls)
	demand := pc.svc.Sample(pc.svcRng) * pc.scale
	pc.run.Calls = append(pc.run.Calls, figure.GraphCall{Arrival: pc.e.Now(), Demand: demand, UserDeadline: userDL})
	job := &sim.Job{Work: demand}
	job.OnStart = func(j *sim.Job) {
		s.meter.Begin(pc.e.Time(), in.ID)
		pc.e.After(sim.Seconds(demand), func() { pc.fifo.Release(j) })
	}
	job.Done = func(*sim.Job) {
		gone := !done(peers.OK)
		k := &pc.run.Calls[i]
		k.Finish, k.Gone = pc.e.Now(), gone
	}
	pc.fifo.Submit(job)
}
