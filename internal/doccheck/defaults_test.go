// SPDX-License-Identifier: Apache-2.0

package doccheck_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/gate"
	"github.com/sluicehq/sluice/internal/doccheck"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/proxy/overload"
	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// This file holds the documentation to the code: every default that a
// doc comment of the packages below or docs/config.md, docs/algorithms.md
// and docs/middleware.md states is compared with the default the code
// sets (Default…Config, the Default… constants and SetDefaults). A
// statement the checker cannot map to a field fails too: rewrite it as
// "Field (default X)", "`key` X" or "`key = X`", or declare below what it
// means (a derived default) or why it is no default (an exception).

// root is the module's root, relative to this package.
const root = "../.."

// goPackages are the packages whose comments are checked, by directory.
var goPackages = []string{"client", "cluster", "control", "control/auto", "gate", "monitor", "policer", "policy", "proxy", "proxy/admin", "proxy/buffer", "proxy/guard", "proxy/overload", "proxy/tlsconf", "share", "stage"}

// knownDrift lists defaults stated wrongly in the files offLimits names,
// whose owners fix them: each entry is a finding as it stands (file, key,
// stated and real value). A finding in such a file that is not listed
// fails, and so does an entry that no longer occurs (the file was fixed:
// remove the entry). When this list was written no such file stated a
// default the code does not set.
var knownDrift = []drift{}

type drift struct {
	file, key, stated, real string
}

// offLimits reports whether a file is being changed by other work, so
// that its findings are held against knownDrift.
func offLimits(file string) bool {
	switch {
	case file == "control/seda.go", strings.HasPrefix(file, "stage/"), strings.HasPrefix(file, "policer/"):
		return true
	case strings.HasPrefix(file, "proxy/"):
		return file != "proxy/config.go" && !strings.HasPrefix(file, "proxy/overload/") && !strings.HasPrefix(file, "proxy/guard/")
	}
	return false
}

// proxyConfig returns a proxy configuration with every optional section
// present but nothing set, after SetDefaults: every default the proxy
// fills, and the zero value of every required field. mods set what a
// conditional default depends on.
func proxyConfig(mods ...func(*proxy.Config)) proxy.Config {
	c := proxy.Config{
		Listeners: []proxy.ListenerConfig{{ProxyProtocol: &proxy.ProxyProtocolConfig{}}},
		Backends:  proxy.BackendsConfig{Servers: []proxy.ServerConfig{{}}},
		OverloadConfig: proxy.OverloadConfig{
			Resources: []overload.ResourceConfig{{Sensor: &overload.SensorConfig{}, Kihl: &overload.KihlTuningConfig{}}},
			Policer:   policerSection(),
			Shares:    &share.Config{},
		},
		Cluster:   &cluster.Config{},
		Health:    proxy.HealthConfig{ReadyShed: &proxy.ReadyShedConfig{}},
		Telemetry: proxy.TelemetryConfig{OTLP: &proxy.OTLPConfig{}},
		AccessLog: &proxy.AccessLogConfig{},
	}
	c.Stages = []policy.StageConfig{{}}
	c.Classes.Rules = []policy.ClassRule{{Header: &policy.HeaderMatch{}, Cookie: &policy.HeaderMatch{}}}
	for _, m := range mods {
		m(&c)
	}
	c.SetDefaults()
	return c
}

// policerSection returns the policer section of a file that names it and
// sets nothing ("policer: {}"): decoding keeps the library's derivative
// gain, which a zero kd in a file turns off.
func policerSection() *overload.PolicerConfig {
	var p overload.PolicerConfig
	if err := yaml.Unmarshal([]byte("{}"), &p); err != nil {
		panic(err)
	}
	return &p
}

// Conditional defaults of the proxy: a field's default when the field it
// depends on says so.
var (
	withBackendHeader = func(c *proxy.Config) { c.Utilization.Source = overload.UtilizationBackendHeader }
	withProcess       = func(c *proxy.Config) { c.Utilization.Source = overload.UtilizationProcess }
	withCoDel         = func(c *proxy.Config) { c.Backends.Queue.Discipline = proxy.DisciplineCoDel }
	withOutQueue      = func(c *proxy.Config) { c.Resources[0].Sensor.Source = overload.SensorOutQueue }
	withKihlAuto      = func(c *proxy.Config) { c.Resources[0].Kihl.Tuning = overload.KihlTuningAuto }
	withoutSensor     = func(c *proxy.Config) { c.Resources[0].Sensor = nil }
)

