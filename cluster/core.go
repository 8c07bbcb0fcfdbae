// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Mode says where an instance's parts come from.
type Mode string

const (
	// ModeStarting: no sync yet; the instance enforces 1/N of every
	// budget with N = Config.InitialInstances (or the N it knew before a
	// reload).
	ModeStarting Mode = "starting"
	// ModeSynced: the last sync succeeded; the parts are split by demand
	// over the live instances.
	ModeSynced Mode = "synced"
	// ModeFallback: the last sync failed (Redis unreachable, slow or
	// refusing); the instance enforces 1/N of every budget with N the
	// last known number of live instances, until a sync succeeds again.
	ModeFallback Mode = "fallback"
	// ModeLeft is the mode of the last report of an instance that shut
	// down: the others stop counting it at once.
	ModeLeft Mode = "left"
)

const (
	// FloorFraction is the part of a budget split evenly: every counted
	// instance gets at least FloorFraction/N of it, so that one whose
	// demand appears from nothing is not at zero until the next sync. The
	// rest is split in proportion to demand. An idle instance thus
	// strands at most FloorFraction/N of the budget (0.7 % with three).
	FloorFraction = 0.02
	// DemandAlpha is the EWMA weight of the last sync interval's request
	// rate in an instance's published demand (about three intervals of
	// memory), which keeps the split steady when a few requests a second
	// spread unevenly over the instances.
	DemandAlpha = 0.3
)

// LocalStage is one budgeted stage of this instance, read at one moment.
type LocalStage struct {
	// Name is the stage's name: instances split the budgets of stages of
	// the same name and kind.
	Name string
	// Kind is the budget's unit: sluice.KindRate (requests per second)
	// or sluice.KindConcurrency (requests in flight, whole numbers, at
	// least 1 per instance).
	Kind sluice.Kind
	// Global is the configured budget of the whole cluster (req/s or
	// requests in flight).
	Global float64
	// Offered and Admitted count the stage's requests since it was built
	// (stage.Stage.Counts).
	Offered, Admitted uint64
}

// LocalShares is this instance's client shares, read at one moment.
type LocalShares struct {
	// Total is the configured B of the whole cluster, bytes per second.
	Total float64
	// Clients are the configured clients in order, others last.
	Clients []LocalClient
}

// LocalClient is one client of LocalShares.
type LocalClient struct {
	// Name is the client's name (others included); Share its configured
	// percent of Total.
	Name  string
	Share float64
	// Arrivals and Bytes count its requests and delivered reply bytes
	// since the shares were built.
	Arrivals, Bytes uint64
	// Measured is avg_i, its measured bandwidth, bytes per second.
	Measured float64
}

// Local is what the runner reads from this instance each sync.
type Local struct {
	Stages []LocalStage
	// Shares is nil without client shares.
	Shares *LocalShares
}

// Report is what an instance publishes each sync (JSON in Redis).
// Rates are per second; demand is smoothed with DemandAlpha.
type Report struct {
	Instance string                 `json:"instance"`
	Mode     Mode                   `json:"mode"`
	Stages   map[string]StageReport `json:"stages,omitempty"`
	Shares   *SharesReport          `json:"shares,omitempty"`
}

// StageReport is one budgeted stage in a Report.
type StageReport struct {
	Kind sluice.Kind `json:"kind"`
	// Global is the budget as this instance is configured.
	Global float64 `json:"global"`
	// Demand is the offered rate (req/s), Admitted the admitted rate over
	// the last interval, Part the part in force.
	Demand   float64 `json:"demand"`
	Admitted float64 `json:"admitted"`
	Part     float64 `json:"part"`
}

// SharesReport is the client shares in a Report.
type SharesReport struct {
	// Total is B as this instance is configured, bytes per second.
	Total   float64                 `json:"total"`
	Clients map[string]ClientReport `json:"clients"`
}

// ClientReport is one client in a SharesReport.
type ClientReport struct {
	// Demand is the client's request rate here (req/s, smoothed), Served
	// the reply bytes per second delivered over the last interval,
	// Measured its avg_i, Part its allocation here (bytes per second).
	Demand   float64 `json:"demand"`
	Served   float64 `json:"served"`
	Measured float64 `json:"measured"`
	Part     float64 `json:"part"`
	// Rate is the client's request rate here over the last interval
	// alone (req/s, not smoothed): whether it is sending now.
	Rate float64 `json:"rate"`
}

