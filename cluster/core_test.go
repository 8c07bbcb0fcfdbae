// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// memRedis keeps heartbeats the way the Redis script does: one entry per
// instance with its expiry (server time = the now of the exchange),
// expired entries dropped, every live one returned. It is the virtual-time
// stand-in for Redis in these tests of the deterministic core; the runner's
// tests use a real redis-server.
type memRedis struct {
	ttl  time.Duration
	down bool
	m    map[string]Peer
}

func (r *memRedis) exchange(now time.Time, rep Report) (Exchange, error) {
	if r.down {
		return Exchange{}, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	if r.m == nil {
		r.m = map[string]Peer{}
	}
	r.m[rep.Instance] = Peer{Report: rep, Expires: now.Add(r.ttl)}
	x := Exchange{ServerTime: now}
	for id, p := range r.m {
		if !p.Expires.After(now) {
			delete(r.m, id)
			continue
		}
		x.Peers = append(x.Peers, p)
	}
	sort.Slice(x.Peers, func(i, j int) bool { return x.Peers[i].Report.Instance < x.Peers[j].Report.Instance })
	return x, nil
}

// node is one simulated instance: a core and a stage's cumulative
// counts, fed a constant offered rate.
type node struct {
	core    *Core
	rate    float64 // offered req/s
	offered float64
	last    Assignment
}

// threeNodes returns instances a, b and c offered ra, rb and rc req/s,
// each with a fresh Core.
func threeNodes(ra, rb, rc float64) (a, b, c *node) {
	n := func(id string, rate float64) *node { return &node{rate: rate, core: NewCore(testConfig(id), nil)} }
	return n("a", ra), n("b", rb), n("c", rc)
}

func testConfig(id string) Config {
	c := Config{Addrs: []string{"127.0.0.1:6379"}, Instance: id}
	c.SetDefaults()
	return c
}

func (n *node) local(global float64, kind sluice.Kind) Local {
	return Local{Stages: []LocalStage{{Name: "api", Kind: kind, Global: global, Offered: uint64(n.offered), Admitted: uint64(n.offered)}}}
}

// step advances one period for every node in order: counts grow by
// rate·period, each publishes and plans.
func step(t *testing.T, r *memRedis, now time.Time, period time.Duration, global float64, kind sluice.Kind, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		n.offered += n.rate * period.Seconds()
		rep := n.core.Report(now, n.local(global, kind))
		x, err := r.exchange(now, rep)
		n.last = n.core.Plan(now, x, err)
	}
}

func part(a Assignment) float64 {
	if len(a.Stages) != 1 {
		return math.NaN()
	}
	return a.Stages[0].Part
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// split: FloorFraction of the budget evenly, the rest by demand.
func TestSplit(t *testing.T) {
	for _, c := range []struct {
		name string
		g    float64
		w    []float64
		want []float64
	}{
		// m = 0.02·300/3 = 2; rest 294 by 60/30/10 %.
		{"uneven", 300, []float64{360, 180, 60}, []float64{2 + 294*0.6, 2 + 294*0.3, 2 + 294*0.1}},
		{"no demand", 300, []float64{0, 0, 0}, []float64{100, 100, 100}},
		{"one idle", 300, []float64{100, 0}, []float64{3 + 294, 3}},
		{"negative is 0", 100, []float64{-5, 10}, []float64{1, 99}},
		{"alone", 50, []float64{7}, []float64{50}},
	} {
		ms := make([]member, len(c.w))
		for i, w := range c.w {
			ms[i] = member{id: string(rune('a' + i)), w: w}
		}
		got := split(c.g, ms)
		sum := 0.0
		for i := range got {
			sum += got[i]
			if !near(got[i], c.want[i], 1e-9) {
				t.Errorf("%s: part %d = %g, want %g", c.name, i, got[i], c.want[i])
			}
		}
		if !near(sum, c.g, 1e-9) {
			t.Errorf("%s: parts sum to %g, want %g", c.name, sum, c.g)
		}
	}
}

// Whole parts of a concurrency budget sum to it, each at least 1.
func TestWholeParts(t *testing.T) {
	for _, c := range []struct {
		g     float64
		parts []float64
		want  []float64
	}{
		{10, []float64{5.9, 3.0, 1.1}, []float64{6, 3, 1}},
		{10, []float64{3.4, 3.3, 3.3}, []float64{4, 3, 3}},
		{2, []float64{1.9, 0.05, 0.05}, []float64{1, 1, 1}}, // fewer slots than instances: 1 each
		{7, []float64{0.1, 6.9}, []float64{1, 6}},
	} {
		got := wholeParts(c.g, c.parts)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("wholeParts(%g, %v) = %v, want %v", c.g, c.parts, got, c.want)
				break
			}
		}
	}
}

