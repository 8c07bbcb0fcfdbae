// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

const validBase = `
classes:
  order: [gold, silver, bronze]
  trusted_proxies: [10.0.0.0/8]
  rules:
    - class: gold
      header: {name: X-Priority, value: gold}
stages:
  - name: api
    match: {path_prefix: /api/}
    controller: seda
    params: {target: 200ms}
`

func TestValidateNamesPathAndValue(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, path, msg string
	}{
		{"unknown controller", `
stages: [{name: a, controller: sedaa}]`, "stages[0].controller", `"sedaa" (valid: auto, bbr, envoy-gradient, gradient2, kihl, none, seda`},
		{"unknown param key", `
stages: [{name: a, controller: seda, params: {target: 1s, tagret: 2s}}]`, "stages[0].params.tagret", `unknown field "tagret" (valid here: adj_d`},
		{"unknown nested param key", `
stages: [{name: a, controller: seda, params: {target: 1s, degrade: {enabled: true, qmin: 0.2}}}]`, "stages[0].params.degrade.qmin", `unknown field "qmin"`},
		{"bad param type", `
stages: [{name: a, controller: seda, params: {target: fast}}]`, "stages[0].params.target", `"fast"`},
		{"params not a mapping", `
stages: [{name: a, controller: seda, params: [1, 2]}]`, "stages[0].params", "must be a mapping"},
		{"controller validation", `
stages: [{name: a, controller: seda, params: {target: 1s, alpha: 1.5}}]`, "stages[0].params.alpha", "1.5"},
		{"missing seda target", `
stages: [{name: a, controller: seda}]`, "stages[0].params.target", "must be set"},
		{"reserved param", `
stages: [{name: a, controller: seda, params: {target: 1s, classes: 3}}]`, "stages[0].params.classes", "classes.order"},
		{"bad regex", `
stages: [{name: a, match: {path_regex: "^/(api"}}]`, "stages[0].match.path_regex", `"^/(api"`},
		{"path prefix without slash", `
stages: [{name: a, match: {path_prefix: api}}]`, "stages[0].match.path_prefix", `"api"`},
		{"lowercase method", `
stages: [{name: a, match: {methods: [GET, post]}}]`, "stages[0].match.methods[1]", `write "POST"`},
		{"host with port", `
stages: [{name: a, match: {host: "example.com:80"}}]`, "stages[0].match.host", `"example.com:80"`},
		{"duplicate stage", `
stages: [{name: a}, {name: b}, {name: a}]`, "stages[2].name", `"a" is already the name of stages[0]`},
		{"reserved stage name", `
stages: [{name: default}]`, "stages[0].name", "reserved"},
		{"empty stage name", `
stages: [{match: {path_prefix: /}}]`, "stages[0].name", "must be set"},
		{"bad stage name", `
stages: [{name: "a b"}]`, "stages[0].name", `"a b"`},
		{"class_targets unknown class", `
classes: {order: [gold, bronze]}
stages: [{name: a, controller: seda, params: {target: 1s}, class_targets: {silver: 100ms}}]`, "stages[0].class_targets.silver", `"silver" is not a class of classes.order (gold, bronze)`},
		{"class_targets not positive", `
classes: {order: [gold, bronze]}
stages: [{name: a, controller: seda, params: {target: 1s}, class_targets: {gold: -1s}}]`, "stages[0].class_targets.gold", "-1s"},
		{"class_targets on other controller", `
stages: [{name: a, controller: yaksha, class_targets: {default: 1s}}]`, "stages[0].class_targets", "only for the seda controller"},
		{"class_targets without differentiation", `
classes: {order: [gold, bronze]}
stages: [{name: a, controller: seda, differentiate: false, params: {target: 1s}, class_targets: {gold: 1s}}]`, "stages[0].class_targets", "differentiate: true"},
		{"degrade with several classes", `
classes: {order: [gold, bronze]}
stages: [{name: a, controller: seda, params: {target: 1s, degrade: {enabled: true}}}]`, "stages[0].params.degrade.enabled", "differentiate: false"},
		{"window below nreq", `
stages: [{name: a, controller: seda, window: 10, params: {target: 1s, nreq: 50}}]`, "stages[0].window", "nreq (50)"},
		{"negative burst", `
stages: [{name: a, burst: -1}]`, "stages[0].burst", "-1"},
		{"negative long_lived", `
stages: [{name: a, long_lived: -1s}]`, "stages[0].long_lived", "-1s"},
		{"negative queue", `
stages: [{name: a, queue: {max: -2}}]`, "stages[0].queue.max", "-2"},
		{"default class not in order", `
classes: {order: [gold, bronze], default: silver}`, "classes.default", `"silver" is not a class of classes.order (gold, bronze)`},
		{"duplicate class", `
classes: {order: [gold, gold]}`, "classes.order[1]", `"gold" is listed twice`},
		{"rule unknown class", `
classes: {order: [gold], rules: [{class: platinum, cidrs: [1.2.3.4]}]}`, "classes.rules[0].class", `"platinum"`},
		{"rule without condition", `
classes: {order: [gold], rules: [{class: gold}]}`, "classes.rules[0]", "at least one condition"},
		{"bad cidr", `
classes: {order: [gold], rules: [{class: gold, cidrs: [10.0.0.0/8, 300.1.1.1/8]}]}`, "classes.rules[0].cidrs[1]", `"300.1.1.1/8"`},
		{"bad trusted proxy", `
classes: {trusted_proxies: [10.0.0.0/8, "10.0.0.0/40"]}`, "classes.trusted_proxies[1]", `"10.0.0.0/40"`},
		// One rule for host bits everywhere client addresses are set
		// (internal/netprefix): refused, with the masked prefix.
		{"trusted proxy with host bits", `
classes: {trusted_proxies: ["10.1.2.3/8"]}`, "classes.trusted_proxies[0]", `did you mean 10.0.0.0/8?`},
		{"cidr with host bits", `
classes: {order: [gold], rules: [{class: gold, cidrs: ["2001:db8::1/32"]}]}`, "classes.rules[0].cidrs[0]", `did you mean 2001:db8::/32?`},
		{"bad header name", `
classes: {order: [gold], rules: [{class: gold, header: {name: "X Prio"}}]}`, "classes.rules[0].header.name", `"X Prio"`},
		{"bad trust", `
classes: {order: [gold], rules: [{class: gold, cookie: {name: plan, trust: always}}]}`, "classes.rules[0].cookie.trust", `"always"`},
		{"status too low", `
reject: {status: 302}`, "reject.status", "302"},
		{"status too high", `
reject: {status: 600}`, "reject.status", "600"},
		{"negative retry", `
reject: {retry_after: -1s}`, "reject.retry_after", "-1s"},
		{"negative jitter", `
reject: {retry_jitter: -1s}`, "reject.retry_jitter", "-1s"},
		{"ratelimit headers on an adaptive stage", `
stages: [{name: a, controller: seda, params: {target: 100ms}, ratelimit_headers: true}]`, "stages[0].ratelimit_headers", "only for a stage with a fixed quota (controller static-rate), not seda"},
		{"retry max below min", `
reject: {retry_after: 5s, retry_after_max: 2s}`, "reject.retry_after_max", "must be ≥ retry_after"},
		{"bad template", `
reject: {body: "{{.Stage"}`, "reject.body", "unclosed action"},
		{"template field", `
reject: {body: "{{.Nope}}"}`, "reject.body", "Nope"},
		{"bad content type", `
reject: {content_type: "text/"}`, "reject.content_type", `"text/"`},
		{"unknown tenant cost", `
stages: [{name: a, tenants: {fair: true, cost: cpu}}]`, "stages[0].tenants.cost", `"cpu" must be requests, service_time, reported`},
		{"tenant cost without fair queueing", `
stages: [{name: a, tenants: {cost: service_time}}]`, "stages[0].tenants.cost", `"service_time" needs fair: true`},
		{"slot share without fair queueing", `
stages: [{name: a, tenants: {slot_share: true}}]`, "stages[0].tenants.slot_share", `needs fair: true`},
		{"deadline budget without service time", `
stages: [{name: a, tenants: {fair: true, deadline_budget: 1}}]`, "stages[0].tenants.deadline_budget", `needs cost: service_time`},
		{"negative deadline budget", `
stages: [{name: a, tenants: {fair: true, cost: service_time, deadline_budget: -1}}]`, "stages[0].tenants.deadline_budget", `-1 must be`},
		{"path key without fair queueing", `
stages: [{name: a, tenants: {key: path}}]`, "stages[0].tenants.key", `"path" needs fair: true`},
		{"bad degrade header", `
degrade: {header: "X Quality"}`, "degrade.header", `"X Quality"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parse(t, tc.yaml)
			c.SetDefaults()
			err := c.Validate()
			var fe *sluice.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("want a *sluice.FieldError at %s, got %v", tc.path, err)
			}
			if fe.Path != tc.path || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("got %q\nwant path %q with %q", err, tc.path, tc.msg)
			}
			if _, err := New(parse(t, tc.yaml), Options{}); err == nil || err.Error() != fe.Error() {
				t.Fatalf("New: %v, Validate: %v", err, fe)
			}
		})
	}
}

func TestParamsErrorCarriesLine(t *testing.T) {
	c := parse(t, "stages:\n  - name: a\n    controller: seda\n    params:\n      target: 1s\n      bogus: 3\n")
	c.SetDefaults()
	var fe *sluice.FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Line != 6 {
		t.Fatalf("error %v, want line 6", err)
	}
}

func TestDefaultsValidateAndAreDocumented(t *testing.T) {
	var c Config
	c.Stages = []StageConfig{{Name: "s"}}
	c.Classes.Rules = []ClassRule{{Class: "default", Header: &HeaderMatch{Name: "X-A"}}}
	if err := c.Validate(); err == nil {
		t.Fatal("an undefaulted config validated")
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.Stages[0]
	if c.Classes.Default != "default" || s.Controller != "auto" || s.Burst != 5 || s.Window != 4096 ||
		s.Queue.Max != 1024 || s.Queue.Timeout != time.Second || s.LongLived != 30*time.Second ||
		!*s.Differentiate || c.Reject.Status != 503 || c.Reject.RetryAfter != time.Second ||
		c.Degrade.Header != "X-Sluice-Quality" || c.Classes.Rules[0].Header.Trust != "trusted" {
		t.Fatalf("defaults: %+v", c)
	}
	before := parse(t, validBase)
	if _, err := New(before, Options{}); err != nil {
		t.Fatal(err)
	}
	if before.Stages[0].Burst != 0 || before.Reject.Status != 0 {
		t.Fatal("New modified its argument")
	}
}

func TestNewBuildsStages(t *testing.T) {
	p := build(t, `
classes: {order: [gold, silver, bronze]}
stages:
  - name: diff
    controller: seda
    params: {target: 200ms, nreq: 10}
    class_targets: {gold: 100ms}
  - name: shared
    controller: seda
    differentiate: false
    params: {target: 200ms}
  - name: conc
    controller: static-concurrency
    params: {limit: 3}
    queue: {max: 2, timeout: 50ms}
`, Options{Now: t0})
	if len(p.Stages()) != 4 || p.Stages()[3].Name() != ImplicitStage {
		t.Fatalf("stages: %v", p.Stages())
	}
	diff := p.Stage("diff").State(0)
	if len(diff.ClassRates) != 3 {
		t.Fatalf("differentiated stage has class rates %v", diff.ClassRates)
	}
	seda := p.Stage("diff").Controller().Unwrap().(*control.SEDA)
	_ = seda
	if shared := p.Stage("shared").State(0); len(shared.ClassRates) != 0 || len(shared.Classes) != 3 {
		t.Fatalf("shared stage: %+v", shared)
	}
	conc := p.Stage("conc").State(0)
	if conc.InFlightLimited == nil || conc.InFlightLimited.Limit != 3 {
		t.Fatalf("concurrency stage: %+v", conc)
	}
	if p.Stage("nope") != nil || p.LongLived(p.Stage("conc")) != 30*time.Second {
		t.Fatal("Stage/LongLived")
	}
	if p.DegradeHeader() != "X-Sluice-Quality" {
		t.Fatal(p.DegradeHeader())
	}
}

// Anchors, aliases and merge keys work in params, with the mapping's own
// keys overriding merged ones; unknown keys are caught inside merges too.
func TestParamsAliasesAndMerges(t *testing.T) {
	p := build(t, `
stages:
  - name: a
    controller: seda
    params: &common {target: 300ms, nreq: 10}
  - name: b
    controller: seda
    params:
      <<: *common
      target: 900ms
`, Options{})
	if got := p.Stage("a").State(0).Target; got != "300ms" {
		t.Fatalf("alias: target %s", got)
	}
	if got := p.Stage("b").State(0).Target; got != "900ms" {
		t.Fatalf("merge: target %s", got)
	}
	c := parse(t, `
stages:
  - {name: a, controller: seda, params: &bad {target: 1s, bogus: 1}}
  - {name: b, controller: seda, params: {<<: *bad}}
`)
	c.SetDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "stages[0].params.bogus") {
		t.Fatalf("got %v", err)
	}
}