func policyConfig() policy.Config {
	var c policy.Config
	c.Stages = []policy.StageConfig{{}}
	c.Classes.Rules = []policy.ClassRule{{Header: &policy.HeaderMatch{}, Cookie: &policy.HeaderMatch{}}}
	c.SetDefaults()
	return c
}

func clusterConfig() cluster.Config {
	var c cluster.Config
	c.SetDefaults()
	return c
}

func v(x any) reflect.Value { return reflect.ValueOf(x) }

// goType is a struct type whose field comments state defaults, with the
// value its defaults produce.
type goType struct {
	pkg, name string
	// fn is the Default…Config function (or method) whose doc comment
	// states the same defaults, "" when there is none.
	fn  string
	ctx *doccheck.Context
}

func ctxOf(x any) *doccheck.Context { return &doccheck.Context{Root: v(x)} }

// controllerTree holds every controller's defaults, by registry name.
func controllerTree(extra map[string]any) reflect.Value {
	parts := map[string]any{}
	for _, n := range control.Names() {
		c, err := control.NewConfig(n)
		if err != nil {
			panic(err)
		}
		parts[n] = reflect.ValueOf(c).Elem().Interface()
	}
	for k, x := range extra {
		parts[k] = x
	}
	return doccheck.Tree(parts)
}