// Three instances with 60/30/10 % of the traffic split a global rate of
// 300 req/s by their demand: the parts sum to 300 and follow the
// traffic, with FloorFraction evenly.
func TestUnevenDemandSplitsTheRate(t *testing.T) {
	r := &memRedis{ttl: 3 * time.Second}
	a, b, c := threeNodes(360, 180, 60)
	for _, n := range []struct {
		n  *node
		id string
	}{{a, "a"}, {b, "b"}, {c, "c"}} {
		if p := part(n.n.core.Prime(n.n.local(300, sluice.KindRate))); p != 300 {
			t.Fatalf("%s primed with %g, want the whole 300 (initial_instances 1)", n.id, p)
		}
	}
	for k := range 5 {
		step(t, r, t0.Add(time.Duration(k)*time.Second), time.Second, 300, sluice.KindRate, a, b, c)
	}
	want := []float64{2 + 294*0.6, 2 + 294*0.3, 2 + 294*0.1}
	sum := 0.0
	for i, n := range []*node{a, b, c} {
		p := part(n.last)
		sum += p
		if n.last.Mode != ModeSynced || n.last.Instances != 3 {
			t.Fatalf("node %d: %v", i, n.last)
		}
		if !near(p, want[i], 1e-6) {
			t.Errorf("node %d part %g, want %g", i, p, want[i])
		}
	}
	if !near(sum, 300, 1e-6) {
		t.Fatalf("parts sum to %g", sum)
	}
	v := a.core.View()
	if v.Instances != 3 || len(v.Live) != 3 || len(v.Budgets) != 1 || !near(v.Budgets[0].ClusterParts, 300, 1e-6) ||
		v.Budgets[0].ClusterDemand != 600 {
		t.Fatalf("view %+v", v)
	}
	if !strings.Contains(a.last.Stages[0].Reason, "3 instances") {
		t.Fatalf("reason %q", a.last.Stages[0].Reason)
	}
}

// Redis down: the next sync falls back to 1/N of the budget with the
// last N, says why, and the first sync after Redis returns splits by
// demand again.
func TestFallbackAndResync(t *testing.T) {
	r := &memRedis{ttl: 3 * time.Second}
	a, b, c := threeNodes(360, 180, 60)
	now := t0
	for range 3 {
		step(t, r, now, time.Second, 300, sluice.KindRate, a, b, c)
		now = now.Add(time.Second)
	}
	r.down = true
	step(t, r, now, time.Second, 300, sluice.KindRate, a, b, c)
	for _, n := range []*node{a, b, c} {
		if n.last.Mode != ModeFallback || !n.last.Changed || part(n.last) != 100 || n.last.Instances != 3 {
			t.Fatalf("fallback: %+v", n.last)
		}
		if !strings.Contains(n.last.Reason, "connection refused") {
			t.Fatalf("reason %q", n.last.Reason)
		}
	}
	// Ten seconds down: longer than the heartbeat TTL. Redis comes back
	// empty (its data lost); a, resyncing first, must not take the whole
	// budget while b and c have not re-registered yet.
	for range 10 {
		now = now.Add(time.Second)
		step(t, r, now, time.Second, 300, sluice.KindRate, a, b, c)
	}
	if v := a.core.View(); v.Mode != ModeFallback || v.Failures != 11 || v.LastError == "" {
		t.Fatalf("view during the outage: %+v", v)
	}
	r.down, r.m = false, nil
	now = now.Add(time.Second)
	a.offered += a.rate
	x, err := r.exchange(now, a.core.Report(now, a.local(300, sluice.KindRate)))
	first := a.core.Plan(now, x, err)
	if first.Mode != ModeSynced || !first.Changed || first.Instances != 3 {
		t.Fatalf("rejoin: %+v", first)
	}
	if p := part(first); !near(p, 2+294*0.6, 1e-6) {
		t.Fatalf("a's part on rejoin %g: b and c must keep counting with their last demand", p)
	}
	b.offered += b.rate
	c.offered += c.rate
	for _, n := range []*node{b, c} {
		x, err := r.exchange(now, n.core.Report(now, n.local(300, sluice.KindRate)))
		n.last = n.core.Plan(now, x, err)
	}
	now = now.Add(time.Second)
	step(t, r, now, time.Second, 300, sluice.KindRate, a, b, c)
	sum := part(a.last) + part(b.last) + part(c.last)
	if !near(sum, 300, 1e-6) || a.last.Mode != ModeSynced {
		t.Fatalf("after resync: parts sum to %g, %+v", sum, a.last)
	}
}

