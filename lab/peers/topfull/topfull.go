// SPDX-License-Identifier: Apache-2.0

// Package topfull is TopFull (Park et al., "TopFull: An Adaptive
// Top-Down Overload Control for SLO-Oriented Microservices", SIGCOMM
// 2024) as a lab peer, with its rule-based controller: per-API rate
// limits at the entry of the graph, moved by a controller that finds
// overloaded services from their CPU utilization, groups the APIs that
// cross them, and steps each group's rate multiplicatively on its tail
// latency. Written from the paper and its repository (kaist-ina/TopFull:
// online_boutique_scripts/src/deploy_mimd.py, overload_detection.py,
// proxy/proxy_online_boutique.go; read, not copied). The paper's
// reinforcement-learning controller (a PPO policy over the same state,
// trained in its simulator) is not ported: its trained weights are the
// authors' artefact, and the rule-based controller is the one their
// repository runs without them.
package topfull

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/monitor"
)

// Config configures TopFull's entry. Start from DefaultConfig.
type Config struct {
	// Interval is the controller's step (default 1s, the agents'
	// interval).
	Interval time.Duration `yaml:"interval"`
	// Alpha: a service is overloaded when its CPU utilization (of its
	// quota, in [0, 1]) exceeds it (default 0.8, detect(0.8)).
	Alpha float64 `yaml:"alpha"`
	// Targets overrides alpha per service (the repository sets 0.95 for
	// two of its services).
	Targets map[string]float64 `yaml:"targets"`
	// SLO is the tail latency above which a group's rate falls (default
	// 1s, the repository's 1000 ms).
	SLO time.Duration `yaml:"slo"`
	// Percentile is the tail measured (default 0.95, Locust's p95 that
	// the repository reads).
	Percentile float64 `yaml:"percentile"`
	// Decrease and Increase are the multiplicative steps (defaults 0.05
	// and 0.01: the action −0.05 or +0.01).
	Decrease float64 `yaml:"decrease"`
	Increase float64 `yaml:"increase"`
	// MinRate is the lowest limit of an API, req/s (default 10, the
	// proxy's floor).
	MinRate float64 `yaml:"min_rate"`
	// RaiseMargin caps a raised limit at this multiple of the API's
	// offered rate (default 1.1).
	RaiseMargin float64 `yaml:"raise_margin"`
	// CleanFail: a controlled API is clean when its failures are at most
	// this fraction of its offered rate and its limit is at least that
	// rate (default 0.1); a group whose APIs are all clean is released.
	CleanFail float64 `yaml:"clean_fail"`
	// TTL is the most steps a group is controlled (default 150).
	TTL int `yaml:"ttl"`
	// Paths lists each API's services (its execution path).
	Paths map[string][]string `yaml:"paths"`
	// Business is each API's business priority, higher is more
	// important (default 0).
	Business map[string]int `yaml:"business"`
}

// DefaultConfig returns the repository's parameters: Interval 1s, Alpha
// 0.8, SLO 1s, Percentile 0.95, Decrease 0.05, Increase 0.01, MinRate
// 10, RaiseMargin 1.1, CleanFail 0.1, TTL 150; no paths.
func DefaultConfig() Config {
	return Config{Interval: time.Second, Alpha: 0.8, SLO: time.Second, Percentile: 0.95, Decrease: 0.05,
		Increase: 0.01, MinRate: 10, RaiseMargin: 1.1, CleanFail: 0.1, TTL: 150}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Interval <= 0:
		return fielderr.Invalid("interval", c.Interval, "a duration > 0 such as 1s")
	case !(c.Alpha > 0 && c.Alpha <= 1):
		return fielderr.Invalid("alpha", c.Alpha, "a number in (0, 1]")
	case c.SLO <= 0:
		return fielderr.Invalid("slo", c.SLO, "a duration > 0 such as 1s")
	case !(c.Percentile > 0 && c.Percentile <= 1):
		return fielderr.Invalid("percentile", c.Percentile, "a number in (0, 1]")
	case !(c.Decrease > 0 && c.Decrease < 1):
		return fielderr.Invalid("decrease", c.Decrease, "a number in (0, 1)")
	case !(c.Increase > 0 && c.Increase < 10):
		return fielderr.Invalid("increase", c.Increase, "a number in (0, 10)")
	case !(c.MinRate > 0) || math.IsInf(c.MinRate, 0):
		return fielderr.Invalid("min_rate", c.MinRate, "a number > 0 (req/s)")
	case !(c.RaiseMargin >= 1) || math.IsInf(c.RaiseMargin, 0):
		return fielderr.Invalid("raise_margin", c.RaiseMargin, "a number ≥ 1")
	case !(c.CleanFail >= 0 && c.CleanFail <= 1):
		return fielderr.Invalid("clean_fail", c.CleanFail, "a number in [0, 1]")
	case c.TTL < 1:
		return fielderr.Invalid("ttl", c.TTL, "an integer ≥ 1")
	}
	for svc, t := range c.Targets {
		if !(t > 0 && t <= 1) {
			return fielderr.Invalid("targets."+svc, t, "a number in (0, 1]")
		}
	}
	return nil
}

