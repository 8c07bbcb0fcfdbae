// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"time"

	sclient "github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/gate"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/admin"
	"github.com/sluicehq/sluice/proxy/buffer"
	"github.com/sluicehq/sluice/proxy/guard"
	"github.com/sluicehq/sluice/proxy/overload"
)

// Defaults of Config. Durations are wall-clock time.
const (
	DefaultAdminAddr         = admin.DefaultAddr
	DefaultReadHeaderTimeout = guard.DefaultReadHeaderTimeout // a listener's and the admin listener's
	DefaultIdleTimeout       = guard.DefaultIdleTimeout       // a listener's and the admin listener's
	// A listener's other defaults are package guard's, as is ReservedFDs.
	DefaultMaxConcurrency  = 256
	DefaultQueueMax        = 1024
	DefaultQueueTimeout    = time.Second
	DefaultDialTimeout     = 5 * time.Second
	DefaultResponseHeader  = 30 * time.Second
	DefaultIdleConnTimeout = 90 * time.Second
	DefaultDrainTimeout    = 30 * time.Second
	// BalanceRoundRobin and BalanceLeastInFlight are the values of
	// BackendsConfig.Balance.
	BalanceRoundRobin    = "round-robin"
	BalanceLeastInFlight = "least-in-flight"
)

// Config is the proxy's YAML configuration file: where to listen, the
// admin listener, the backend pool, and, inline at the top level, the
// admission policy (classes, stages, reject, shadow, degrade) of package
// policy.
//
// Lifecycle: decode (Parse/LoadFile, strict), SetDefaults,
// ResolveSecrets (the secrets' _file forms), Validate. A Config is not
// modified by the proxy once running; reloads build a new one.
type Config struct {
	// Listeners are the addresses the proxy serves clients on (at least
	// one).
	Listeners []ListenerConfig `yaml:"listeners"`
	// Admin is the separate listener of the admin API and metrics.
	Admin AdminConfig `yaml:"admin"`
	// Backends is the pool of upstream servers.
	Backends BackendsConfig `yaml:"backends"`
	// OverloadConfig is, inline, the overload sections (package
	// overload): utilization, resources, policer and shares.
	OverloadConfig `yaml:",inline"`
	// Cluster makes this instance one of several that share global
	// budgets and client shares through Redis (package cluster); nil
	// (the default) keeps every budget per instance. A reload applies
	// changes.
	Cluster *cluster.Config `yaml:"cluster,omitempty"`
	// MaxClientConnections caps the client connections of all listeners
	// together (default 0: the process's file-descriptor limit less the
	// upstream connections and guard.ReservedFDs). At the cap an idle
	// keep-alive connection is closed to make room, else the new
	// connection is reset at accept. Changing it needs a restart.
	MaxClientConnections int `yaml:"max_client_connections"`
	// DrainTimeout bounds how long a shutdown (SIGTERM, SIGINT) waits for
	// in-flight requests to complete before closing their connections
	// (default 30s).
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// Health is what the proxy answers to health probes (/healthz,
	// /readyz) and which of the backend's own probe paths pass through
	// unshed (HealthConfig). A reload applies changes.
	Health HealthConfig `yaml:"health"`
	// WatchConfig, when positive, is how often the proxy reads its
	// configuration file and reloads it when its content changed (a
	// mounted Kubernetes ConfigMap changes by a symlink swap, which no
	// signal announces); default 0: off, reload on SIGHUP or POST
	// /reload only.
	WatchConfig time.Duration `yaml:"watch_config"`
	// ResponseBuffering reads backends' responses into memory and
	// temporary files as fast as the backends send them, so that a slow
	// client does not hold a backend (nginx's proxy_buffering). A reload
	// applies changes.
	ResponseBuffering buffer.Config `yaml:"response_buffering"`
	// Telemetry exports traces and metrics over OTLP beside Prometheus;
	// without its otlp section nothing is exported. A reload applies
	// changed otlp.headers (and headers_file); changing the rest needs a
	// restart.
	Telemetry TelemetryConfig `yaml:"telemetry"`
	// AccessLog writes one line per request with its admission decision
	// (AccessLogConfig); nil (the default) writes none. A reload applies
	// changes.
	AccessLog *AccessLogConfig `yaml:"access_log,omitempty"`
	// Config is the admission policy, inline: classes, stages, reject,
	// shadow, degrade.
	policy.Config `yaml:",inline"`
}