// An instance that dies counts until its heartbeat expires; the next
// sync after that splits the whole budget among the others.
func TestDeadInstanceExpires(t *testing.T) {
	ttl := 3 * time.Second
	r := &memRedis{ttl: ttl}
	a, b, c := threeNodes(200, 200, 200)
	now := t0
	for range 4 {
		step(t, r, now, time.Second, 300, sluice.KindRate, a, b, c)
		now = now.Add(time.Second)
	}
	died := now.Add(-time.Second) // c's last heartbeat
	// c dies; its traffic moves to a and b (300 req/s each).
	a.rate, b.rate = 300, 300
	for now.Before(died.Add(ttl)) {
		step(t, r, now, time.Second, 300, sluice.KindRate, a, b)
		if a.last.Instances != 3 {
			t.Fatalf("c stopped counting at %v, before its heartbeat expired at %v", now.Sub(t0), died.Add(ttl).Sub(t0))
		}
		now = now.Add(time.Second)
	}
	// The first sync after the expiry splits the whole budget between a
	// and b; their demands, still rising after c's traffic moved to them,
	// are one sync apart (b's as of its last report), so the sum is off by
	// a little, and converges.
	step(t, r, now, time.Second, 300, sluice.KindRate, a, b)
	if a.last.Instances != 2 || !near(part(a.last)+part(b.last), 300, 0.03*300) {
		t.Fatalf("after expiry: %v / %v", a.last, b.last)
	}
	for range 10 {
		now = now.Add(time.Second)
		step(t, r, now, time.Second, 300, sluice.KindRate, a, b)
	}
	if !near(part(a.last)+part(b.last), 300, 0.001*300) {
		t.Fatalf("ten syncs after expiry: %v / %v", a.last, b.last)
	}
}

// An instance that starts alone with initial_instances 3 takes a third
// of the budget before its first sync and during the first TTL after it.
func TestInitialInstances(t *testing.T) {
	cfg := testConfig("a")
	cfg.InitialInstances = 3
	r := &memRedis{ttl: cfg.HeartbeatTTL}
	a := &node{rate: 100, core: NewCore(cfg, nil)}
	if p := part(a.core.Prime(a.local(300, sluice.KindRate))); p != 100 {
		t.Fatalf("primed %g, want 100", p)
	}
	step(t, r, t0, time.Second, 300, sluice.KindRate, a)
	if a.last.Instances != 3 || !near(part(a.last), 100, 1e-9) {
		t.Fatalf("first sync alone: %v", a.last)
	}
	if v := a.core.View(); v.Unseen != 2 {
		t.Fatalf("view %+v", v)
	}
	step(t, r, t0.Add(cfg.HeartbeatTTL), time.Second, 300, sluice.KindRate, a)
	if a.last.Instances != 1 || part(a.last) != 300 {
		t.Fatalf("after the first TTL, alone: %v", a.last)
	}
}