// Peer is one live instance's report as a sync returned it, with the
// time its heartbeat expires (Redis server time).
type Peer struct {
	Report  Report
	Expires time.Time
}

// Exchange is the result of one successful sync: the Redis server's
// time and every instance whose heartbeat had not expired then, this one
// included.
type Exchange struct {
	ServerTime time.Time
	Peers      []Peer
}

// Assignment is what an instance enforces until the next sync.
type Assignment struct {
	Mode Mode
	// Reason explains the mode (the error of a failed sync).
	Reason string
	// Instances is N, the number of instances counted.
	Instances int
	// Changed is true when Mode differs from the previous step's.
	Changed bool
	Stages  []StagePart
	// Shares is nil without client shares.
	Shares *SharesPart
}

// StagePart is this instance's part of one stage's budget.
type StagePart struct {
	Name   string
	Kind   sluice.Kind
	Global float64
	Part   float64
	// Reason is the decision's explanation, with the numbers used.
	Reason string
}

// SharesPart is this instance's part of the client shares: the B it
// enforces and every client's b_i, in configuration order, others last
// (share.Shares.SetAllocations), and which clients to hold active
// (share.Shares.HoldActive): those that sent somewhere in the cluster
// during the last interval and send here too (smoothed demand here
// above 0). Held is nil in fallback and before the first sync.
type SharesPart struct {
	Total float64
	Alloc []float64
	Held  []bool
}

// Core is the deterministic part of cluster mode: what an instance
// publishes (Report), how it splits every global budget given the
// cluster's view (Plan), and the fallback rule. It reads no clock and
// does no I/O: the runner passes now, what it read from the stages and
// shares, and the outcome of its Redis exchange.
//
// The split. For a budget G (a static-rate stage's req/s, a
// static-concurrency stage's limit, a client's allocation b_i) and the
// counted instances k = 1…N with demands w_k (offered req/s of the
// stage, or of the client, smoothed):
//
//	part_k = m + (G − N·m) · w_k / Σ w_j,   m = FloorFraction · G / N
//
// (G/N each when Σ w_j = 0). Concurrency parts are rounded to whole
// numbers by largest remainder in instance order, at least 1 each. An
// instance's shares B is the sum of its clients' parts.
//
// Who counts. The instances whose heartbeat has not expired (Redis
// keeps an expiry time per instance, refreshed every sync), plus:
// instances known before a fallback, until one heartbeat TTL after the
// sync that ended it (Redis may have lost its data; a live instance
// re-registers within one period); and, during the first heartbeat TTL
// after this instance's first sync, as many unseen instances as bring
// N to Config.InitialInstances. An instance counted but not in the
// last exchange weighs its last reported demand; an unseen one the mean
// demand of the others.
//
// The fallback rule. When a sync fails, every part is G/N with N the
// last number of instances counted (concurrency: ⌊G/N⌋, at least 1),
// until a sync succeeds. Before the first sync the same rule holds with
// N = Config.InitialInstances.
//
// Core is safe for concurrent use (View runs beside the runner).
type Core struct {
	mu      sync.Mutex
	self    string
	ttl     time.Duration
	initial int

	mode   Mode
	reason string
	since  time.Time
	n      int
	phant  int
	known  map[string]*peerState
	first  time.Time // server time of the first successful sync

	prevAt  time.Time
	stages  map[string]*rateState
	clients map[string]*rateState
	local   Local
	parts   map[string]float64 // stage name → own part
	shares  *SharesPart

	lastSync   time.Time
	lastErr    string
	syncs      uint64
	failures   uint64
	lastReport Report
	warnings   []string
}

type peerState struct {
	rep     Report
	expires time.Time
	present bool // in the last exchange
}

// rateState turns cumulative counts into per-second rates.
type rateState struct {
	a, b   uint64  // the counts at prevAt
	demand float64 // smoothed rate of a
	rateA  float64 // rate of a over the last interval
	rateB  float64 // rate of b over the last interval
	seen   bool    // a, b hold counts
	rated  bool    // demand holds a rate
}