// OverloadConfig names the overload sections (package overload) where
// Config embeds them: Config.Utilization, Config.Policer and the others
// are its fields.
type OverloadConfig = overload.Config

// GuardConfig names a listener's guard settings (package guard) where
// ListenerConfig embeds them: ListenerConfig.ReadTimeout,
// ListenerConfig.RequestBuffering and the others are its fields.
type GuardConfig = guard.Config

// ListenerConfig is one client-facing listener.
type ListenerConfig struct {
	// Addr is host:port, e.g. "0.0.0.0:8080" or "127.0.0.1:8080"
	// (required).
	Addr string `yaml:"addr"`
	// TLS, when set, serves HTTPS with these certificates (rotated when
	// their files change) and optionally verifies client certificates;
	// it enables HTTP/2 (negotiated by ALPN). Default none: plaintext.
	TLS *TLSConfig `yaml:"tls,omitempty"`
	// GuardConfig is, inline, the listener's guard (package guard): its
	// timeouts, request size limits and request buffering.
	GuardConfig `yaml:",inline"`
	// ProxyProtocol, when set, reads the PROXY protocol header (v1 and
	// v2) that trusted load balancers send before each connection's
	// bytes, and takes its client address (ProxyProtocolConfig); nil
	// (the default) reads none.
	ProxyProtocol *ProxyProtocolConfig `yaml:"proxy_protocol,omitempty"`
}

// AdminConfig is the admin listener (package admin): /metrics, /state,
// /config, /reload, /stages/{name}/target, /shadow, the dashboard /ui
// and optionally /debug/pprof.
type AdminConfig = admin.Config

// BackendsConfig is the upstream pool: servers, balancing, the bounded
// wait queue in front of them and the upstream transport.
type BackendsConfig struct {
	// Servers are the upstream servers (at least one).
	Servers []ServerConfig `yaml:"servers"`
	// Balance chooses a server for each request: "least-in-flight"
	// (default: fewest requests in flight, ties in rotation; a slower
	// server gets fewer requests, like HAProxy's leastconn) or
	// "round-robin". Servers at their max_concurrency are skipped by both.
	Balance string `yaml:"balance"`
	// Queue is the bounded FIFO of admitted requests waiting for a server
	// slot when every server is at its max_concurrency: the papers'
	// listen queue. Its length is exported and fed to controllers.
	Queue PoolQueueConfig `yaml:"queue"`
	// Timeouts bound the upstream exchange.
	Timeouts TimeoutsConfig `yaml:"timeouts"`
	// PreserveHost sends the client's Host header upstream (default true);
	// false sends the server URL's host.
	PreserveHost *bool `yaml:"preserve_host"`
	// MaxIdleConnsPerHost is the number of idle keep-alive connections
	// kept per server (default: the largest max_concurrency).
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
	// IdleConnTimeout closes idle upstream connections after this long
	// (default 90s).
	IdleConnTimeout time.Duration `yaml:"idle_conn_timeout"`
	// IgnoreClientAbort (default false) keeps an admitted request going
	// upstream when its client disconnects (like nginx's
	// proxy_ignore_client_abort): the server slot stays taken until the
	// backend answers or a timeout ends the exchange, so max_concurrency
	// bounds the work the backend is really doing even when clients give
	// up, as a process-per-request server's slots do. The answer is
	// discarded. By default the upstream request is canceled at once and
	// its slot freed, which spares work only if the backend notices.
	IgnoreClientAbort bool `yaml:"ignore_client_abort"`
	// Client is sluice's client side on the upstream calls (package
	// client's Config): throttling, retries and the deadline's least
	// remainder; by default no throttling (throttle.enabled false) and no
	// retries (retry.max_attempts 1). The headers it stamps are the hops
	// section's and its destinations the servers: priority_header,
	// tenant_header, timeout_header and max_destinations stay unset.
	Client sclient.Config `yaml:"client"`
	// TLS is the TLS towards https:// servers: CA bundle, client
	// certificate, server name, minimum version (UpstreamTLSConfig).
	// Default none: the system's roots, no client certificate, each
	// URL's host as the server name.
	TLS *UpstreamTLSConfig `yaml:"tls,omitempty"`
}