// A concurrency budget is split into whole parts that sum to it.
func TestConcurrencyParts(t *testing.T) {
	r := &memRedis{ttl: 3 * time.Second}
	a, b, c := threeNodes(500, 300, 200)
	for k := range 3 {
		step(t, r, t0.Add(time.Duration(k)*time.Second), time.Second, 20, sluice.KindConcurrency, a, b, c)
	}
	pa, pb, pc := part(a.last), part(b.last), part(c.last)
	if pa+pb+pc != 20 || pa != 10 || pb != 6 || pc != 4 {
		t.Fatalf("parts %g %g %g, want 10 6 4", pa, pb, pc)
	}
	r.down = true
	step(t, r, t0.Add(3*time.Second), time.Second, 20, sluice.KindConcurrency, a)
	if part(a.last) != 6 {
		t.Fatalf("fallback part %g, want ⌊20/3⌋ = 6", part(a.last))
	}
}

// Client shares: each client's allocation is split by where its
// requests arrive; an instance's B is the sum of its parts, and the
// instances' B add up to the cluster's.
func TestSharesSplitByClientDemand(t *testing.T) {
	r := &memRedis{ttl: 3 * time.Second}
	type sn struct {
		core *Core
		arr  []float64 // per client req/s: a, b, others
		cum  []float64
		last Assignment
	}
	mk := func(id string, arr ...float64) *sn {
		return &sn{core: NewCore(testConfig(id), nil), arr: arr, cum: make([]float64, len(arr))}
	}
	// Client a sends only to x; b round-robin; others nowhere.
	x, y, z := mk("x", 6, 2, 0), mk("y", 0, 2, 0), mk("z", 0, 2, 0)
	local := func(n *sn) Local {
		ls := &LocalShares{Total: 1000}
		for i, name := range []string{"a", "b", "others"} {
			share := []float64{40, 50, 10}[i]
			ls.Clients = append(ls.Clients, LocalClient{Name: name, Share: share, Arrivals: uint64(n.cum[i])})
		}
		return Local{Shares: ls}
	}
	for k := range 4 {
		now := t0.Add(time.Duration(k) * time.Second)
		for _, n := range []*sn{x, y, z} {
			for i := range n.arr {
				n.cum[i] += n.arr[i]
			}
			ex, err := r.exchange(now, n.core.Report(now, local(n)))
			n.last = n.core.Plan(now, ex, err)
		}
	}
	// a: b_a = 400; m = 0.02·400/3; x has all of a's demand.
	m := 0.02 * 400 / 3
	if got := x.last.Shares.Alloc[0]; !near(got, m+(400-3*m), 1e-6) {
		t.Fatalf("a's part at x = %g", got)
	}
	if got := y.last.Shares.Alloc[0]; !near(got, m, 1e-6) {
		t.Fatalf("a's part at y = %g, want the floor %g", got, m)
	}
	total := 0.0
	for _, n := range []*sn{x, y, z} {
		if !near(n.last.Shares.Alloc[1], 500.0/3, 1e-6) || !near(n.last.Shares.Alloc[2], 100.0/3, 1e-6) {
			t.Fatalf("b and others at %s: %v", n.core.self, n.last.Shares.Alloc)
		}
		sum := 0.0
		for _, v := range n.last.Shares.Alloc {
			sum += v
		}
		if !near(sum, n.last.Shares.Total, 1e-9) {
			t.Fatalf("B part %g is not the sum of the parts %g", n.last.Shares.Total, sum)
		}
		total += n.last.Shares.Total
	}
	if !near(total, 1000, 1e-6) {
		t.Fatalf("the instances' B sum to %g, want 1000", total)
	}
	// a sends only to x: held active there, not elsewhere; b everywhere;
	// others nowhere.
	if h := x.last.Shares.Held; len(h) != 3 || !h[0] || !h[1] || h[2] {
		t.Fatalf("held at x: %v", h)
	}
	if h := y.last.Shares.Held; h[0] || !h[1] || h[2] {
		t.Fatalf("held at y: %v", h)
	}
	v := x.core.View()
	if v.Shares == nil || !near(v.Shares.Clients[0].ClusterDemand, 6, 1e-6) || !near(v.Shares.Clients[1].ClusterDemand, 6, 1e-6) {
		t.Fatalf("view %+v", v.Shares)
	}
	r.down = true
	ex, err := r.exchange(t0, Report{})
	fb := x.core.Plan(t0.Add(5*time.Second), ex, err)
	if fb.Mode != ModeFallback || !near(fb.Shares.Total, 1000.0/3, 1e-9) || !near(fb.Shares.Alloc[0], 400.0/3, 1e-9) || fb.Shares.Held != nil {
		t.Fatalf("shares fallback %+v", fb.Shares)
	}
}