// goTypes registers every struct type whose field comments state
// defaults, with its defaulted value: what its Default…Config function
// returns or SetDefaults fills (stage.Options and gate.Discipline, whose
// defaults are filled by unexported code, from the Default… constants that
// code uses).
func goTypes() []goType {
	kihl := control.DefaultKihlConfig()
	withVoigtCPU := func(c *proxy.Config) {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte("util_ref: 80"), &n); err != nil {
			panic(err)
		}
		c.Stages[0] = policy.StageConfig{Name: "cgi", Controller: "voigt-cpu", Params: *n.Content[0]}
		c.Classes.Rules = nil
		c.Resources[0].Stage, c.Resources[0].Resource = "cgi", overload.ResourceCPU
	}
	p := proxyConfig()
	withTLS := proxyConfig(func(c *proxy.Config) {
		c.Listeners[0].TLS, c.Backends.TLS = &proxy.TLSConfig{}, &proxy.UpstreamTLSConfig{}
	})
	plain := proxyConfig(func(c *proxy.Config) {
		c.Policer, c.Shares, c.Cluster, c.Telemetry.OTLP, c.AccessLog, c.Listeners[0].ProxyProtocol = nil, nil, nil, nil, nil, nil
	})
	pc := proxyConfig(withProcess, withCoDel, withOutQueue, withKihlAuto)
	pol := policyConfig()
	cl := clusterConfig()
	clusterTLS := cluster.Config{TLS: &cluster.TLSConfig{}}
	clusterTLS.SetDefaults()
	return []goType{
		{"control/auto", "Config", "DefaultConfig", ctxOf(auto.DefaultConfig())},
		{"control", "BBRConfig", "DefaultBBRConfig", ctxOf(control.DefaultBBRConfig())},
		{"control", "DegradeConfig", "DefaultDegradeConfig", ctxOf(control.DefaultDegradeConfig())},
		{"control", "EnvoyGradientConfig", "DefaultEnvoyGradientConfig", ctxOf(control.DefaultEnvoyGradientConfig())},
		{"control", "Gradient2Config", "DefaultGradient2Config", ctxOf(control.DefaultGradient2Config())},
		{"control", "KihlConfig", "DefaultKihlConfig", &doccheck.Context{Root: v(kihl),
			Aliases: map[string][]string{"h": {"Period"}, "ρ_ref": {"RhoRef"}}}},
		{"control", "NoneConfig", "DefaultNoneConfig", ctxOf(control.DefaultNoneConfig())},
		{"control", "SEDAConfig", "DefaultSEDAConfig", ctxOf(control.DefaultSEDAConfig())},
		{"control", "StaticConcurrencyConfig", "DefaultStaticConcurrencyConfig", ctxOf(control.DefaultStaticConcurrencyConfig())},
		{"control", "StaticRateConfig", "DefaultStaticRateConfig", ctxOf(control.DefaultStaticRateConfig())},
		{"control", "VoigtCPUConfig", "DefaultVoigtCPUConfig", ctxOf(control.DefaultVoigtCPUConfig())},
		{"control", "VoigtQueueConfig", "DefaultVoigtQueueConfig", ctxOf(control.DefaultVoigtQueueConfig())},
		{"control", "YakshaConfig", "DefaultYakshaConfig", &doccheck.Context{Root: v(control.DefaultYakshaConfig()),
			Aliases: map[string][]string{"h": {"Period"}}}},

		{"gate", "Discipline", "", ctxOf(gate.Discipline{Target: gate.DefaultCoDelTarget, Interval: gate.DefaultCoDelInterval})},

		{"monitor", "OutQueueConfig", "DefaultOutQueueConfig", ctxOf(monitor.DefaultOutQueueConfig())},

		{"policer", "Config", "DefaultConfig", &doccheck.Context{Root: v(policer.DefaultConfig()),
			Aliases: map[string][]string{"bucket": {"Burst"}, "initial rate": {"Rate"}}}},
		{"policer", "SourceConfig", "", ctxOf(policer.DefaultConfig().Sources)},
		{"policer", "SourceRule", "", ctxOf(policer.SourceRule{})},
		{"policer", "Listener", "", ctxOf(*(*policer.Policer)(nil).Wrap(nil, nil))},

		{"policy", "Config", "Config.SetDefaults", ctxOf(pol)},
		{"policy", "ClassesConfig", "", &doccheck.Context{Root: v(pol.Classes), Derived: map[string]doccheck.Derived{
			"Default": {Phrase: "the last class of Order", Check: func() error {
				var c policy.Config
				c.Classes.Order = []string{"gold", "bronze"}
				c.SetDefaults()
				if c.Classes.Default != "bronze" {
					return fmt.Errorf("the default class of [gold bronze] is %q", c.Classes.Default)
				}
				return nil
			}}}}},
		{"policy", "HeaderMatch", "", ctxOf(*pol.Classes.Rules[0].Header)},
		{"policy", "StageConfig", "", ctxOf(pol.Stages[0])},
		{"policy", "QueueConfig", "", ctxOf(pol.Stages[0].Queue)},
		{"policy", "RejectConfig", "", &doccheck.Context{Root: v(pol.Reject), Derived: map[string]doccheck.Derived{
			"Body": {Phrase: "a one-line text message", Check: func() error {
				if b := pol.Reject.Body; b != policy.DefaultRejectBody || strings.Count(b, "\n") != 1 || !strings.HasSuffix(b, "\n") {
					return fmt.Errorf("the default body %q is not one line of text", b)
				}
				return nil
			}}}}},
		{"policy", "DegradeConfig", "", ctxOf(pol.Degrade)},
		{"policy", "HopsConfig", "", ctxOf(pol.Hops)},
		{"policy", "TenantsConfig", "", ctxOf(pol.Stages[0].Tenants)},
		{"stage", "Tenants", "", ctxOf(stage.Tenants{DefaultWeight: stage.DefaultTenantWeight})},
		{"stage", "Hog", "", &doccheck.Context{Root: v(stage.Hog{}), Derived: map[string]doccheck.Derived{
			"MinService": {Phrase: "the controller's response-time target", Check: checkHogMinService}}}},
		{"policy", "HogConfig", "", &doccheck.Context{Root: v(pol.Stages[0].Hog), Derived: map[string]doccheck.Derived{
			"MinServiceTime": {Phrase: "the controller's target", Check: checkHogMinService}}}},
		{"policy", "PriorityConfig", "", &doccheck.Context{Root: v(pol.Stages[0].Priority), Derived: map[string]doccheck.Derived{
			"Shed": {Phrase: "the controller's", Check: checkShedDefault}}}},

		{"client", "Config", "DefaultConfig", ctxOf(client.DefaultConfig())},
		{"client", "ThrottleConfig", "", ctxOf(client.DefaultConfig().Throttle)},
		{"client", "RetryConfig", "", ctxOf(client.DefaultConfig().Retry)},

		{"share", "Config", "DefaultConfig", ctxOf(share.DefaultConfig())},
		{"cluster", "TLSConfig", "", &doccheck.Context{Root: v(*clusterTLS.TLS), Derived: map[string]doccheck.Derived{
			"CA": {Phrase: "the system's roots"}, "ServerName": {Phrase: "each address's host"}}}},

		{"cluster", "Config", "Config.SetDefaults", &doccheck.Context{Root: v(cl), Derived: map[string]doccheck.Derived{
			"Instance": {Phrase: `the host name and the process id, "host-1234"`, Check: func() error {
				if !strings.HasSuffix(cl.Instance, "-"+strconv.Itoa(os.Getpid())) || cl.Instance != cluster.DefaultInstance() {
					return fmt.Errorf("the default instance %q is not host-pid", cl.Instance)
				}
				return nil
			}},
			"Timeout": {Phrase: "a quarter of Period", Check: func() error {
				c := cluster.Config{Period: 2 * time.Second}
				c.SetDefaults()
				if c.Timeout != c.Period/4 || cl.Timeout != cl.Period/4 {
					return fmt.Errorf("the default timeout is %v with period %v", c.Timeout, c.Period)
				}
				return nil
			}},
			"HeartbeatTTL": {Phrase: "3 periods", Check: func() error {
				c := cluster.Config{Period: 2 * time.Second}
				c.SetDefaults()
				if c.HeartbeatTTL != 3*c.Period {
					return fmt.Errorf("the default heartbeat TTL is %v with period %v", c.HeartbeatTTL, c.Period)
				}
				return nil
			}},
		}}},

		{"stage", "Options", "", ctxOf(stage.Options{Burst: stage.DefaultBurst, Window: stage.DefaultWindow,
			History: stage.DefaultHistory, MaxQueue: stage.DefaultMaxQueue, QueueTimeout: stage.DefaultQueueTimeout})},

		{"proxy", "Config", "Config.SetDefaults", &doccheck.Context{Root: v(p),
			Roots: map[string]reflect.Value{"Cluster": v(plain), "AccessLog": v(plain)}}},
		{"proxy", "TelemetryConfig", "", ctxOf(plain.Telemetry)},
		{"proxy", "OTLPConfig", "", ctxOf(*p.Telemetry.OTLP)},
		{"proxy", "AccessLogConfig", "", ctxOf(*p.AccessLog)},
		{"proxy", "ListenerConfig", "", &doccheck.Context{Root: v(p.Listeners[0]),
			Roots: map[string]reflect.Value{"ProxyProtocol": v(plain.Listeners[0])}}},
		{"proxy/guard", "Config", "", &doccheck.Context{Root: v(p.Listeners[0].GuardConfig),
			Derived: map[string]doccheck.Derived{"RequestBufferDir": {Phrase: "the system's temporary directory"}}}},
		{"proxy", "ProxyProtocolConfig", "", ctxOf(*p.Listeners[0].ProxyProtocol)},
		{"proxy/admin", "Config", "", ctxOf(p.Admin)},
		{"proxy/tlsconf", "Config", "", &doccheck.Context{Root: v(*withTLS.Listeners[0].TLS), Derived: map[string]doccheck.Derived{
			"ClientAuth": {Phrase: "require when ClientCA is set, else none", Check: checkClientAuthDefault}}}},
		{"proxy/tlsconf", "UpstreamConfig", "", &doccheck.Context{Root: v(*withTLS.Backends.TLS), Derived: map[string]doccheck.Derived{
			"CA": {Phrase: "the system's roots"}, "ServerName": {Phrase: "each server URL's host"}}}},
		{"proxy/buffer", "Config", "", &doccheck.Context{Root: v(p.ResponseBuffering), Derived: map[string]doccheck.Derived{
			"TempDir": {Phrase: "the system's temporary directory"}}}},
		{"proxy", "BackendsConfig", "", &doccheck.Context{Root: v(p.Backends), Derived: map[string]doccheck.Derived{
			"MaxIdleConnsPerHost": {Phrase: "the largest max_concurrency", Check: func() error {
				c := proxyConfig(func(c *proxy.Config) {
					c.Backends.Servers = []proxy.ServerConfig{{MaxConcurrency: 3}, {MaxConcurrency: 7}, {MaxConcurrency: 5}}
				})
				if c.Backends.MaxIdleConnsPerHost != 7 {
					return fmt.Errorf("max_idle_conns_per_host is %d with servers of 3, 7 and 5", c.Backends.MaxIdleConnsPerHost)
				}
				return nil
			}}}}},
		{"proxy", "ServerConfig", "", ctxOf(p.Backends.Servers[0])},
		{"proxy", "PoolQueueConfig", "", &doccheck.Context{Root: v(p.Backends.Queue),
			Roots: map[string]reflect.Value{"CoDelTarget": v(pc.Backends.Queue), "CoDelInterval": v(pc.Backends.Queue)}}},
		{"proxy", "TimeoutsConfig", "", ctxOf(p.Backends.Timeouts)},
		{"proxy", "HealthConfig", "", &doccheck.Context{Root: v(p.Health),
			Roots: map[string]reflect.Value{"ReadyShed": v(proxyConfig(func(c *proxy.Config) { c.Health.ReadyShed = nil }).Health)},
			Derived: map[string]doccheck.Derived{"BackendPaths": {Phrase: "/healthz, /readyz and /livez", Check: func() error {
				if got := p.Health.BackendPaths; !reflect.DeepEqual(got, []string{"/healthz", "/readyz", "/livez"}) {
					return fmt.Errorf("backend_paths is %q", got)
				}
				return nil
			}}}}},
		{"proxy", "ReadyShedConfig", "", &doccheck.Context{Root: v(*p.Health.ReadyShed), Derived: map[string]doccheck.Derived{
			"Below": {Phrase: "half of Above", Check: func() error {
				c := proxyConfig(func(c *proxy.Config) { c.Health.ReadyShed.Above = 0.8 })
				if c.Health.ReadyShed.Below != 0.4 {
					return fmt.Errorf("below is %v with above 0.8", c.Health.ReadyShed.Below)
				}
				return nil
			}},
			"ClearFor": {Phrase: "For", Check: func() error {
				c := proxyConfig(func(c *proxy.Config) { c.Health.ReadyShed.For = 7 * time.Second })
				if c.Health.ReadyShed.ClearFor != 7*time.Second {
					return fmt.Errorf("clear_for is %v with for 7s", c.Health.ReadyShed.ClearFor)
				}
				return nil
			}}}}},
		{"proxy/overload", "Config", "", &doccheck.Context{Root: v(p.OverloadConfig),
			Roots: map[string]reflect.Value{"Policer": v(plain.OverloadConfig), "Shares": v(plain.OverloadConfig)}}},
		{"proxy/overload", "UtilizationConfig", "", &doccheck.Context{Root: v(p.Utilization),
			Roots: map[string]reflect.Value{"Header": v(proxyConfig(withBackendHeader).Utilization), "ProcessCPUs": v(pc.Utilization)},
			Derived: map[string]doccheck.Derived{"ProcessCPUs": {Phrase: "the number of CPUs of this host", Check: func() error {
				if pc.Utilization.ProcessCPUs != float64(runtime.NumCPU()) {
					return fmt.Errorf("process_cpus is %v on %d CPUs", pc.Utilization.ProcessCPUs, runtime.NumCPU())
				}
				return nil
			}}}}},
		{"proxy/overload", "SensorConfig", "", ctxOf(*pc.Resources[0].Sensor)},
		{"proxy/overload", "KihlTuningConfig", "", &doccheck.Context{Root: v(*pc.Resources[0].Kihl),
			Roots: map[string]reflect.Value{"Tuning": v(*p.Resources[0].Kihl)},
			Extra: map[string]reflect.Value{"params.k": v(kihl.K), "params.ti": v(kihl.Ti)}}},
		{"proxy/overload", "PolicerConfig", "", ctxOf(*p.Policer)},
		{"proxy/overload", "PolicerControlConfig", "", &doccheck.Context{Root: v(p.Policer.Control), Derived: map[string]doccheck.Derived{
			"UtilRef": {Phrase: "the first CPU rule's reference", Check: func() error {
				c := proxyConfig(withVoigtCPU)
				if got := c.Policer.Control.UtilRef; got != 80 || p.Policer.Control.UtilRef != control.DefaultVoigtQueueConfig().UtilRef {
					return fmt.Errorf("util_ref is %v with a voigt-cpu rule of util_ref 80, %v without", got, p.Policer.Control.UtilRef)
				}
				return nil
			}}}}},
	}
}