// Entry is TopFull at the entry of a graph: a token bucket per API
// (rate = its limit, burst = one second of it, as the proxy's
// rate.Limiter; no limit until the controller sets one) and the
// rule-based controller (deploy_mimd.py). Every interval (Update), with
// each API's offered rate r (calls arriving at the entry, refused ones
// included), failures f (refused here or failed further on) and tail
// latency (percentile of the calls answered), and each service's last
// utilization (ObserveLoad):
//
//   - overloaded services O = {s : utilization(s) > alpha(s)};
//   - an API with r > 0 whose path crosses O comes under control with
//     its limit set to r; controlled APIs sharing a service of O form a
//     group;
//   - a group whose APIs are all clean (f ≤ clean_fail·r and limit ≥ r,
//     or r = 0), or that was controlled ttl steps, is released (no
//     limit);
//   - otherwise its action is a = −decrease if the largest tail latency
//     of its APIs exceeds the SLO, else +increase, and the amount
//     |a|·Σ limits of its target APIs moves: a cut goes to the
//     lowest-priority APIs first, a raise to the highest first, spread
//     evenly within a priority (a cut stops at 0, a raise at
//     raise_margin·r), the rest to the next APIs in order; a limit is
//     never below min_rate.
//
// An API's priority is (the fewest APIs sharing one of its overloaded
// services, then its business priority), lower first to be cut: an API
// that alone loads a service is cut before one sharing it, as
// set_priority orders them.
//
// Departures from the repository: one controller per entry, its groups
// recomputed every step (the repository runs an agent thread per group
// with its own merges and splits, every second, and detects every two);
// the offered rate is the last interval's (the proxy averages 10 s
// lagging 2 s); the amount is |a| times the target APIs' limits (its
// apply_v2 compares a name with a number and so takes the first API's
// only); utilization comes from the driver (the repository reads
// cAdvisor).
type Entry struct {
	cfg  Config
	apis map[string]*api
	util map[string]float64
	last time.Time
	on   bool
}

type api struct {
	name       string
	limit      float64 // +Inf: none
	tokens     float64
	filled     time.Time
	controlled bool
	steps      int
	arrivals   int
	fails      int
	lat        []float64
}

var (
	_ peers.Client       = (*Entry)(nil)
	_ peers.LoadObserver = (*Entry)(nil)
)

// NewEntry returns TopFull's entry for a validated copy of cfg.
func NewEntry(cfg Config) (*Entry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Entry{cfg: cfg, apis: make(map[string]*api), util: make(map[string]float64)}, nil
}

// Period returns the interval.
func (e *Entry) Period() time.Duration { return e.cfg.Interval }

// Limit returns an API's limit in req/s (+Inf: none) and whether it is
// controlled.
func (e *Entry) Limit(name string) (float64, bool) {
	a := e.apis[name]
	if a == nil {
		return math.Inf(1), false
	}
	return a.limit, a.controlled
}

func (e *Entry) api(name string) *api {
	a := e.apis[name]
	if a == nil {
		a = &api{name: name, limit: math.Inf(1)}
		e.apis[name] = a
	}
	return a
}

// ObserveLoad records a service's CPU utilization of its quota.
func (e *Entry) ObserveLoad(_ time.Time, service string, utilization float64) {
	e.util[service] = utilization
}