// A reload keeps what the core knew: N, the mode and the peers.
func TestNewCoreCarriesState(t *testing.T) {
	r, a, b := twoNodes()
	step(t, r, t0, time.Second, 300, sluice.KindRate, a, b)
	step(t, r, t0.Add(time.Second), time.Second, 300, sluice.KindRate, a, b)
	r.down = true
	step(t, r, t0.Add(2*time.Second), time.Second, 300, sluice.KindRate, a)
	next := NewCore(testConfig("a"), a.core)
	p := next.Prime(a.local(300, sluice.KindRate))
	if p.Mode != ModeFallback || p.Instances != 2 || part(p) != 150 {
		t.Fatalf("after reload: %+v", p)
	}
	other := NewCore(testConfig("renamed"), a.core)
	if p := other.Prime(a.local(300, sluice.KindRate)); p.Mode != ModeStarting || p.Instances != 1 {
		t.Fatalf("a new instance id starts afresh: %+v", p)
	}
}

// twoNodes returns a Redis whose heartbeats live 3 s and two instances,
// "a" and "b", each offered 100 req/s.
func twoNodes() (*memRedis, *node, *node) {
	a, b := &node{rate: 100}, &node{rate: 100}
	a.core, b.core = NewCore(testConfig("a"), nil), NewCore(testConfig("b"), nil)
	return &memRedis{ttl: 3 * time.Second}, a, b
}

// Instances configured with different budgets each split their own, and
// the view says so.
func TestMismatchWarning(t *testing.T) {
	r, a, b := twoNodes()
	for k := range 2 {
		now := t0.Add(time.Duration(k) * time.Second)
		a.offered += 100
		x, err := r.exchange(now, a.core.Report(now, a.local(300, sluice.KindRate)))
		a.last = a.core.Plan(now, x, err)
		b.offered += 100
		x, err = r.exchange(now, b.core.Report(now, b.local(600, sluice.KindRate)))
		b.last = b.core.Plan(now, x, err)
	}
	if w := a.core.View().Warnings; len(w) != 1 || !strings.Contains(w[0], "instance b has a global rate of 600") {
		t.Fatalf("warnings %q", w)
	}
}

// An instance that shuts down says so: the others stop counting it at
// their next sync, before its heartbeat would expire.
func TestLeaveStopsCountingAtOnce(t *testing.T) {
	r, a, b := twoNodes()
	for k := range 2 {
		step(t, r, t0.Add(time.Duration(k)*time.Second), time.Second, 300, sluice.KindRate, a, b)
	}
	if a.last.Instances != 2 {
		t.Fatalf("%v", a.last)
	}
	bye := b.core.Last()
	bye.Mode = ModeLeft
	if _, err := r.exchange(t0.Add(2*time.Second), bye); err != nil {
		t.Fatal(err)
	}
	step(t, r, t0.Add(2*time.Second+100*time.Millisecond), 100*time.Millisecond, 300, sluice.KindRate, a)
	if a.last.Instances != 1 || part(a.last) != 300 {
		t.Fatalf("after b left: %v", a.last)
	}
}
