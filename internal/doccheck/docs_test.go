// SPDX-License-Identifier: Apache-2.0

package doccheck_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/internal/doccheck"
	"github.com/sluicehq/sluice/proxy"
)

// A section's rule is built from a context by heading; sections absent
// from these maps may state no default.

// configRules returns the contexts of docs/config.md's sections.
func configRules() map[string]*doccheck.Rule {
	bare := proxyConfig()
	cond := func(mods ...func(*proxy.Config)) reflect.Value { return v(proxyConfig(mods...)) }
	global := func() *doccheck.Context { return &doccheck.Context{Root: v(bare)} }
	section := func(prefix string) *doccheck.Context {
		return &doccheck.Context{Root: v(bare), Prefix: prefix}
	}
	self := func(key string) *doccheck.Context { return &doccheck.Context{Root: v(bare), Self: key} }
	types := goTypes()
	derived := func(pkg, name, field string) doccheck.Derived {
		for _, gt := range types {
			if gt.pkg == pkg && gt.name == name {
				return gt.ctx.Derived[field]
			}
		}
		panic("no derived default " + pkg + "." + name + "." + field)
	}
	withPhrase := func(d doccheck.Derived, phrase string) doccheck.Derived { d.Phrase = phrase; return d }

	// The tls sections' defaults, filled when the sections are present.
	withTLS := cond(func(c *proxy.Config) {
		c.Listeners[0].TLS, c.Backends.TLS, c.Cluster.TLS = &proxy.TLSConfig{}, &proxy.UpstreamTLSConfig{}, &cluster.TLSConfig{}
	})
	tlsRoots := func(ctx *doccheck.Context, prefix string, keys ...string) {
		if ctx.Roots == nil {
			ctx.Roots = map[string]reflect.Value{}
		}
		for _, k := range keys {
			ctx.Roots[prefix+k] = withTLS
		}
	}

	admin := section("admin.")
	admin.Extra = map[string]reflect.Value{"decisions": v(proxy.DefaultStateDecisions)}

	queue := section("backends.queue.")
	queue.Roots = map[string]reflect.Value{"backends.queue.codel_target": cond(withCoDel), "backends.queue.codel_interval": cond(withCoDel)}

	backends := section("backends.")
	backends.Roots = map[string]reflect.Value{"backends.servers": cond(func(c *proxy.Config) { c.Backends.Servers = nil })}
	backends.Derived = map[string]doccheck.Derived{
		"backends.max_idle_conns_per_host": withPhrase(derived("proxy", "BackendsConfig", "MaxIdleConnsPerHost"), "largest `max_concurrency`"),
		"backends.tls.ca":                  {Phrase: "system roots"}, "backends.tls.server_name": {Phrase: "each URL's host"}}
	tlsRoots(backends, "backends.tls.", "ca", "server_name", "min_version", "watch")

	buffering := section("response_buffering.")
	buffering.Derived = map[string]doccheck.Derived{"response_buffering.temp_dir": {Phrase: "system temp dir"}}

	listeners := section("listeners[].")
	listeners.Derived = map[string]doccheck.Derived{"listeners[].request_buffer_dir": {Phrase: "system temp dir"},
		"listeners[].tls.client_auth": {Phrase: "`require` with `client_ca`", Check: checkClientAuthDefault}}
	tlsRoots(listeners, "listeners[].tls.", "min_version", "watch", "client_auth")

	util := section("utilization.")
	util.Roots = map[string]reflect.Value{"utilization.header": cond(withBackendHeader), "utilization.process_cpus": cond(withProcess)}
	util.Derived = map[string]doccheck.Derived{"utilization.process_cpus": withPhrase(derived("proxy/overload", "UtilizationConfig", "ProcessCPUs"), "CPUs of this host")}

	resources := section("resources[].")
	kihl := control.DefaultKihlConfig()
	resources.Roots = map[string]reflect.Value{
		"resources[].sensor":  cond(withoutSensor),
		"resources[].kihl.a1": cond(withKihlAuto), "resources[].kihl.a2": cond(withKihlAuto),
		"resources[].kihl.estimate_periods": cond(withKihlAuto), "resources[].kihl.min_utilization": cond(withKihlAuto),
		"resources[].sensor.samples_per_period": cond(withOutQueue), "resources[].sensor.mode": cond(withOutQueue),
		"resources[].sensor.scale": cond(withOutQueue)}
	resources.Extra = map[string]reflect.Value{
		"min_rate":  v(control.DefaultVoigtCPUConfig().MinRate),
		"burst":     v(bare.Stages[0].Burst),
		"params.k":  v(kihl.K),
		"params.ti": v(kihl.Ti)}

	policerCtx := section("policer.")
	policerCtx.Derived = map[string]doccheck.Derived{
		"policer.control.util_ref": withPhrase(derived("proxy/overload", "PolicerControlConfig", "UtilRef"), "the first CPU rule's reference")}

	shares := section("shares.")
	shares.Derived = map[string]doccheck.Derived{"shares.initial_max_bandwidth": {Phrase: "B"}}

	clusterCtx := section("cluster.")
	clusterCtx.Derived = map[string]doccheck.Derived{
		"cluster.instance":      withPhrase(derived("cluster", "Config", "Instance"), "host name and pid"),
		"cluster.timeout":       withPhrase(derived("cluster", "Config", "Timeout"), "period/4"),
		"cluster.heartbeat_ttl": withPhrase(derived("cluster", "Config", "HeartbeatTTL"), "3 × period"),
		"cluster.tls.ca":        {Phrase: "system roots"}, "cluster.tls.server_name": {Phrase: "each address's host"}}
	tlsRoots(clusterCtx, "cluster.tls.", "ca", "server_name", "min_version")

	healthCtx := section("health.")
	healthCtx.Derived = map[string]doccheck.Derived{
		"health.ready_shed.below":     withPhrase(derived("proxy", "ReadyShedConfig", "Below"), "half of `above`"),
		"health.ready_shed.clear_for": withPhrase(derived("proxy", "ReadyShedConfig", "ClearFor"), "`for`")}
	healthCtx.Roots = map[string]reflect.Value{"health.ready_shed": cond(func(c *proxy.Config) { c.Health.ReadyShed = nil })}

	classes := section("classes.")
	classes.Roots = map[string]reflect.Value{"classes.rules": cond(func(c *proxy.Config) { c.Classes.Rules = nil })}
	classes.Derived = map[string]doccheck.Derived{"classes.default": withPhrase(derived("policy", "ClassesConfig", "Default"), "last of `order`")}

	stages := section("stages[].")
	stages.Derived = map[string]doccheck.Derived{"stages[].priority.shed": {Phrase: "the controller's", Check: checkShedDefault},
		"stages[].hog.min_service_time": {Phrase: "the controller's target", Check: checkHogMinService},
		"stages[].params": {Phrase: "controller defaults", Check: func() error {
			cfg := proxyConfig(func(c *proxy.Config) {
				c.Stages[0].Name, c.Stages[0].Controller = "s", "auto"
				c.Classes.Rules = nil
			})
			ctrls, err := cfg.Config.StageControllers()
			if err != nil {
				return err
			}
			if want := auto.DefaultConfig(); !reflect.DeepEqual(ctrls["s"], &want) {
				return fmt.Errorf("a stage without params has %+v, not the controller's defaults", ctrls["s"])
			}
			return nil
		}}}

	reject := section("reject.")
	reject.Derived = map[string]doccheck.Derived{"reject.body": withPhrase(derived("policy", "RejectConfig", "Body"), "one-line text")}

	quick := global()
	quick.Extra = map[string]reflect.Value{"--slo": v(auto.DefaultConfig().SLO), "--admin": v(proxy.DefaultAdminAddr)}

	return map[string]*doccheck.Rule{
		"sluice proxy configuration reference": {Context: global()},
		"What happens to a request":            {Context: global()},
		"listeners":                            {Context: listeners},
		"max_client_connections":               {Context: self("max_client_connections")},
		"admin":                                {Context: admin, NoPairs: true},
		"backends":                             {Context: backends},
		"backends.queue":                       {Context: queue},
		"backends.timeouts":                    {Context: section("backends.timeouts.")},
		"backends.client":                      {Context: section("backends.client.")},
		"hops":                                 {Context: section("hops.")},
		"utilization":                          {Context: util},
		"resources":                            {Context: resources},
		"policer":                              {Context: policerCtx},
		"Client shares":                        {Context: shares},
		"cluster":                              {Context: clusterCtx},
		"drain_timeout":                        {Context: self("drain_timeout")},
		"health":                               {Context: healthCtx},
		"watch_config":                         {Context: self("watch_config")},
		"response_buffering":                   {Context: buffering},
		"telemetry":                            {Context: section("telemetry.otlp.")},
		"access_log":                           {Context: section("access_log.")},
		"classes":                              {Context: classes},
		"stages":                               {Context: stages},
		"auto's guardrails":                    {Context: &doccheck.Context{Root: v(auto.DefaultConfig())}},
		"reject":                               {Context: reject},
		"shadow":                               {Context: self("shadow")},
		"degrade":                              {Context: section("degrade.")},
		"Reload and shutdown":                  {Context: global()},
		"Quick start without a file":           {Context: quick, NoPairs: true},
	}
}