// NewCore returns the core of a validated cfg (with defaults set). With
// prev (the core of the configuration being replaced, same instance id),
// it keeps the instances known, N, the mode and the demand measurements,
// so that a reload neither forgets the cluster nor restarts from
// InitialInstances.
func NewCore(cfg Config, prev *Core) *Core {
	c := &Core{self: cfg.Instance, ttl: cfg.HeartbeatTTL, initial: cfg.InitialInstances,
		mode: ModeStarting, reason: "no sync yet", n: cfg.InitialInstances,
		known: map[string]*peerState{}, stages: map[string]*rateState{}, clients: map[string]*rateState{},
		parts: map[string]float64{}}
	if prev == nil {
		return c
	}
	prev.mu.Lock()
	defer prev.mu.Unlock()
	if prev.self != cfg.Instance {
		return c
	}
	c.mode, c.reason, c.since, c.n, c.phant, c.first = prev.mode, prev.reason, prev.since, prev.n, prev.phant, prev.first
	c.prevAt, c.lastSync, c.lastErr, c.syncs, c.failures = prev.prevAt, prev.lastSync, prev.lastErr, prev.syncs, prev.failures
	for id, p := range prev.known {
		q := *p
		c.known[id] = &q
	}
	for k, v := range prev.stages {
		r := *v
		c.stages[k] = &r
	}
	for k, v := range prev.clients {
		r := *v
		c.clients[k] = &r
	}
	return c
}

// observe updates r with the counts a and b at now, dt seconds after the
// previous observation.
func (r *rateState) observe(a, b uint64, dt float64) {
	if r.seen && dt > 0 && a >= r.a && b >= r.b {
		rate := float64(a-r.a) / dt
		r.rateA = rate
		if r.rated {
			r.demand = DemandAlpha*rate + (1-DemandAlpha)*r.demand
		} else {
			r.demand, r.rated = rate, true
		}
		r.rateB = float64(b-r.b) / dt
	}
	r.a, r.b, r.seen = a, b, true
}

// observe updates the state of name in m (created at its first
// observation) with the counts a and b, dt seconds after the previous
// observation, and returns it.
func observe(m map[string]*rateState, name string, a, b uint64, dt float64) *rateState {
	r := m[name]
	if r == nil {
		r = &rateState{}
		m[name] = r
	}
	r.observe(a, b, dt)
	return r
}

// Report records what the runner read at now and returns what this
// instance publishes: its demand per budgeted stage and per client
// (rates since the previous Report, smoothed from the second rate on),
// and its parts in force. The first Report after a start has no rates
// yet (demand 0).
func (c *Core) Report(now time.Time, l Local) Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	dt := 0.0
	if !c.prevAt.IsZero() {
		dt = now.Sub(c.prevAt).Seconds()
	}
	c.prevAt = now
	c.local = l
	rep := Report{Instance: c.self, Mode: c.mode}
	if len(l.Stages) > 0 {
		rep.Stages = make(map[string]StageReport, len(l.Stages))
	}
	for _, s := range l.Stages {
		r := observe(c.stages, s.Name, s.Offered, s.Admitted, dt)
		rep.Stages[s.Name] = StageReport{Kind: s.Kind, Global: s.Global, Demand: r.demand, Admitted: r.rateB, Part: c.partOf(s)}
	}
	if sh := l.Shares; sh != nil {
		sr := &SharesReport{Total: sh.Total, Clients: make(map[string]ClientReport, len(sh.Clients))}
		for i, cl := range sh.Clients {
			r := observe(c.clients, cl.Name, cl.Arrivals, cl.Bytes, dt)
			part := cl.Share / 100 * sh.Total / float64(max(c.n, 1))
			if c.shares != nil && i < len(c.shares.Alloc) {
				part = c.shares.Alloc[i]
			}
			sr.Clients[cl.Name] = ClientReport{Demand: r.demand, Served: r.rateB, Measured: cl.Measured, Part: part, Rate: r.rateA}
		}
		rep.Shares = sr
	}
	c.lastReport = rep
	return rep
}

// partOf returns the part of s in force (the fallback part before any).
func (c *Core) partOf(s LocalStage) float64 {
	if p, ok := c.parts[s.Name]; ok {
		return p
	}
	return fallbackPart(s.Kind, s.Global, c.n)
}

// Last returns the last report published (Report's result).
func (c *Core) Last() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastReport
}