// ServerConfig is one upstream server.
type ServerConfig struct {
	// URL is http:// or https://host[:port][/base/path] (required). A
	// base path is prefixed to every request path.
	URL string `yaml:"url"`
	// MaxConcurrency is the most requests in flight to this server
	// (default 256).
	MaxConcurrency int `yaml:"max_concurrency"`
}

// PoolQueueConfig sizes the pool's wait queue.
type PoolQueueConfig struct {
	// Max is the most requests waiting for a server slot (default 1024;
	// 0 answers 503 at once when every server is at its
	// max_concurrency).
	Max *int `yaml:"max"`
	// Timeout is the longest a request waits in the queue before it gets
	// a 503 (default 1s).
	Timeout time.Duration `yaml:"timeout"`
	// Discipline is the queue's order: "fifo" (default), "codel" (FIFO,
	// but while the queue has not emptied for CoDelInterval a request
	// that has waited longer than CoDelTarget gets its 503 at once) or
	// "codel-lifo" (CoDel with adaptive LIFO: while the queue stands, the
	// newest request is served first). Facebook's request-queue CoDel
	// ("Fail at Scale", ACM Queue 2015).
	Discipline string `yaml:"discipline"`
	// CoDelTarget is CoDel's M, the longest wait tolerated in a standing
	// queue (default 5ms); CoDelInterval its N, how long the queue must
	// not have emptied to be standing (default 100ms).
	CoDelTarget   time.Duration `yaml:"codel_target"`
	CoDelInterval time.Duration `yaml:"codel_interval"`
}

// Queue disciplines (PoolQueueConfig.Discipline).
const (
	DisciplineFIFO      = "fifo"
	DisciplineCoDel     = "codel"
	DisciplineCoDelLIFO = "codel-lifo"
)

// TimeoutsConfig bounds the upstream exchange. A timeout answers 504.
type TimeoutsConfig struct {
	// Dial bounds connecting (and the TLS handshake) to a server
	// (default 5s).
	Dial time.Duration `yaml:"dial"`
	// ResponseHeader bounds the wait for the response headers after the
	// request was sent (default 30s).
	ResponseHeader time.Duration `yaml:"response_header"`
	// Overall bounds the whole exchange, from choosing a server to the
	// last byte of the response (default 0: no limit). It does not apply
	// to long-lived responses (upgrades, event streams, responses longer
	// than the stage's long_lived), and a cut-off body aborts the client
	// connection.
	Overall time.Duration `yaml:"overall"`
}

func fieldErr(path, format string, args ...any) error {
	return fielderr.Errorf(path, format, args...)
}

// SetDefaults fills the documented defaults of every unset field,
// including the policy's.
func (c *Config) SetDefaults() {
	c.Telemetry.setDefaults()
	if c.AccessLog != nil {
		c.AccessLog.setDefaults()
	}
	for i := range c.Listeners {
		c.Listeners[i].setDefaults()
	}
	c.Admin.SetDefaults()
	c.Backends.setDefaults()
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	c.Health.setDefaults()
	c.ResponseBuffering.SetDefaults()
	policySetDefaults(&c.Config)
	c.setUpstreamClientDefaults()
	c.OverloadConfig.SetDefaults(&c.Config)
	if c.Cluster != nil {
		c.Cluster.SetDefaults()
	}
}