var reControllerItem = regexp.MustCompile("^[-*]\\s+\\*\\*`([a-z0-9-]+)`\\*\\*")

// controllerRule reads a bullet of "Controller parameters": the
// controller it names, with its defaults.
func controllerRule(b *doccheck.Block) *doccheck.Rule {
	if b.Text == nil {
		return nil
	}
	m := reControllerItem.FindStringSubmatch(b.Text.S)
	if m == nil {
		return nil
	}
	c, err := control.NewConfig(m[1])
	if err != nil {
		return nil
	}
	return &doccheck.Rule{Context: &doccheck.Context{Root: reflect.ValueOf(c).Elem()}}
}

// algorithmsRules returns the contexts of docs/algorithms.md's sections:
// each section's controller, and the paper's names of its parameters.
func algorithmsRules() map[string]*doccheck.Rule {
	bare := proxyConfig()
	tree := controllerTree(map[string]any{"policer": *bare.Policer, "stages": bare.Stages, "shares": *bare.Shares})
	ctx := func(prefix string, aliases map[string][]string, ignore map[string]string) *doccheck.Rule {
		return &doccheck.Rule{Context: &doccheck.Context{Root: tree, Prefix: prefix, Aliases: aliases, Ignore: ignore}}
	}
	// The lab's peers state their defaults as `key` value pairs; their
	// code is in the lab module, which this one cannot import, so
	// lab/peers's docs test holds them to it.
	out := sameRule(&doccheck.Rule{NoPairs: true},
		"Peers for service graphs (lab): Breakwater, DAGOR, Rajomon, TopFull", "Breakwater (Cho et al., OSDI 2020)",
		"DAGOR (Zhou et al., SoCC 2018)", "Rajomon (Xing et al., NSDI 2025)", "TopFull (Park et al., SIGCOMM 2024)",
		"Tuning: each peer at its best")
	maps.Copy(out, map[string]*doccheck.Rule{
		"The five designs, as equations": ctx("", map[string][]string{
			"h": {"kihl.period", "yaksha.period", "voigt-cpu.period", "voigt-queue.period"}}, nil),
		"1. Resource-based admission control with early discard": ctx("", map[string][]string{
			"util_ref": {"voigt-cpu.util_ref", "voigt-queue.util_ref"}, "Kp_cpu": {"voigt-cpu.kp"},
			"min_rate": {"voigt-cpu.min_rate", "voigt-queue.min_rate"}, "Kp_q": {"voigt-queue.kp"}, "Kd_q": {"voigt-queue.kd"},
			"q_ref": {"voigt-queue.q_ref", "policer.control.q_ref"}, "burst": {"stages.burst"}},
			map[string]string{"`q_ref = 35`": "the bandwidth rule's reference in the paper, which a rule sets in its params"}),
		"2. Yaksha: self-tuning PI on mean response time, as a proxy": ctx("yaksha.", map[string][]string{
			"POLE": {"yaksha.pole"}, "s": {"yaksha.pole"}},
			map[string]string{"`Tref = 150 ms`": "the paper's experiment"}),
		"3. Measurement-based per-client bandwidth shares": {Context: &doccheck.Context{Root: tree, Prefix: "shares.",
			Derived: map[string]doccheck.Derived{"shares.initial_max_bandwidth": {Phrase: "B"}},
			Ignore:  map[string]string{"`d_i = 0`": "a state, not a setting"}}},
		"4. PI control of server utilization with a token-bucket gate": ctx("kihl.", map[string][]string{
			"h": {"kihl.period"}, "ρ_ref": {"kihl.rho_ref"}, "K": {"kihl.k"}, "Ti": {"kihl.ti"}},
			map[string]string{"`1/μ = 22.5 ms`": "the paper's service time", "`Ti = 0.1`": "the paper's unstable design"}),
		"5. SEDA: per-stage AIMD on the 90th-percentile response time": ctx("seda.", map[string][]string{"α": {"seda.alpha"}}, nil),
		"6. Peer: Netflix Gradient2 (`gradient2`)": ctx("gradient2.", map[string][]string{
			"s": {"gradient2.smoothing"}}, nil),
		"7. Peer: Envoy adaptive concurrency (`envoy-gradient`)": ctx("envoy-gradient.", nil, nil),
		"8. Peer: BBR-style shedding (`bbr`)":                    ctx("bbr.", nil, nil),
		"9. sluice's own: `auto`, told only the objective":       ctx("auto.", nil, nil),
		"10. Client-side adaptive throttling, and the accept run that forgets a storm": {Context: &doccheck.Context{
			Root: v(client.DefaultConfig()), Prefix: "throttle.",
			Ignore: map[string]string{"`forget_run` 2": "a test's setting, not a default"}}},
	})
	return out
}

