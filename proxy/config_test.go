// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/testconf"
	"github.com/sluicehq/sluice/proxy/guard"
)

const goodHead = testconf.Head

func TestParseErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name string
		text string
		line int
		path string
		msg  string
	}{
		{"negative stage target", testconf.BadStageTarget, 14, "stages[1].params.target", "-1s is invalid"},
		{"unknown top-level key", goodHead + "listners: []\n", 6, "listners", "unknown field"},
		{"unknown nested key", `listeners:
  - addr: 127.0.0.1:8080
backends:
  servers:
    - url: http://127.0.0.1:8081
      max_conc: 3
`, 6, "backends.servers[0].max_conc", "valid here: max_concurrency, url"},
		{"unknown controller param", goodHead + `stages:
  - name: a
    controller: seda
    params:
      target: 1s
      bogus: 2
`, 11, "stages[0].params.bogus", "bogus"},
		{"duration without unit", goodHead + "  queue:\n    timeout: 5\n", 7, "backends.queue.timeout", "has no unit"},
		{"wrong type", goodHead + "      max_concurrency: lots\n", 6, "backends.servers[0].max_concurrency", "cannot unmarshal"},
		{"bad duration", goodHead + "drain_timeout: soon\n", 6, "drain_timeout", "soon"},
		{"no listeners", "backends:\n  servers:\n    - url: http://127.0.0.1:8081\n", 1, "listeners", "at least one listener"},
		{"no servers", "listeners:\n  - addr: 127.0.0.1:8080\nbackends:\n  balance: round-robin\n", 3, "backends.servers", "at least one server"},
		{"bad url scheme", "listeners:\n  - addr: 127.0.0.1:8080\nbackends:\n  servers:\n    - url: ftp://x\n", 5, "backends.servers[0].url", "scheme must be http or https"},
		{"duplicate url", goodHead + "    - url: http://127.0.0.1:8081\n", 6, "backends.servers[1].url", "already"},
		{"bad balance", goodHead + "  balance: random\n", 6, "backends.balance", `"random" is invalid`},
		{"negative queue", goodHead + "  queue:\n    max: -1\n", 7, "backends.queue.max", "-1 is invalid"},
		{"public admin", goodHead + "admin:\n  addr: 0.0.0.0:9901\n", 7, "admin.addr", "not a loopback address"},
		{"admin same as listener", goodHead + "admin:\n  addr: 127.0.0.1:8080\n", 7, "admin.addr", "already used"},
		{"listener without port", "listeners:\n  - addr: localhost\nbackends:\n  servers:\n    - url: http://127.0.0.1:8081\n", 2, "listeners[0].addr", "invalid"},
		{"tls without key", "listeners:\n  - addr: 127.0.0.1:8443\n    tls:\n      cert: a.pem\nbackends:\n  servers:\n    - url: http://127.0.0.1:8081\n", 3, "listeners[0].tls.key", "required"},
		{"bad trusted proxy", goodHead + "classes:\n  trusted_proxies: [10.0.0.0/8, nonsense]\n", 7, "classes.trusted_proxies[1]", "nonsense"},
		{"unknown controller", goodHead + "stages:\n  - name: a\n    controller: pid\n", 8, "stages[0].controller", "pid"},
		{"bad utilization source", goodHead + "utilization:\n  source: magic\n", 7, "utilization.source", "magic"},
		{"cgroup_cpus negative", goodHead + "utilization:\n  source: cgroup\n  cgroup_cpus: -2\n", 8, "utilization.cgroup_cpus", "-2 is invalid"},
		{"cgroup_cpus with host", goodHead + "utilization:\n  source: host\n  cgroup_cpus: 2\n", 8, "utilization.cgroup_cpus", "only used with source: cgroup or auto"},
		{"bad cpu list", goodHead + "utilization:\n  source: host\n  cpus: 3-1\n", 8, "utilization.cpus", "3-1"},
		{"header without backend-header", goodHead + "utilization:\n  header: X-U\n", 7, "utilization.header", "only used"},
		{"bad probe path", goodHead + "health:\n  backend_paths: [healthz]\n", 7, "health.backend_paths[0]", "must be a path"},
		{"duplicate probe path", goodHead + "health:\n  backend_paths: [/a, /a]\n", 7, "health.backend_paths[1]", "already"},
		{"bad listener prefix", goodHead + "health:\n  listener_prefix: sluice/\n", 7, "health.listener_prefix", "invalid"},
		{"prefix hides a probe path", goodHead + "health:\n  listener_prefix: /x\n  backend_paths: [/x/readyz]\n", 7, "health.listener_prefix", "never be reached"},
		{"negative check interval", goodHead + "health:\n  check_interval: -1s\n", 7, "health.check_interval", "positive"},
		{"ready_shed above 1", goodHead + "health:\n  ready_shed:\n    above: 2\n", 8, "health.ready_shed.above", "(0, 1]"},
		{"ready_shed below above", goodHead + "health:\n  ready_shed:\n    above: 0.3\n    below: 0.5\n", 9, "health.ready_shed.below", "[0, above]"},
		{"ready_shed unknown key", goodHead + "health:\n  ready_shed:\n    over: 0.3\n", 8, "health.ready_shed.over", "over"},
		{"top level not a mapping", "- a\n- b\n", 1, "", "mapping"},
		{"empty", "", 0, "", "empty"},
		{"syntax", "listeners: [\n", 0, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("proxy.yaml", []byte(c.text))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want *ConfigError", err, err)
			}
			if c.line > 0 && ce.Line != c.line {
				t.Errorf("line %d, want %d: %v", ce.Line, c.line, err)
			}
			if ce.Path != c.path {
				t.Errorf("path %q, want %q: %v", ce.Path, c.path, err)
			}
			if !strings.Contains(ce.Msg, c.msg) {
				t.Errorf("message %q does not contain %q", ce.Msg, c.msg)
			}
			if !strings.HasPrefix(err.Error(), "proxy.yaml") {
				t.Errorf("error %q does not start with the file name", err)
			}
		})
	}
}