// Plan takes the outcome of the sync that published the last Report —
// the exchange, or the error that ended it — at now, and returns what
// this instance enforces until the next sync.
func (c *Core) Plan(now time.Time, x Exchange, err error) Assignment {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.mode
	if err != nil {
		c.failures++
		c.lastErr = err.Error()
		if c.mode != ModeFallback {
			c.mode, c.since = ModeFallback, now
		}
		c.reason = "sync failed: " + err.Error()
		a := c.assignFallback()
		a.Changed = old != c.mode
		return a
	}
	c.syncs++
	c.lastSync, c.lastErr = now, ""
	t := x.ServerTime
	if c.first.IsZero() {
		c.first = t
	}
	rejoin := c.mode != ModeSynced
	for _, p := range c.known {
		p.present = false
	}
	for _, p := range x.Peers {
		switch {
		case p.Report.Instance == "" || p.Report.Instance == c.self && p.Report.Mode == ModeLeft:
		case p.Report.Mode == ModeLeft:
			delete(c.known, p.Report.Instance)
		default:
			c.known[p.Report.Instance] = &peerState{rep: p.Report, expires: p.Expires, present: true}
		}
	}
	if me, ok := c.known[c.self]; !ok || !me.present {
		// The store always returns this instance's own heartbeat; keep
		// it counted even if a reply somehow lacked it.
		c.known[c.self] = &peerState{rep: c.lastReport, expires: t.Add(c.ttl), present: true}
	}
	for id, p := range c.known {
		if !p.present && rejoin && p.expires.Before(t.Add(c.ttl)) {
			p.expires = t.Add(c.ttl)
		}
		if !p.expires.After(t) {
			delete(c.known, id)
		}
	}
	c.phant = 0
	if t.Before(c.first.Add(c.ttl)) {
		c.phant = max(0, c.initial-len(c.known))
	}
	c.n = len(c.known) + c.phant
	if c.mode != ModeSynced {
		c.mode, c.since = ModeSynced, now
	}
	c.reason = ""
	a := c.assignSynced()
	a.Changed = old != c.mode
	return a
}

// Prime records what this instance has to split (l's stages and shares;
// its counts are not rates yet) and returns the assignment of the
// current mode without a sync: the fallback rule's parts before the
// first sync or after a failed one, the split over the instances known
// at the last successful sync otherwise (a reload while synced). The
// runner applies it when it starts, before its first exchange, so that
// a budget is never enforced whole by an instance of a larger cluster.
func (c *Core) Prime(l Local) Assignment {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.local = l
	if c.mode == ModeSynced {
		return c.assignSynced()
	}
	return c.assignFallback()
}

// fallbackPart is G/N (concurrency: ⌊G/N⌋, at least 1).
func fallbackPart(k sluice.Kind, global float64, n int) float64 {
	p := global / float64(max(n, 1))
	if k == sluice.KindConcurrency {
		p = math.Max(1, math.Floor(p))
	}
	return p
}

func (c *Core) assignFallback() Assignment {
	a := Assignment{Mode: c.mode, Reason: c.reason, Instances: c.n}
	why := "no sync yet"
	if c.mode == ModeFallback {
		why = "Redis unreachable"
	}
	for _, s := range c.local.Stages {
		p := fallbackPart(s.Kind, s.Global, c.n)
		c.parts[s.Name] = p
		a.Stages = append(a.Stages, StagePart{Name: s.Name, Kind: s.Kind, Global: s.Global, Part: p,
			Reason: fmt.Sprintf("cluster %s (%s): 1/%d of the global %s", c.mode, why, c.n, fmtBudget(s.Kind, s.Global))})
	}
	if sh := c.local.Shares; sh != nil {
		sp := &SharesPart{Total: sh.Total / float64(max(c.n, 1))}
		for _, cl := range sh.Clients {
			sp.Alloc = append(sp.Alloc, cl.Share/100*sh.Total/float64(max(c.n, 1)))
		}
		c.shares = sp
		a.Shares = sp
	}
	return a
}

// member is one counted instance in a split: its id and its weight.
type member struct {
	id string
	w  float64
}

