// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stage"
)

const hopPolicy = `
classes:
  order: [gold, silver, bronze]
  trusted_proxies: [10.0.0.0/8]
stages:
  - {name: api, match: {path_prefix: /api/}, controller: static-concurrency, params: {limit: 1000}}
`

func TestHopsDefaults(t *testing.T) {
	c := parse(t, hopPolicy+"  - {name: s, controller: seda, params: {target: 1s}}\n")
	c.SetDefaults()
	h := c.Hops
	if h.PriorityHeader != sluice.PriorityHeader || h.TenantHeader != sluice.TenantHeader || h.TimeoutHeader != sluice.TimeoutHeader ||
		h.MinTimeout != 0 || h.MaxTimeout != DefaultMaxTimeout {
		t.Errorf("hops defaults %+v", h)
	}
	if s := c.Stages[0].Priority; s.Shed == nil || !*s.Shed || s.Reserve != DefaultReserve {
		t.Errorf("static-concurrency priority %+v", s)
	}
	if s := c.Stages[1].Priority; s.Shed == nil || *s.Shed {
		t.Errorf("seda priority %+v: the paper's law by default", s)
	}
}

func TestHopsValidate(t *testing.T) {
	for _, tc := range []struct{ yaml, path, msg string }{
		{hopPolicy + "hops: {priority_header: 'bad header'}", "hops.priority_header", "not a valid header name"},
		{hopPolicy + "hops: {tenant_header: X-Sluice-Priority}", "hops.tenant_header", "already hops.priority_header"},
		{hopPolicy + "hops: {timeout_header: x-sluice-quality}", "hops.timeout_header", "already degrade.header"},
		{hopPolicy + "hops: {min_timeout: -1s}", "hops.min_timeout", "≥ 0"},
		{hopPolicy + "hops: {min_timeout: 2m, max_timeout: 1m}", "hops.max_timeout", "≥ hops.min_timeout"},
		{hopPolicy + "  - {name: r, controller: none, priority: {reserve: 1}}", "stages[1].priority.reserve", "(0, 1)"},
		{hopPolicy + "  - {name: r, controller: none, priority: {reserve: -0.5}}", "stages[1].priority.reserve", "(0, 1)"},
		{hopPolicy + "  - {name: s, controller: seda, params: {target: 1s}, priority: {shed: true}}", "stages[1].priority.shed", "paper's class law"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {fair: true, weights: {acme: 0}}}", "stages[1].tenants.weights.acme", "> 0"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {fair: true, default_weight: -1}}", "stages[1].tenants.default_weight", "> 0"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {weights: {acme: 2}}}", "stages[1].tenants.weights", "need fair: true"},
		{hopPolicy + "  - {name: t, controller: seda, params: {target: 1s}, tenants: {fair: true}}", "stages[1].tenants", "concurrency limit"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {fair: true, key: ip}}", "stages[1].tenants.key", "hop, client, client-cert, path or header:<Name>"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {fair: true, key: 'header:'}}", "stages[1].tenants.key", "hop, client, client-cert, path or header:<Name>"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {fair: true, key: 'header:X Customer'}}", "stages[1].tenants.key", "hop, client, client-cert, path or header:<Name>"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {key: client}}", "stages[1].tenants.key", "needs fair: true"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {fair: true, key: client, ipv4_prefix: 33}}", "stages[1].tenants.ipv4_prefix", "[1, 32]"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {fair: true, key: client, ipv6_prefix: -1}}", "stages[1].tenants.ipv6_prefix", "[1, 128]"},
		{hopPolicy + "  - {name: t, controller: auto, tenants: {fair: true, ipv4_prefix: 24}}", "stages[1].tenants.key", "need key: client"},
	} {
		c := parse(t, tc.yaml)
		c.SetDefaults()
		err := c.Validate()
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Path != tc.path || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want %s: …%s…", tc.path, err, tc.path, tc.msg)
		}
	}
	// seda sharing one bucket may shed by priority.
	c := parse(t, hopPolicy+"  - {name: s, controller: seda, differentiate: false, params: {target: 1s}, priority: {shed: true}}")
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// 10,000 requests from a peer that is not a trusted proxy, each claiming
// a higher priority and a tenant in every spelling the hop understands:
// none is honoured. Every one is classified as if it had no header (the
// default class, which travels on as no priority), carries no tenant on,
// and is counted as untrusted.
func TestHopsSpoofedPriorityIgnored(t *testing.T) {
	p := build(t, hopPolicy, Options{})
	rng := rand.New(rand.NewPCG(11, 12))
	spellings := []string{"gold", "silver", sluice.CriticalPlus, sluice.Critical, "critical_plus", "GOLD", "gold, gold"}
	const n = 10000
	for i := range n {
		remote := fmt.Sprintf("192.0.%d.%d:%d", rng.IntN(256), rng.IntN(256), 1024+rng.IntN(60000))
		if i%2 == 1 {
			remote = fmt.Sprintf("[2001:db8::%x]:443", rng.IntN(1<<16))
		}
		r := request("GET", "/api/x", remote, sluice.PriorityHeader, spellings[rng.IntN(len(spellings))],
			sluice.TenantHeader, "spoof", "X-Forwarded-For", "10.0.0.1")
		cr := p.ClassifyRequest(r, t0)
		if cr.Class != 2 || cr.Hop != (sluice.Hop{}) {
			t.Fatalf("request %d from %s: class %d, hop %+v", i, remote, cr.Class, cr.Hop)
		}
		a, err := p.Admit(r)
		if err != nil {
			t.Fatal(err)
		}
		if ctx := a.(sluice.RequestContext).Context(); ctx != nil {
			t.Fatalf("request %d: handler context carries %+v", i, sluice.HopFrom(ctx))
		}
		a.Done(sluice.Success)
	}
	p.Step(time.Now().Add(time.Hour))
	st := p.Stage("api")
	if gold, silver, bronze := st.Totals(0), st.Totals(1), st.Totals(2); gold.Offered != 0 || silver.Offered != 0 || bronze.Offered != n {
		t.Fatalf("offered gold %d silver %d bronze %d: a spoofed priority was honoured", gold.Offered, silver.Offered, bronze.Offered)
	}
	want := fmt.Sprintf(`
# HELP sluice_hop_untrusted_total Priority and tenant headers sent by a peer that is not a trusted proxy, and ignored.
# TYPE sluice_hop_untrusted_total counter
sluice_hop_untrusted_total{header="priority"} %d
sluice_hop_untrusted_total{header="tenant"} %d
sluice_hop_untrusted_total{header="timeout"} 0
`, 2*n, 2*n) // ClassifyRequest and Admit each read every request
	if err := testutil.CollectAndCompare(p.Collector(), strings.NewReader(want), "sluice_hop_untrusted_total"); err != nil {
		t.Fatal(err)
	}
	// From a trusted proxy the same header is believed.
	cr := p.ClassifyRequest(request("GET", "/api/x", "10.1.1.1:1", sluice.PriorityHeader, "gold", sluice.TenantHeader, "acme"), t0)
	if cr.Class != 0 || cr.Hop != (sluice.Hop{Priority: "gold", Tenant: "acme"}) {
		t.Fatalf("trusted: class %d hop %+v", cr.Class, cr.Hop)
	}
}