func TestConfigErrorFormat(t *testing.T) {
	_, err := Parse("proxy.yaml", []byte(testconf.BadStageTarget))
	want := "proxy.yaml:14: stages[1].params.target: -1s is invalid"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want prefix %q", err, want)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse("d.yaml", []byte(goodHead))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Listeners[0]
	b := cfg.Backends
	checks := []struct {
		name      string
		got, want any
	}{
		{"read_header_timeout", l.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{"idle_timeout", l.IdleTimeout, DefaultIdleTimeout},
		{"read_timeout", l.ReadTimeout, time.Duration(0)},
		{"max_header_bytes", l.MaxHeaderBytes, guard.DefaultMaxHeaderBytes},
		{"admin.addr", cfg.Admin.Addr, DefaultAdminAddr},
		{"admin.pprof", cfg.Admin.Pprof, false},
		{"max_concurrency", b.Servers[0].MaxConcurrency, DefaultMaxConcurrency},
		{"balance", b.Balance, BalanceLeastInFlight},
		{"queue.max", *b.Queue.Max, DefaultQueueMax},
		{"queue.timeout", b.Queue.Timeout, DefaultQueueTimeout},
		{"dial", b.Timeouts.Dial, DefaultDialTimeout},
		{"response_header", b.Timeouts.ResponseHeader, DefaultResponseHeader},
		{"overall", b.Timeouts.Overall, time.Duration(0)},
		{"preserve_host", *b.PreserveHost, true},
		{"max_idle_conns_per_host", b.MaxIdleConnsPerHost, DefaultMaxConcurrency},
		{"drain_timeout", cfg.DrainTimeout, DefaultDrainTimeout},
		{"reject.status", cfg.Reject.Status, 503},
		{"degrade.header", cfg.Degrade.Header, "X-Sluice-Quality"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestQueueMaxZeroIsAllowed(t *testing.T) {
	cfg, err := Parse("q.yaml", []byte(goodHead+"  queue:\n    max: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Backends.Queue.Max != 0 {
		t.Fatalf("queue.max = %d, want 0", *cfg.Backends.Queue.Max)
	}
}

func TestAllowPublicAdmin(t *testing.T) {
	_, err := Parse("p.yaml", []byte(goodHead+"admin:\n  addr: 0.0.0.0:9901\n  allow_public: true\n  token: 0123456789abcdef0123\n"))
	if err != nil {
		t.Fatal(err)
	}
}

// A non-loopback admin listener needs a token, and a bad token is refused
// without echoing it.
func TestAdminTokenValidation(t *testing.T) {
	for _, tc := range []struct{ name, admin, want string }{
		{"public without token", "  addr: 0.0.0.0:9901\n  allow_public: true\n", "admin.token: required when admin.addr (\"0.0.0.0:9901\") is not a loopback address"},
		{"short", "  token: s3cr3t\n", "admin.token: too short"},
		{"space", "  token: \"0123456789 abcdef\"\n", "admin.token: must be printable ASCII without spaces"},
		{"redacted", "  token: \"<redacted>xxxxxxxxxxxx\"\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(goodHead+"admin:\n"+tc.admin))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("the error echoes the token: %v", err)
			}
		})
	}
	if _, err := Parse("p.yaml", []byte(goodHead+"admin:\n  token: \"<redacted>\"\n")); err == nil || !strings.Contains(err.Error(), "admin.token") {
		t.Fatalf("the redacted placeholder: error = %v, want one naming admin.token", err)
	}
}

func TestExamplesValidate(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d example configs, want at least 4: %v", len(files), files)
	}
	for _, f := range files {
		cfg, err := LoadFile(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if err := Check(cfg); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(goodHead))
	f.Add([]byte(goodHead + "stages:\n  - name: a\n    controller: seda\n    params: {target: 1s}\n"))
	f.Add([]byte("listeners: [{addr: ':0'}]\nbackends: {servers: [{url: 'http://x'}], queue: {max: 1}}\n"))
	f.Add([]byte("a: &x {b: *x}\n"))
	f.Add([]byte(goodHead + "stages:\n  - {name: a, controller: voigt-cpu}\nresources:\n  - {stage: a, resource: cpu, sensor: {source: pool-busy}}\npolicer: {rate: 10, control: {q_ref: 5}}\n"))
	f.Add([]byte(goodHead + "shares:\n  total_bandwidth: 100KB\n  clients: [{name: a, share: 10, cidrs: [10.0.0.0/8]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			return
		}
		if len(cfg.Listeners) == 0 || len(cfg.Backends.Servers) == 0 {
			t.Fatal("a valid config without listeners or servers")
		}
	})
}

// The pool's queue takes CoDel with adaptive LIFO: in a standing queue the
// newest request is served first and the old ones get their 503 at once
// (virtual time).
func TestPoolCoDelLIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cfg Config
		cfg.Listeners = []ListenerConfig{{Addr: "127.0.0.1:0"}}
		cfg.Backends.Servers = []ServerConfig{{URL: "http://127.0.0.1:1", MaxConcurrency: 1}}
		cfg.Backends.Queue.Discipline = DisciplineCoDelLIFO
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		if cfg.Backends.Queue.CoDelTarget != 5*time.Millisecond || cfg.Backends.Queue.CoDelInterval != 100*time.Millisecond {
			t.Fatalf("defaults %+v", cfg.Backends.Queue)
		}
		p, err := NewPool(cfg.Backends)
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// waiter queues a request for a slot, released as soon as it
		// has one, and says how its wait ended.
		waiter := func() <-chan error {
			res := make(chan error, 1)
			go func() {
				b, err := p.Acquire(t.Context())
				if err == nil {
					p.Release(b)
				}
				res <- err
			}()
			return res
		}
		old := waiter()
		time.Sleep(150 * time.Millisecond) // the queue stands
		young := waiter()
		synctest.Wait()
		p.Release(b)
		if err := <-young; err != nil {
			t.Fatalf("newest request: %v, want served first", err)
		}
		if err := <-old; !errors.Is(err, ErrPoolQueueTimeout) {
			t.Fatalf("old request: %v, want a queue timeout (503) at once", err)
		}
		if st := p.State(); st.Queue.Discipline != DisciplineCoDelLIFO || st.InFlight != 0 {
			t.Fatalf("state %+v", st)
		}
	})
}