// Send lets the call go if its API's bucket has a token.
func (e *Entry) Send(now time.Time, c *peers.Call) peers.Decision {
	a := e.api(c.Method)
	a.arrivals++
	if math.IsInf(a.limit, 1) {
		return peers.Decision{Verdict: peers.Send, Reason: "no limit"}
	}
	if dt := now.Sub(a.filled).Seconds(); dt > 0 {
		a.tokens = math.Min(a.limit, a.tokens+dt*a.limit)
	}
	a.filled = now
	if a.tokens >= 1 {
		a.tokens--
		return peers.Decision{Verdict: peers.Send, Reason: fmt.Sprintf("within %.4g req/s", a.limit)}
	}
	a.fails++
	return peers.Decision{Verdict: peers.Deny, Reason: fmt.Sprintf("%s above its limit %.4g req/s", c.Method, a.limit)}
}

// Received counts the call's failure or latency.
func (e *Entry) Received(now time.Time, c *peers.Call, _ peers.Metadata, o peers.Outcome) []peers.Release {
	a := e.api(c.Method)
	if o != peers.OK {
		a.fails++
	}
	a.lat = append(a.lat, now.Sub(c.Sent).Seconds())
	return nil
}

// Cancel is a no-op: calls never wait.
func (e *Entry) Cancel(time.Time, *peers.Call) []peers.Release { return nil }

func (e *Entry) overloaded() map[string]bool {
	o := make(map[string]bool)
	for svc, u := range e.util {
		t, ok := e.cfg.Targets[svc]
		if !ok {
			t = e.cfg.Alpha
		}
		if u > t {
			o[svc] = true
		}
	}
	return o
}

// setLimit sets an API's limit (never below min_rate), keeping its
// bucket's tokens within one second of it.
func (e *Entry) setLimit(now time.Time, a *api, limit float64) {
	if !math.IsInf(limit, 1) {
		limit = math.Max(limit, e.cfg.MinRate)
	}
	if math.IsInf(a.limit, 1) {
		a.tokens = limit
	}
	a.limit = limit
	a.tokens = math.Min(a.tokens, limit)
	a.filled = now
}

func (e *Entry) release(now time.Time, a *api) {
	a.controlled, a.steps = false, 0
	e.setLimit(now, a, math.Inf(1))
}

// stat is an API's interval.
type stat struct {
	rate, fail, tail float64 // req/s, req/s, s
}

// Update runs one step of the controller.
func (e *Entry) Update(now time.Time) []peers.Release {
	if !e.on {
		e.on, e.last = true, now
		return nil
	}
	dt := now.Sub(e.last).Seconds()
	e.last = now
	if dt <= 0 {
		return nil
	}
	stats := make(map[string]stat, len(e.apis))
	for name, a := range e.apis {
		stats[name] = stat{rate: float64(a.arrivals) / dt, fail: float64(a.fails) / dt,
			tail: monitor.Percentile(a.lat, e.cfg.Percentile)}
		a.arrivals, a.fails, a.lat = 0, 0, a.lat[:0]
	}
	over := e.overloaded()
	for _, name := range e.names() {
		a := e.apis[name]
		if !a.controlled && stats[name].rate > 0 && e.crosses(name, over) {
			a.controlled, a.steps = true, 0
			e.setLimit(now, a, stats[name].rate)
		}
	}
	for _, g := range e.groups(over) {
		e.step(now, g, stats, over)
	}
	return nil
}

