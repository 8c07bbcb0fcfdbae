// SPDX-License-Identifier: Apache-2.0

package client

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
)

// Dests is a client side's state for all its destinations: one Dest per
// destination (its throttle and retry budget), each with its lock and its
// own random source, under one Config. Transport (HTTP) and the gRPC
// client interceptors of package grpcsluice both drive their calls
// through a Dests, with the wall clock, as LiveCalls: the same objects,
// the same decisions. At most Config.MaxDestinations destinations get
// state of their own; calls to others share one, "others". A Dests is
// safe for concurrent use.
type Dests struct {
	cfg atomic.Pointer[Config]

	mu     sync.RWMutex
	dests  map[destKey]*destState
	others *destState
	seedMu sync.Mutex
	seed   *rand.Rand
}

// destState is a destination's Dest with its lock and random source.
type destState struct {
	name string
	mu   sync.Mutex
	d    *Dest
	rng  *rand.Rand
}

// NewDests returns the state of a client side under cfg (SetDefaults is
// applied to a copy; an invalid field is a *sluice.FieldError). It
// registers its metrics with opts.Registerer when that is set (the
// metrics of Options.Registerer, labelled with Options.Name);
// opts.StampInPlace is Transport's alone.
func NewDests(cfg Config, opts Options) (*Dests, error) {
	d := &Dests{dests: map[destKey]*destState{}, seed: opts.Rand}
	if err := d.SetConfig(cfg); err != nil {
		return nil, err
	}
	d.others = d.newDest("others")
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(newCollector(d, opts.Name)); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// SetConfig puts cfg into force for the calls that start from now on (a
// reload): every destination keeps its counts and counters. An invalid
// cfg is an error and changes nothing.
func (d *Dests) SetConfig(cfg Config) error {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	d.cfg.Store(&cfg)
	return nil
}

// Config returns the configuration in force, with its defaults.
func (d *Dests) Config() Config { return *d.cfg.Load() }

// Collector returns a collector of the metrics (those NewDests registers
// with Options.Registerer), with the const label client=name when name
// is not empty, for a caller that registers it itself.
func (d *Dests) Collector(name string) prometheus.Collector { return newCollector(d, name) }

func (d *Dests) newDest(name string) *destState {
	d.seedMu.Lock()
	var a, b uint64
	if d.seed != nil {
		a, b = d.seed.Uint64(), d.seed.Uint64()
	} else {
		a, b = rand.Uint64(), rand.Uint64()
	}
	d.seedMu.Unlock()
	return &destState{name: name, d: NewDest(d.cfg.Load()), rng: rand.New(rand.NewPCG(a, b))}
}

// destKey is what a state counts: a destination, and with
// Throttle.Scope "hop" the calls' hop priority and tenant.
type destKey struct{ dest, priority, tenant string }

// key is the key of dest's state for a call carrying hop.
func (d *Dests) key(dest string, hop sluice.Hop) destKey {
	if d.cfg.Load().Throttle.Scope == ScopeHop {
		return destKey{dest, hop.Priority, hop.Tenant}
	}
	return destKey{dest: dest}
}

// dest returns the state under key (a destination, or a destination
// and a hop: BeginHop), named name in the metrics, making it if there is
// room.
func (d *Dests) dest(key destKey, name string) *destState {
	d.mu.RLock()
	ds, ok := d.dests[key]
	d.mu.RUnlock()
	if ok {
		return ds
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ds, ok := d.dests[key]; ok {
		return ds
	}
	if len(d.dests) >= d.cfg.Load().MaxDestinations {
		return d.others
	}
	ds = d.newDest(name)
	d.dests[key] = ds
	return ds
}

// Dest returns the state of destination name, for tests and reports; nil
// when it has none of its own. With Throttle.Scope "hop" it is the state
// of the calls that carry no hop priority nor tenant (DestHop).
func (d *Dests) Dest(name string) *Dest { return d.DestHop(name, sluice.Hop{}) }

// DestHop returns the state that counts the calls to destination name
// that carry hop (with Throttle.Scope "hop", that hop's priority and
// tenant; otherwise the destination's); nil when it has none of its own.
func (d *Dests) DestHop(name string, hop sluice.Hop) *Dest {
	key := d.key(name, hop)
	d.mu.RLock()
	defer d.mu.RUnlock()
	if ds, ok := d.dests[key]; ok {
		return ds.d
	}
	return nil
}

// states returns every destination's state, "others" last.
func (d *Dests) states() []*destState {
	d.mu.RLock()
	out := make([]*destState, 0, len(d.dests)+1)
	for _, ds := range d.dests {
		out = append(out, ds)
	}
	d.mu.RUnlock()
	return append(out, d.others)
}

// sync puts cfg into force on the destination, keeping its counts when
// the windows' spans did not change. ds.mu is held.
func (ds *destState) sync(cfg *Config) {
	d := ds.d
	if d.cfg == cfg {
		return
	}
	old := d.cfg
	d.cfg = cfg
	if old.Throttle.Window != cfg.Throttle.Window {
		d.throttle.init(cfg.Throttle.Window)
		d.run.init(cfg.Throttle.Window)
	}
	if old.Retry.BudgetWindow != cfg.Retry.BudgetWindow {
		d.budget.init(cfg.Retry.BudgetWindow)
	}
}

// LiveCall is one call driven with the wall clock: a Call on a
// destination of a Dests, each decision taken under the destination's
// lock with its random source. The zero value is ready for Begin; a
// LiveCall is used by one goroutine at a time.
type LiveCall struct {
	ds   *destState
	call Call
}

// Begin starts a call to destination dest at now (see Call.Begin): safe
// says whether it may be sent twice, deadline is the caller's (zero:
// none).
func (d *Dests) Begin(c *LiveCall, dest string, now time.Time, safe bool, deadline time.Time) Verdict {
	return d.BeginHop(c, dest, sluice.Hop{}, now, safe, deadline)
}

// BeginHop is Begin for a call that carries hop (the priority and tenant
// it stamps): with Throttle.Scope "hop" the call is counted in the
// state of dest and hop's priority and tenant, apart from the calls of
// other priorities and tenants; with "destination", in dest's.
func (d *Dests) BeginHop(c *LiveCall, dest string, hop sluice.Hop, now time.Time, safe bool, deadline time.Time) Verdict {
	c.ds = d.dest(d.key(dest, hop), dest)
	c.ds.mu.Lock()
	c.ds.sync(d.cfg.Load())
	v := c.call.Begin(c.ds.d, now, safe, deadline, c.ds.rng)
	c.ds.mu.Unlock()
	return v
}

// Done records at now how the last attempt ended and decides the next
// (see Call.Done).
func (c *LiveCall) Done(now time.Time, r Result) (Stop, time.Duration) {
	c.ds.mu.Lock()
	defer c.ds.mu.Unlock()
	return c.call.Done(now, r, c.ds.rng)
}

// Overran reports whether less than MinRemaining of the deadline is left
// at now, after a wait for a retry; if so it counts the retry as not made
// for want of time, and the last answer stands.
func (c *LiveCall) Overran(now time.Time) bool {
	if !c.call.short(now) {
		return false
	}
	c.ds.d.late.Add(1)
	return true
}

// Attempts returns the attempts sent so far.
func (c *LiveCall) Attempts() int { return c.call.attempts }

// Config returns the configuration the call began with (a reload after
// Begin does not change it).
func (c *LiveCall) Config() *Config { return c.call.cfg }