// middlewareRules: the middleware's document uses the policy's keys.
func middlewareRules() map[string]*doccheck.Rule {
	pol := &doccheck.Context{Root: v(policyConfig())}
	out := sameRule(&doccheck.Rule{Context: pol}, "sluice inside a Go service: the middleware and the stage API",
		"The middleware", "Long-lived responses", "The response writer", "Cost", "The quality level",
		"The stage API", "Writing your own Policy", "Reloading", "Several instances of the service")
	out["Metrics"] = &doccheck.Rule{Context: pol, NoPairs: true}
	return out
}

// sameRule returns the rules of sections that all check with r.
func sameRule(r *doccheck.Rule, sections ...string) map[string]*doccheck.Rule {
	out := make(map[string]*doccheck.Rule, len(sections))
	for _, s := range sections {
		out[s] = r
	}
	return out
}

// clientRule checks a section against package client's defaults.
func clientRule() *doccheck.Rule {
	return &doccheck.Rule{Context: &doccheck.Context{Root: v(client.DefaultConfig())}}
}

type mdDoc struct {
	file  string
	rules map[string]*doccheck.Rule
	extra func(*doccheck.Block) *doccheck.Rule
}

// hopsRules: docs/hops.md states the defaults of the hops section, of
// stages' priority and of the proxy's upstream client side, by their
// paths in the proxy's configuration.
func hopsRules() map[string]*doccheck.Rule {
	out := sameRule(&doccheck.Rule{Context: &doccheck.Context{Root: v(proxyConfig())}},
		"sluice at every hop: priorities, deadlines and a client side across services",
		"What travels with a request", "Trust", "Shedding the lowest priority first", "Deadlines at a hop",
		"What to set where", "How the pieces interact", "A chain of quick starts", "Sources")
	// The client side as package client has it (the proxy's upstream
	// turns its throttle and retries off).
	out["The client side"] = clientRule()
	return out
}