func (e *Entry) names() []string {
	ns := make([]string, 0, len(e.apis))
	for n := range e.apis {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

func (e *Entry) crosses(name string, over map[string]bool) bool {
	for _, s := range e.cfg.Paths[name] {
		if over[s] {
			return true
		}
	}
	return false
}

// groups returns the controlled APIs grouped by the overloaded services
// they share, each group and the groups in name order.
func (e *Entry) groups(over map[string]bool) [][]*api {
	names := e.names()
	parent := make(map[string]string)
	find := func(x string) string {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	bySvc := make(map[string]string)
	for _, n := range names {
		if !e.apis[n].controlled {
			continue
		}
		parent[n] = n
		for _, s := range e.cfg.Paths[n] {
			if !over[s] {
				continue
			}
			if o, ok := bySvc[s]; ok {
				ra, rb := find(o), find(n)
				if ra != rb {
					parent[max(ra, rb)] = min(ra, rb)
				}
			} else {
				bySvc[s] = n
			}
		}
	}
	idx := make(map[string]int)
	var out [][]*api
	for _, n := range names {
		if _, ok := parent[n]; !ok {
			continue
		}
		r := find(n)
		i, ok := idx[r]
		if !ok {
			i = len(out)
			idx[r] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], e.apis[n])
	}
	return out
}

// step is one agent step for group g.
func (e *Entry) step(now time.Time, g []*api, stats map[string]stat, over map[string]bool) {
	clean, ttl := true, false
	tail := 0.0
	for _, a := range g {
		s := stats[a.name]
		if !(s.rate == 0 || (s.fail <= e.cfg.CleanFail*s.rate && a.limit >= s.rate)) {
			clean = false
		}
		if a.steps >= e.cfg.TTL {
			ttl = true
		}
		if !math.IsNaN(s.tail) {
			tail = math.Max(tail, s.tail)
		}
	}
	if clean || ttl {
		for _, a := range g {
			e.release(now, a)
		}
		return
	}
	act := e.cfg.Increase
	if tail > e.cfg.SLO.Seconds() {
		act = -e.cfg.Decrease
	}
	e.apply(now, g, act, stats, over)
	for _, a := range g {
		a.steps++
	}
}

// priority is set_priority's key: lower is cut first.
func (e *Entry) priority(a *api, over map[string]bool) (int, int) {
	share := 100
	for _, s := range e.cfg.Paths[a.name] {
		if !over[s] {
			continue
		}
		n := 0
		for _, p := range e.cfg.Paths {
			if slices.Contains(p, s) {
				n++
			}
		}
		share = min(share, n)
	}
	return share, e.cfg.Business[a.name]
}

// apply moves the amount |act|·Σ target limits across g by priority.
func (e *Entry) apply(now time.Time, g []*api, act float64, stats map[string]stat, over map[string]bool) {
	order := slices.Clone(g)
	key := func(a *api) int { s, b := e.priority(a, over); return s*1000 + b }
	sort.SliceStable(order, func(i, j int) bool { return key(order[i]) < key(order[j]) })
	if act > 0 {
		slices.Reverse(order)
	}
	n := 1
	for n < len(order) && key(order[n]) == key(order[0]) {
		n++
	}
	target := order[:n]
	sum := 0.0
	for _, a := range target {
		sum += a.limit
	}
	left := math.Abs(act) * sum
	newLimit := make(map[*api]float64)
	for _, a := range order {
		newLimit[a] = a.limit
	}
	capOf := func(a *api) float64 {
		if act < 0 {
			return newLimit[a] // most it can lose
		}
		return math.Max(e.cfg.RaiseMargin*stats[a.name].rate-newLimit[a], 0) // most it can gain
	}
	move := func(a *api, x float64) {
		if act < 0 {
			newLimit[a] -= x
		} else {
			newLimit[a] += x
		}
	}
	for active := slices.Clone(target); left > 1e-9 && len(active) > 0; {
		share := left / float64(len(active))
		var keep []*api
		for _, a := range active {
			x := math.Min(share, capOf(a))
			move(a, x)
			left -= x
			if x >= share {
				keep = append(keep, a)
			}
		}
		if len(keep) == len(active) {
			break
		}
		active = keep
	}
	for _, a := range order[n:] {
		if left <= 1e-9 {
			break
		}
		x := math.Min(left, capOf(a))
		move(a, x)
		left -= x
	}
	for _, a := range order {
		if newLimit[a] != a.limit {
			e.setLimit(now, a, newLimit[a])
		}
	}
}

// Peer builds TopFull for a graph: one Entry, the end users' side
// toward the entry service; no other side.
type Peer struct {
	Config Config
	entry  *Entry
}

var _ peers.Peer = (*Peer)(nil)

// Name returns "topfull".
func (p *Peer) Name() string { return "topfull" }

// Server returns none.
func (p *Peer) Server(string, bool) (peers.Server, error) { return nil, nil }

// Client returns the entry (the same one for every end-user client) or
// none.
func (p *Peer) Client(from, _ string) (peers.Client, error) {
	if from != "" {
		return nil, nil
	}
	if p.entry == nil {
		e, err := NewEntry(p.Config)
		if err != nil {
			return nil, err
		}
		p.entry = e
	}
	return p.entry, nil
}