// Malformed values are treated as absent and counted by header; huge or
// negative timeouts are clamped; counters survive a reload.
func TestHopsInvalidCountedAndClamped(t *testing.T) {
	p := build(t, hopPolicy+"hops: {max_timeout: 30s}\n", Options{})
	for _, h := range [][]string{
		{sluice.PriorityHeader, "platinum"},
		{sluice.PriorityHeader, "gold\x00"},
		{sluice.TenantHeader, "two words"},
		{sluice.TimeoutHeader, "1.5S"},
		{sluice.TimeoutHeader, "5s"},
		{sluice.TimeoutHeader, "1S", sluice.TimeoutHeader, "2S"},
	} {
		cr := p.ClassifyRequest(request("GET", "/api/x", "10.0.0.1:1", h...), t0)
		if cr.Class != 2 || cr.Hop.Tenant != "" || !cr.Deadline.IsZero() {
			t.Errorf("%q: %+v", h, cr)
		}
	}
	for _, c := range []struct {
		v    string
		want time.Duration
	}{{"99999999H", 30 * time.Second}, {"-3S", 0}, {"250m", 250 * time.Millisecond}} {
		cr := p.ClassifyRequest(request("GET", "/api/x", "192.0.2.1:1", sluice.TimeoutHeader, c.v), t0)
		if cr.Deadline != t0.Add(c.want) {
			t.Errorf("timeout %s: deadline %v, want now + %v", c.v, cr.Deadline.Sub(t0), c.want)
		}
	}
	next, err := New(p.Config(), Options{Previous: p})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP sluice_hop_invalid_total Hop headers (priority, tenant, timeout) that were malformed and treated as absent.
# TYPE sluice_hop_invalid_total counter
sluice_hop_invalid_total{header="priority"} 2
sluice_hop_invalid_total{header="tenant"} 1
sluice_hop_invalid_total{header="timeout"} 3
`
	if err := testutil.CollectAndCompare(next.Collector(), strings.NewReader(want), "sluice_hop_invalid_total"); err != nil {
		t.Fatal(err)
	}
}

// The timeout header is the request's deadline: a request whose time has
// run out is rejected as a deadline rejection; an admitted one's handler
// context has the deadline and the hop.
func TestHopsDeadlineAtAdmission(t *testing.T) {
	p := build(t, hopPolicy, Options{})
	_, err := p.Admit(request("GET", "/api/x", "192.0.2.1:1", sluice.TimeoutHeader, "0n"))
	if !errors.Is(err, stage.ErrDeadline) || !Is(err) {
		t.Fatalf("0n: %v", err)
	}
	if got := p.Stage("api").Totals(2).Deadline; got != 1 {
		t.Fatalf("deadline rejections %d", got)
	}
	before := time.Now()
	a, err := p.Admit(request("GET", "/api/x", "10.0.0.1:1", sluice.TimeoutHeader, "2S", sluice.PriorityHeader, "silver", sluice.TenantHeader, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := a.(sluice.RequestContext).Context()
	dl, ok := ctx.Deadline()
	if !ok || dl.Before(before.Add(2*time.Second)) || dl.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("handler deadline %v, %v", dl, ok)
	}
	if h := sluice.HopFrom(ctx); h != (sluice.Hop{Priority: "silver", Tenant: "acme"}) {
		t.Fatalf("hop %+v", h)
	}
	a.Done(sluice.Success)
	if ctx.Err() == nil {
		t.Fatal("the deadline's context outlived Done")
	}
	// The default class, no header: nothing to carry, no context of its
	// own; another class travels on by name.
	cr := p.ClassifyRequest(request("GET", "/api/x", "10.0.0.1:1", sluice.PriorityHeader, "SHEDDABLE_PLUS"), t0)
	if cr.Hop.Priority != "SHEDDABLE_PLUS" {
		t.Fatalf("a believed criticality travels on as %q", cr.Hop.Priority)
	}
	pr := build(t, strings.Replace(hopPolicy, "trusted_proxies:", "rules: [{class: silver, header: {name: X-Plan, value: pro, trust: any}}]\n  trusted_proxies:", 1), Options{})
	if cr := pr.ClassifyRequest(request("GET", "/api/x", "192.0.2.1:1", "X-Plan", "pro"), t0); cr.Hop.Priority != "silver" {
		t.Fatalf("a class from the rules travels on as %q", cr.Hop.Priority)
	}
	p1 := build(t, "stages: [{name: api, controller: none}]", Options{})
	a, err = p1.Admit(request("GET", "/", "192.0.2.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	if ctx := a.(sluice.RequestContext).Context(); ctx != nil {
		t.Fatalf("a context without a hop: %v", ctx)
	}
	a.Done(sluice.Success)
}