// checkShedDefault: a stage's priority.shed defaults to true, except under
// the controllers whose papers define their own classes or none.
func checkShedDefault() error {
	for _, name := range control.Names() {
		var c policy.Config
		c.Stages = []policy.StageConfig{{Name: "s", Controller: name}}
		c.SetDefaults()
		cfg, _ := control.NewConfig(name)
		if got, want := *c.Stages[0].Priority.Shed, !control.NeedsOf(cfg).PriorityOptIn; got != want {
			return fmt.Errorf("priority.shed of a %s stage defaults to %v", name, got)
		}
	}
	return nil
}

// checkHogMinService checks that the hog rule's min service time defaults
// to the controller's target (auto: its SLO).
func checkHogMinService() error {
	cfg := auto.DefaultConfig()
	cfg.SLO = 321 * time.Millisecond
	st, err := stage.New(stage.Options{Name: "s", Controller: &cfg, Tenants: stage.Tenants{Fair: true}, Hog: stage.Hog{OverShare: true}}, time.Now())
	if err != nil {
		return err
	}
	if got := st.HogRule().MinService; got != cfg.SLO {
		return fmt.Errorf("the hog rule's min service time of an auto stage with SLO %v defaults to %v", cfg.SLO, got)
	}
	return nil
}

// file returns the file of a finding.
func file(f doccheck.Finding) string {
	p, _, _ := strings.Cut(f.Pos, ":")
	return p
}