// grpcRules: docs/grpc.md states the policy's defaults on the server
// side and package client's on the client side.
func grpcRules() map[string]*doccheck.Rule {
	out := sameRule(&doccheck.Rule{Context: &doccheck.Context{Root: v(policyConfig())}},
		"sluice with gRPC", "The server side", "Which status, and what the caller should do",
		"What travels", "Streams, exemptions, failures", "Through the proxy", "Test service and load")
	out["The client side"] = clientRule()
	return out
}

func mdDocs() []mdDoc {
	return []mdDoc{
		{"docs/config.md", configRules(), controllerRule},
		{"docs/algorithms.md", algorithmsRules(), nil},
		{"docs/middleware.md", middlewareRules(), nil},
		{"docs/hops.md", hopsRules(), nil},
		{"docs/grpc.md", grpcRules(), nil},
	}
}

// mdChecks returns the checks of the documents, one per context.
func mdChecks() (checks []check, setup []doccheck.Finding, err error) {
	for _, d := range mdDocs() {
		src, err := os.ReadFile(filepath.Join(root, d.file))
		if err != nil {
			return nil, nil, err
		}
		blocks := doccheck.ParseMarkdown(d.file, string(src))
		seen := map[string]bool{}
		for _, b := range blocks {
			seen[b.Section()] = true
		}
		for s := range d.rules {
			if !seen[s] {
				setup = append(setup, doccheck.Finding{Pos: d.file, Msg: fmt.Sprintf("no section %q: update the checker's rules", s)})
			}
		}
		rules := map[*doccheck.Block]*doccheck.Rule{}
		byCtx := map[*doccheck.Context][]doccheck.Block{}
		var order []*doccheck.Context
		for i := range blocks {
			b := &blocks[i]
			r := d.rules[b.Section()]
			if d.extra != nil {
				if x := d.extra(b); x != nil {
					r = x
				}
			}
			rules[b] = r
			var ctx *doccheck.Context
			if r != nil {
				ctx = r.Context
			}
			if _, ok := byCtx[ctx]; !ok {
				order = append(order, ctx)
			}
			byCtx[ctx] = append(byCtx[ctx], *b)
		}
		for _, ctx := range order {
			group := byCtx[ctx]
			checks = append(checks, check{ctx, func() []doccheck.Finding {
				return doccheck.CheckMarkdown(group, func(b *doccheck.Block) *doccheck.Rule {
					for orig, r := range rules {
						if orig.Text == b.Text && orig.Table == b.Table {
							return r
						}
					}
					return nil
				})
			}})
		}
		for s, r := range d.rules {
			if r.Context != nil {
				ctx, where := r.Context, d.file+" § "+s
				checks = append(checks, check{nil, func() []doccheck.Finding { return ctx.Unused(where) }})
			}
		}
	}
	return checks, setup, nil
}

// TestDocsDefaults checks the defaults stated in docs/config.md,
// docs/algorithms.md and docs/middleware.md.
func TestDocsDefaults(t *testing.T) {
	report(t, mdFindings(t))
}