func (c *Core) assignSynced() Assignment {
	a := Assignment{Mode: c.mode, Instances: c.n}
	ids := make([]string, 0, len(c.known))
	for id := range c.known {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	c.warnings = c.warnings[:0]
	for _, s := range c.local.Stages {
		var ms []member
		for _, id := range ids {
			sr, ok := c.known[id].rep.Stages[s.Name]
			if !ok || sr.Kind != s.Kind {
				continue
			}
			if sr.Global != s.Global {
				c.warnings = append(c.warnings, fmt.Sprintf("stage %s: instance %s has a global %s of %g, this one %g", s.Name, id, s.Kind, sr.Global, s.Global))
			}
			ms = append(ms, member{id: id, w: sr.Demand})
		}
		ms = c.withPhantoms(ms)
		parts := split(s.Global, ms)
		if s.Kind == sluice.KindConcurrency {
			parts = wholeParts(s.Global, parts)
		}
		own, demand, total := 0.0, 0.0, 0.0
		for i, m := range ms {
			total += m.w
			if m.id == c.self {
				own, demand = parts[i], m.w
			}
		}
		c.parts[s.Name] = own
		a.Stages = append(a.Stages, StagePart{Name: s.Name, Kind: s.Kind, Global: s.Global, Part: own,
			Reason: fmt.Sprintf("cluster synced: %s of the global %s (%d instances; demand here %.4g of %.4g req/s)",
				fmtNum(own), fmtBudget(s.Kind, s.Global), len(ms), demand, total)})
	}
	if sh := c.local.Shares; sh != nil {
		sp := &SharesPart{}
		for _, cl := range sh.Clients {
			var ms []member
			sending := false
			for _, id := range ids {
				p := c.known[id]
				rep := p.rep.Shares
				if rep == nil {
					continue
				}
				cr := rep.Clients[cl.Name]
				ms = append(ms, member{id: id, w: cr.Demand})
				sending = sending || p.present && cr.Rate > 0
			}
			r := c.clients[cl.Name]
			sp.Held = append(sp.Held, sending && r != nil && r.demand > 0)
			ms = c.withPhantoms(ms)
			parts := split(cl.Share/100*sh.Total, ms)
			own := 0.0
			for i, m := range ms {
				if m.id == c.self {
					own = parts[i]
				}
			}
			sp.Alloc = append(sp.Alloc, own)
			sp.Total += own
		}
		if !(sp.Total > 0) {
			// Every allocation is 0 only if B is; keep B/N rather than
			// hand share.SetAllocations an invalid total.
			sp.Total = sh.Total / float64(max(c.n, 1))
		}
		c.shares = sp
		a.Shares = sp
	}
	return a
}

// withPhantoms adds the unseen instances of the first TTL, weighted by
// the mean demand of ms. This instance is always in ms (the caller only
// splits its own budgets, which its own report carries).
func (c *Core) withPhantoms(ms []member) []member {
	if c.phant == 0 {
		return ms
	}
	mean := 0.0
	for _, m := range ms {
		mean += m.w
	}
	if len(ms) > 0 {
		mean /= float64(len(ms))
	}
	for i := range c.phant {
		ms = append(ms, member{id: fmt.Sprintf("~unseen-%d", i+1), w: mean})
	}
	return ms
}

// split divides g among ms: FloorFraction of it evenly, the rest in
// proportion to the weights (evenly when they sum to 0).
func split(g float64, ms []member) []float64 {
	n := len(ms)
	out := make([]float64, n)
	if n == 0 {
		return out
	}
	sum := 0.0
	for _, m := range ms {
		sum += math.Max(m.w, 0)
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		for i := range out {
			out[i] = g / float64(n)
		}
		return out
	}
	floor := FloorFraction * g / float64(n)
	rest := g - float64(n)*floor
	for i, m := range ms {
		out[i] = floor + rest*math.Max(m.w, 0)/sum
	}
	return out
}

// wholeParts rounds parts of the whole number g to whole numbers, at
// least 1 each, by largest remainder in member order, so that they sum
// to g when g ≥ len(parts).
func wholeParts(g float64, parts []float64) []float64 {
	out := make([]float64, len(parts))
	type rem struct {
		i int
		r float64
	}
	var rems []rem
	used := 0.0
	for i, p := range parts {
		out[i] = math.Max(1, math.Floor(p))
		used += out[i]
		rems = append(rems, rem{i, p - math.Floor(p)})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; used < g && k < len(rems); k++ {
		out[rems[k].i]++
		used++
	}
	return out
}