// report fails t for every finding, except those in files other work is
// changing that knownDrift lists.
func report(t *testing.T, fs []doccheck.Finding) {
	t.Helper()
	sort.Slice(fs, func(i, j int) bool { return fs[i].Pos < fs[j].Pos })
	for _, f := range fs {
		if offLimits(file(f)) {
			if !knownDriftHas(f) {
				t.Errorf("%v (in a file other work is changing: add it to knownDrift)", f)
			}
			continue
		}
		t.Error(f)
	}
}

func knownDriftHas(f doccheck.Finding) bool {
	for _, d := range knownDrift {
		if d.file == file(f) && d.key == f.Key && d.stated == f.Stated && d.real == f.Real {
			return true
		}
	}
	return false
}

// check is one run of the checker with one context.
type check struct {
	ctx *doccheck.Context
	run func() []doccheck.Finding
}

// goChecks returns the checks of every registered type and function of the
// packages, and the findings of the registry's completeness: every struct
// stating defaults and every Default…Config function must be registered.
func goChecks() (checks []check, missing []doccheck.Finding, err error) {
	types := goTypes()
	for _, dir := range goPackages {
		pkg, err := doccheck.LoadPackage(filepath.Join(root, dir), dir)
		if err != nil {
			return nil, nil, err
		}
		structs := pkg.Structs()
		byType := map[string]*doccheck.Context{}
		runs := map[*doccheck.Context][]func() []doccheck.Finding{}
		for _, gt := range types {
			if gt.pkg != dir {
				continue
			}
			s, ok := structs[gt.name]
			if !ok {
				missing = append(missing, doccheck.Finding{Pos: dir, Msg: "no struct type " + gt.name})
				continue
			}
			if got := doccheck.TypeName(gt.ctx.Root); got != gt.name {
				missing = append(missing, doccheck.Finding{Pos: dir, Msg: fmt.Sprintf("%s registered with a value of type %s", gt.name, got)})
			}
			ctx := gt.ctx
			runs[ctx] = append(runs[ctx], func() []doccheck.Finding { return ctx.CheckStruct(s) })
			byType[gt.name] = ctx
		}
		for name, s := range structs {
			if byType[name] == nil && s.States() {
				missing = append(missing, doccheck.Finding{Pos: s.Pos, Msg: fmt.Sprintf("%s.%s states defaults in its field comments: register it in goTypes", dir, name)})
			}
		}
		merged := doccheck.Merge(byType)
		documented := map[string]bool{}
		for _, c := range pkg.Comments() {
			doc := c.Doc
			var fn *goType
			for i := range types {
				if types[i].pkg == dir && types[i].fn != "" && types[i].fn == c.Of {
					fn = &types[i]
				}
			}
			switch {
			case fn != nil:
				documented[c.Of] = true
				ctx := fn.ctx
				runs[ctx] = append(runs[ctx], func() []doccheck.Finding { return ctx.CheckProse(doc, true) })
			default:
				if reDefaultFunc.MatchString(c.Of) {
					missing = append(missing, doccheck.Finding{Pos: doc.Pos(0), Msg: fmt.Sprintf("%s.%s returns defaults: register its type in goTypes", dir, c.Of)})
				}
				runs[merged] = append(runs[merged], func() []doccheck.Finding { return merged.CheckProse(doc, false) })
			}
		}
		for _, gt := range types {
			if gt.pkg == dir && gt.fn != "" && !documented[gt.fn] {
				missing = append(missing, doccheck.Finding{Pos: dir, Msg: "no doc comment of " + gt.fn})
			}
		}
		for ctx, fs := range runs {
			checks = append(checks, check{ctx, func() []doccheck.Finding {
				var out []doccheck.Finding
				for _, f := range fs {
					out = append(out, f()...)
				}
				return out
			}})
		}
		for _, gt := range types {
			if gt.pkg == dir {
				ctx, where := gt.ctx, dir+"."+gt.name
				checks = append(checks, check{nil, func() []doccheck.Finding { return ctx.Unused(where) }})
			}
		}
	}
	return checks, missing, nil
}