// setDefaults fills a listener's defaults.
func (l *ListenerConfig) setDefaults() {
	l.GuardConfig.SetDefaults()
	l.ProxyProtocol.setDefaults()
	l.TLS.SetDefaults()
}

// setPtrDefault sets *p to a pointer to its own copy of def when *p is
// nil: the default of a setting kept as a pointer because its zero value
// is itself a choice (false, 0). A set *p is left as it is.
func setPtrDefault[T any](p **T, def T) {
	if *p == nil {
		*p = &def
	}
}

// setDefaults fills the pool's defaults but the upstream client side's
// (Config.setUpstreamClientDefaults, which needs the hops section).
func (b *BackendsConfig) setDefaults() {
	maxConc := 0
	for i := range b.Servers {
		if b.Servers[i].MaxConcurrency == 0 {
			b.Servers[i].MaxConcurrency = DefaultMaxConcurrency
		}
		maxConc = max(maxConc, b.Servers[i].MaxConcurrency)
	}
	b.Balance = cmp.Or(b.Balance, BalanceLeastInFlight)
	setPtrDefault(&b.Queue.Max, DefaultQueueMax)
	b.Queue.Discipline = cmp.Or(b.Queue.Discipline, DisciplineFIFO)
	if b.Queue.Discipline != DisciplineFIFO {
		b.Queue.CoDelTarget = cmp.Or(b.Queue.CoDelTarget, gate.DefaultCoDelTarget)
		b.Queue.CoDelInterval = cmp.Or(b.Queue.CoDelInterval, gate.DefaultCoDelInterval)
	}
	b.Queue.Timeout = cmp.Or(b.Queue.Timeout, DefaultQueueTimeout)
	b.Timeouts.Dial = cmp.Or(b.Timeouts.Dial, DefaultDialTimeout)
	b.Timeouts.ResponseHeader = cmp.Or(b.Timeouts.ResponseHeader, DefaultResponseHeader)
	setPtrDefault(&b.PreserveHost, true)
	if b.MaxIdleConnsPerHost == 0 {
		b.MaxIdleConnsPerHost = max(maxConc, 1)
	}
	b.IdleConnTimeout = cmp.Or(b.IdleConnTimeout, DefaultIdleConnTimeout)
	b.TLS.SetDefaults()
}