func TestPoolDisciplineValidation(t *testing.T) {
	for _, c := range []struct {
		edit func(*Config)
		path string
	}{
		{func(c *Config) { c.Backends.Queue.Discipline = "lifo" }, "backends.queue.discipline"},
		{func(c *Config) { c.Backends.Queue.Discipline = "codel"; c.Backends.Queue.CoDelTarget = -1 }, "backends.queue.codel_target"},
	} {
		var cfg Config
		cfg.Listeners = []ListenerConfig{{Addr: "127.0.0.1:0"}}
		cfg.Backends.Servers = []ServerConfig{{URL: "http://127.0.0.1:1"}}
		c.edit(&cfg)
		cfg.SetDefaults()
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: Validate() = %v", c.path, err)
		}
	}
}

// admin.token_file reads the token from a file (a mounted Secret); its
// errors name the file's line and the field, never the token.
func TestAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	must(t, os.WriteFile(good, []byte("0123456789abcdef0123\n"), 0o600))
	short := filepath.Join(dir, "short")
	must(t, os.WriteFile(short, []byte("s3cr3t\n"), 0o600))
	head := goodHead + "admin:\n  addr: 0.0.0.0:9901\n  allow_public: true\n"
	cfg, err := Parse("p.yaml", []byte(head+"  token_file: "+good+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Token != "0123456789abcdef0123" {
		t.Fatalf("token %q from the file", cfg.Admin.Token)
	}
	for _, tc := range []struct{ text, want string }{
		{"  token_file: " + filepath.Join(dir, "none") + "\n", "p.yaml:9: admin.token_file: "},
		{"  token_file: " + short + "\n", "p.yaml:9: admin.token_file: the token in"},
		{"  token: 0123456789abcdef0123\n  token_file: " + good + "\n", "p.yaml:10: admin.token_file: is set with token"},
	} {
		_, err := Parse("p.yaml", []byte(head+tc.text))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: error %v, want prefix %q (and no token)", tc.text, err, tc.want)
		}
	}
}

// auto's guardrails and a stage's tenants are validated with file:line:
// field errors.
func TestConfigTenantsAndGuardrailErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{`stages:
  - name: a
    controller: auto
    tenants:
      fair: true
      weights:
        acme: -2
`, "t.yaml:12: stages[0].tenants.weights.acme: -2 must be a finite weight > 0"},
		{`stages:
  - name: a
    controller: auto
    params:
      slo: 250ms
      max_reject_fraction: 2
`, "t.yaml:11: stages[0].params.max_reject_fraction: 2 is invalid"},
		{`stages:
  - name: a
    controller: auto
    params:
      min_rate: -5
`, "t.yaml:10: stages[0].params.min_rate: -5 is invalid"},
	} {
		_, err := Parse("t.yaml", []byte(goodHead+c.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("error %v, want prefix %q", err, c.want)
		}
	}
}