// runAll runs checks and returns their findings.
func runAll(checks []check) []doccheck.Finding {
	var out []doccheck.Finding
	for _, c := range checks {
		out = append(out, c.run()...)
	}
	return out
}

// loaded holds the checks of the comments and of the documents, built
// once for the tests of this package.
var loaded struct {
	once               sync.Once
	goChecks, mdChecks []check
	goSetup, mdSetup   []doccheck.Finding // problems of the registry
	err                error
}

func load(t *testing.T) {
	t.Helper()
	loaded.once.Do(func() {
		loaded.goChecks, loaded.goSetup, loaded.err = goChecks()
		if loaded.err == nil {
			loaded.mdChecks, loaded.mdSetup, loaded.err = mdChecks()
		}
	})
	if loaded.err != nil {
		t.Fatal(loaded.err)
	}
}

func goFindings(t *testing.T) []doccheck.Finding {
	load(t)
	return append(append([]doccheck.Finding(nil), loaded.goSetup...), runAll(loaded.goChecks)...)
}

func mdFindings(t *testing.T) []doccheck.Finding {
	load(t)
	return append(append([]doccheck.Finding(nil), loaded.mdSetup...), runAll(loaded.mdChecks)...)
}

var reDefaultFunc = regexp.MustCompile(`^Default\w*Config$`)