// Validate reports the first invalid field as a *sluice.FieldError naming its
// path and value. It checks the policy part too, and that TLS files load.
// Call SetDefaults first.
func (c *Config) Validate() error {
	seen, err := c.validateListeners()
	if err != nil {
		return err
	}
	if c.MaxClientConnections < 0 {
		return fieldErr("max_client_connections", "%d is invalid: must be > 0, or 0 for the file-descriptor limit", c.MaxClientConnections)
	}
	if err := c.validateAdminAddr(seen); err != nil {
		return err
	}
	for _, check := range []func() error{
		c.Admin.Validate, c.Backends.validate, c.validateBackendsTLS, c.validateTimes, c.Health.validate,
		c.ResponseBuffering.Validate, func() error { return policyValidate(&c.Config) }, c.validateClientCertKeys,
		c.validateUpstreamClient, c.validateCluster, c.Telemetry.validate, c.validateAccessLog,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return c.OverloadConfig.Validate(&c.Config)
}

// validateAdminAddr checks admin.addr against the listeners' addresses
// (seen, from validateListeners).
func (c *Config) validateAdminAddr(seen map[string]string) error {
	if err := checkHostPort(c.Admin.Addr); err != nil {
		return fieldErr("admin.addr", "%q is invalid: %v", c.Admin.Addr, err)
	}
	if prev, dup := seen[c.Admin.Addr]; dup && !anyPort(c.Admin.Addr) {
		return fieldErr("admin.addr", "%q is already used by %s", c.Admin.Addr, prev)
	}
	return nil
}

// validateBackendsTLS checks backends.tls against the servers.
func (c *Config) validateBackendsTLS() error {
	if c.Backends.TLS == nil {
		return nil
	}
	urls := make([]string, len(c.Backends.Servers))
	for i, s := range c.Backends.Servers {
		urls[i] = s.URL
	}
	return c.Backends.TLS.Validate("backends.tls", urls)
}

// validateTimes checks drain_timeout and watch_config.
func (c *Config) validateTimes() error {
	if c.DrainTimeout < 0 {
		return fieldErr("drain_timeout", "%v is invalid: must be a positive duration", c.DrainTimeout)
	}
	if c.WatchConfig < 0 {
		return fieldErr("watch_config", "%v is invalid: must be a positive duration, or 0 for off", c.WatchConfig)
	}
	return nil
}

// validateAccessLog checks access_log when it is set.
func (c *Config) validateAccessLog() error {
	if c.AccessLog == nil {
		return nil
	}
	return c.AccessLog.validate()
}

// validateListeners checks the listeners and returns the addresses
// they use, by address, with the path of their field.
func (c *Config) validateListeners() (map[string]string, error) {
	if len(c.Listeners) == 0 {
		return nil, fieldErr("listeners", "at least one listener is required")
	}
	seen := map[string]string{}
	for i, l := range c.Listeners {
		p := fmt.Sprintf("listeners[%d]", i)
		if err := checkHostPort(l.Addr); err != nil {
			return nil, fieldErr(p+".addr", "%q is invalid: %v", l.Addr, err)
		}
		if prev, dup := seen[l.Addr]; dup && !anyPort(l.Addr) {
			return nil, fieldErr(p+".addr", "%q is already used by %s", l.Addr, prev)
		}
		seen[l.Addr] = p + ".addr"
		if err := l.validate(p); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

// validate checks the listener at path p ("listeners[0]") but its
// address.
func (l *ListenerConfig) validate(p string) error {
	if l.TLS != nil {
		if err := l.TLS.Validate(p + ".tls"); err != nil {
			return err
		}
	}
	if err := fielderr.Under(p, l.GuardConfig.Validate()); err != nil {
		return err
	}
	return l.ProxyProtocol.validate(p + ".proxy_protocol")
}

func (b *BackendsConfig) validate() error {
	if len(b.Servers) == 0 {
		return fieldErr("backends.servers", "at least one server is required")
	}
	seen := map[string]int{}
	for i, s := range b.Servers {
		p := fmt.Sprintf("backends.servers[%d]", i)
		if _, err := parseBackendURL(s.URL); err != nil {
			return fieldErr(p+".url", "%q is invalid: %v", redactURL(s.URL), err)
		}
		if j, dup := seen[s.URL]; dup {
			return fieldErr(p+".url", "%q is already backends.servers[%d]", s.URL, j)
		}
		seen[s.URL] = i
		if s.MaxConcurrency < 1 {
			return fieldErr(p+".max_concurrency", "%d is invalid: must be ≥ 1", s.MaxConcurrency)
		}
	}
	switch b.Balance {
	case BalanceRoundRobin, BalanceLeastInFlight:
	default:
		return fieldErr("backends.balance", "%q is invalid: must be %s or %s", b.Balance, BalanceRoundRobin, BalanceLeastInFlight)
	}
	if b.Queue.Max == nil || *b.Queue.Max < 0 {
		v := "unset"
		if b.Queue.Max != nil {
			v = fmt.Sprint(*b.Queue.Max)
		}
		return fieldErr("backends.queue.max", "%s is invalid: must be ≥ 0", v)
	}
	switch b.Queue.Discipline {
	case DisciplineFIFO, DisciplineCoDel, DisciplineCoDelLIFO:
	default:
		return fieldErr("backends.queue.discipline", "%q is invalid: must be %s, %s or %s", b.Queue.Discipline,
			DisciplineFIFO, DisciplineCoDel, DisciplineCoDelLIFO)
	}
	if b.Queue.CoDelTarget < 0 {
		return fieldErr("backends.queue.codel_target", "%v is invalid: must be a positive duration", b.Queue.CoDelTarget)
	}
	if b.Queue.CoDelInterval < 0 {
		return fieldErr("backends.queue.codel_interval", "%v is invalid: must be a positive duration", b.Queue.CoDelInterval)
	}
	if b.Queue.Timeout <= 0 {
		return fieldErr("backends.queue.timeout", "%v is invalid: must be a positive duration", b.Queue.Timeout)
	}
	if b.Timeouts.Dial <= 0 {
		return fieldErr("backends.timeouts.dial", "%v is invalid: must be a positive duration", b.Timeouts.Dial)
	}
	if b.Timeouts.ResponseHeader <= 0 {
		return fieldErr("backends.timeouts.response_header", "%v is invalid: must be a positive duration", b.Timeouts.ResponseHeader)
	}
	if b.Timeouts.Overall < 0 {
		return fieldErr("backends.timeouts.overall", "%v is invalid: must be a positive duration or 0 (no limit)", b.Timeouts.Overall)
	}
	if b.MaxIdleConnsPerHost < 1 {
		return fieldErr("backends.max_idle_conns_per_host", "%d is invalid: must be ≥ 1", b.MaxIdleConnsPerHost)
	}
	if b.IdleConnTimeout <= 0 {
		return fieldErr("backends.idle_conn_timeout", "%v is invalid: must be a positive duration", b.IdleConnTimeout)
	}
	return nil
}

// parseBackendURL parses an upstream server URL: http or https, a host,
// no query, fragment or user info.
func parseBackendURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, fmt.Errorf("a URL such as http://127.0.0.1:8081 is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme must be http or https")
	}
	if u.Host == "" {
		return nil, fmt.Errorf("a host is required")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("must not carry a query, fragment or user info")
	}
	return u, nil
}

func checkHostPort(addr string) error {
	if addr == "" {
		return fmt.Errorf("an address host:port is required")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if port == "" {
		return fmt.Errorf("a port is required")
	}
	return nil
}

// anyPort reports whether addr asks for any free port (port 0).
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// restartField returns the YAML path of the first field that differs
// between the running configuration a and b and cannot change without a
// restart ("listeners[0].addr", "admin.addr", "telemetry.otlp.endpoint"),
// or "" when a reload can apply b. Restart-only are the client and admin
// listeners, the utilization sensor, the resource rules, the policer,
// max_client_connections and telemetry, except what a reload applies in
// them: every secret and its file form (admin.token, admin.token_file,
// telemetry.otlp.headers, headers_file) and admin.public.
func restartField(a, b *Config) string {
	for _, f := range []struct {
		path string
		a, b any
	}{
		{"listeners", a.Listeners, b.Listeners},
		{"admin", a.Admin, b.Admin},
		{"max_client_connections", a.MaxClientConnections, b.MaxClientConnections},
		{"utilization", a.Utilization, b.Utilization},
		{"resources", a.Resources, b.Resources},
		{"policer", a.Policer, b.Policer},
		{"telemetry", a.Telemetry, b.Telemetry},
	} {
		if p := firstDiff(f.path, reflect.ValueOf(f.a), reflect.ValueOf(f.b), reloadable); p != "" {
			return p
		}
	}
	return ""
}

// reloadable are the paths in the restart-only sections that a reload
// applies besides the secrets, with [] for any list index
// ("listeners[].x").
var reloadable = map[string]bool{"admin.public": true}

// restartNeeded refuses a configuration that changes a restart-only
// field (restartField), naming it.
func restartNeeded(running, next *Config) error {
	if p := restartField(running, next); p != "" {
		return fieldErr(p, "changing it needs a restart (a reload applies backends, classes, stages, reject, shadow, "+
			"degrade, shares, cluster, health, drain_timeout, admin.token, admin.public and telemetry.otlp.headers)")
	}
	return nil
}