// TestGoDocDefaults checks the defaults stated in the doc comments of the
// packages.
func TestGoDocDefaults(t *testing.T) {
	report(t, goFindings(t))
}

// TestKnownDriftCurrent fails when an entry of knownDrift no longer
// occurs: its file was fixed and the entry must go.
func TestKnownDriftCurrent(t *testing.T) {
	fs := goFindings(t)
	fs = append(fs, mdFindings(t)...)
	for _, d := range knownDrift {
		found := false
		for _, f := range fs {
			if d.file == file(f) && d.key == f.Key && d.stated == f.Stated && d.real == f.Real {
				found = true
			}
		}
		if !found {
			t.Errorf("knownDrift entry %+v no longer occurs: remove it", d)
		}
	}
}

// TestCheckerCatchesDrift proves the checker: for every key whose stated
// default it compares, in the comments and in the documents, replacing
// the real default by another value must produce a finding.
func TestCheckerCatchesDrift(t *testing.T) {
	load(t)
	checks := append(append([]check(nil), loaded.goChecks...), loaded.mdChecks...)
	n := 0
	for _, c := range checks {
		if c.ctx == nil {
			continue
		}
		base := map[string]bool{}
		for _, f := range c.run() {
			base[f.String()] = true
		}
		for _, k := range c.ctx.Checked() {
			n++
			c.ctx.Mutate = k
			caught := false
			for _, f := range c.run() {
				if f.Key == k && f.Real != "" && !base[f.String()] {
					caught = true
				}
			}
			c.ctx.Mutate = ""
			if !caught {
				t.Errorf("a change of the default of %s would go unnoticed", k)
			}
		}
	}
	if n < 300 {
		t.Errorf("only %d defaults checked", n)
	}
	t.Logf("%d stated defaults checked", n)
}

// checkClientAuthDefault checks the default of tls.client_auth: require
// with a client CA, none without.
func checkClientAuthDefault() error {
	for ca, want := range map[string]string{"": proxy.ClientAuthNone, "ca.pem": proxy.ClientAuthRequire} {
		c := proxyConfig(func(c *proxy.Config) { c.Listeners[0].TLS = &proxy.TLSConfig{ClientCA: ca} })
		if got := c.Listeners[0].TLS.ClientAuth; got != want {
			return fmt.Errorf("client_auth with client_ca %q defaults to %q, not %q", ca, got, want)
		}
	}
	return nil
}
