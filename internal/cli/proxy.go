// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
)

// proxyFlags are the flags of `sluice proxy`.
type proxyFlags struct {
	config     string
	listen     string
	backends   []string
	controller string
	slo        time.Duration
	targetP90  time.Duration
	targetMean time.Duration
	admin      string
	// adminTokenFile holds the admin token (a file keeps it out of ps).
	adminTokenFile string
	shadow         bool
	pprof          bool
	buffering      bool // --response-buffering
	logLevel       string
	logFormat      string // --log-format: text or json
	// clusterRedis and clusterInstance override (or create) the cluster
	// section, for every instance of a cluster started from one file.
	clusterRedis    []string
	clusterInstance string
	// trusted are the quick start's classes.trusted_proxies: the hops
	// before this one, whose priority and tenant headers it believes.
	trusted []string
}

// NewProxyCmd returns the proxy command: sluice in front of a service,
// from a config file or the quick-start flags.
func NewProxyCmd() *cobra.Command {
	var f proxyFlags
	cmd := &cobra.Command{
		Use:   "proxy (--config FILE | --listen ADDR --backend URL ...)",
		Short: "Run the reverse proxy with admission control in front of a service",
		Long:  proxyLong,
		Example: `  sluice proxy --listen 127.0.0.1:8080 --backend http://127.0.0.1:8081
  sluice proxy --listen 127.0.0.1:8080 --backend http://127.0.0.1:8081 --slo 250ms
  sluice proxy --listen 127.0.0.1:8080 --backend http://127.0.0.1:8081 --controller seda --target-p90 500ms
  sluice proxy --listen 127.0.0.1:8080 --backend http://127.0.0.1:8081 --controller yaksha --target-mean 200ms
  sluice proxy --config examples/seda.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	f.register(cmd.Flags())
	return cmd
}

// proxyLong is the proxy command's help text.
const proxyLong = `proxy puts sluice in front of an HTTP service: it measures every
response from its arrival to its last byte, and its controllers admit,
degrade or reject requests early (503 with Retry-After) to keep response
times at their target.

With --config FILE it runs the configuration file (docs/config.md;
check it first with 'sluice validate FILE'). Without a file, the quick
start proxies --listen to --backend with one stage for every request:

  --controller auto     (default, as for a stage of a file without a
                        controller) told only --slo, the response time
                        admitted answers must meet (default 500ms): finds
                        the backend's useful concurrency by itself, queues
                        briefly within the SLO and rejects the excess at
                        once
  --controller seda     keep the 90th percentile at --target-p90 (rate_max
                        raised to 1e6 req/s so a fast service is not capped
                        at the paper's 5000; recover_factor 2 and
                        drained_reset so that a rate cut by a stall climbs
                        back within seconds; a bucket of 50 requests so
                        that arrival jitter is not refused)
  --controller yaksha   keep the mean response time at --target-mean
  --controller gradient2, envoy-gradient, bbr
                        the peers' adaptive concurrency limits (Netflix,
                        Envoy, kratos/Sentinel) with their own defaults
  --controller none     measure only

Responses are buffered (response_buffering in docs/config.md): read from
the backend as fast as it sends them, into memory and then temporary
files, so that clients that read slowly hold no backend slot;
--response-buffering=false passes them through.

Across hops (docs/hops.md): a request's priority, tenant and deadline
travel in X-Sluice-Priority, X-Sluice-Tenant and X-Sluice-Timeout (the
time left, "250m" is 250 ms). The priority and the tenant are believed
only from --trusted-proxy peers (classes.trusted_proxies; give the
address of the hop in front, such as another sluice); the timeout from
anyone, clamped to 5m. A request whose deadline passes, or would pass
before it is served, is never sent on; the proxy passes on the time
left. Its upstream calls are not retried and not throttled unless
backends.client says so, so a chain of sluice proxies cannot multiply a
user's request: each hop rejects its excess at once (503 with
Retry-After) instead.

gRPC (docs/grpc.md): a listener without TLS also speaks HTTP/2 with prior
knowledge (h2c), one with TLS negotiates h2; a gRPC call goes upstream
over h2c to an http:// backend and over TLS to an https:// one, all four
call shapes and trailers intact. Its grpc-timeout is its deadline, its
grpc-status its outcome, and a rejected call gets a gRPC answer
(grpc-status 8, RESOURCE_EXHAUSTED, with a RetryInfo pushback) instead of
a 503. Stages select calls with match.grpc_service or match.grpc_method.

The admin API (metrics, state, reload, targets, and the live dashboard at
/ui) listens on --admin (default 127.0.0.1:9901), with the probes
/healthz (alive) and /readyz (a backend reachable, not draining) that
need no token; requests for the backend's own /healthz, /readyz and
/livez pass through unshed (health in docs/config.md). SIGHUP reloads the
file (an invalid file keeps the running configuration), and so does a
change of its content with watch_config set (a Kubernetes ConfigMap;
docs/operations.md); SIGTERM or SIGINT makes /readyz answer 503, stops
accepting, lets in-flight requests finish for up to drain_timeout, and
exits 0.`

// run runs the proxy: the file's configuration or the quick start's.
func (f *proxyFlags) run(cmd *cobra.Command) error {
	logger, err := newLogger(cmd, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	var cfg *proxy.Config
	if f.config != "" {
		if err := f.onlyConfig(cmd); err != nil {
			return err
		}
		if cfg, err = proxy.LoadFile(f.config); err != nil {
			return usageError{err}
		}
	} else if cfg, err = f.quickStart(cmd); err != nil {
		return err
	}
	adjust := f.clusterAdjust()
	if adjust != nil {
		if err := adjust(cfg); err != nil {
			return usageError{fmt.Errorf("%s: %w", configName(f.config), err)}
		}
	}
	v := Version()
	srv, err := proxy.New(cfg, proxy.Options{ConfigFile: f.config, Logger: logger, Adjust: adjust,
		Build: proxy.BuildInfo{Version: v.Version, Revision: v.Commit, GoVersion: v.GoVersion}})
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", configName(f.config), err)}
	}
	if err := srv.Listen(); err != nil {
		// A configured address that cannot be bound is a bad
		// configuration: exit 2 naming the file, line and field.
		if f.config != "" {
			return usageError{proxy.LocateError(f.config, err)}
		}
		return usageError{quickStartError(err)}
	}
	logger.Info("live dashboard", "url", "http://"+srv.AdminAddr().String()+"/ui")
	return serveProxy(cmd.Context(), srv, logger)
}

// register declares the proxy command's flags into f.
func (f *proxyFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.config, "config", "", "configuration file (YAML; see docs/config.md)")
	fl.StringVar(&f.listen, "listen", "", "quick start: address to listen on (host:port)")
	fl.StringArrayVar(&f.backends, "backend", nil, "quick start: backend URL, e.g. http://127.0.0.1:8081 (repeat for several)")
	fl.StringVar(&f.controller, "controller", policy.DefaultController, "quick start: auto, seda, yaksha, gradient2, envoy-gradient, bbr or none")
	fl.DurationVar(&f.slo, "slo", 0, "quick start, auto: the response time admitted answers must meet (default 500ms)")
	fl.DurationVar(&f.targetP90, "target-p90", 0, "quick start, seda: 90th-percentile response-time target, e.g. 500ms")
	fl.DurationVar(&f.targetMean, "target-mean", 0, "quick start, yaksha: mean response-time target, e.g. 200ms")
	fl.StringVar(&f.admin, "admin", proxy.DefaultAdminAddr, "quick start: admin API address (loopback only)")
	fl.StringVar(&f.adminTokenFile, "admin-token-file", "", "quick start: file holding the admin token (admin.token), required by every admin endpoint but /healthz and /readyz")
	fl.BoolVar(&f.shadow, "shadow", false, "quick start: decide and record, but admit every request")
	fl.BoolVar(&f.buffering, "response-buffering", true, "quick start: buffer responses in memory and temporary files so that slow clients hold no backend slot (response_buffering.enabled)")
	fl.BoolVar(&f.pprof, "pprof", false, "quick start: serve Go's profiler at /debug/pprof/ on the admin address (admin.pprof; docs/profiling.md)")
	fl.StringArrayVar(&f.trusted, "trusted-proxy", nil, "quick start: address or CIDR of a trusted hop in front (classes.trusted_proxies): its X-Forwarded-For, X-Sluice-Priority and X-Sluice-Tenant are believed (repeat for several)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text (logfmt-style key=value) or json (one JSON object per line, for log shippers)")
	fl.StringArrayVar(&f.clusterRedis, "cluster-redis", nil, "cluster mode: Redis address host:port (repeat for a Redis Cluster's seeds); sets cluster.addrs, adding a cluster section if the file has none")
	fl.StringVar(&f.clusterInstance, "cluster-instance", "", "cluster mode: this instance's id (cluster.instance; default host name and pid)")
}

// clusterAdjust returns the override of the cluster section that the
// --cluster-* flags ask for (nil without them); it is applied at start
// and to every reloaded file.
func (f *proxyFlags) clusterAdjust() func(*proxy.Config) error {
	if len(f.clusterRedis) == 0 && f.clusterInstance == "" {
		return nil
	}
	return func(c *proxy.Config) error {
		if c.Cluster == nil {
			if len(f.clusterRedis) == 0 {
				return fmt.Errorf("--cluster-instance needs --cluster-redis or a cluster section")
			}
			c.Cluster = &cluster.Config{}
		}
		if len(f.clusterRedis) > 0 {
			c.Cluster.Addrs = append([]string(nil), f.clusterRedis...)
		}
		if f.clusterInstance != "" {
			c.Cluster.Instance = f.clusterInstance
		}
		c.Cluster.SetDefaults()
		if err := c.Validate(); err != nil {
			return fmt.Errorf("with --cluster-redis/--cluster-instance: %w", err)
		}
		return nil
	}
}

// onlyConfig refuses quick-start flags next to --config.
func (f *proxyFlags) onlyConfig(cmd *cobra.Command) error {
	for _, name := range []string{"listen", "backend", "controller", "slo", "target-p90", "target-mean", "admin", "admin-token-file", "shadow", "pprof", "response-buffering", "trusted-proxy"} {
		if cmd.Flags().Changed(name) {
			return usagef("--%s is a quick-start flag: set it in %s instead, or drop --config", name, f.config)
		}
	}
	return nil
}

// quickStart builds the configuration of the no-file quick start.
func (f *proxyFlags) quickStart(cmd *cobra.Command) (*proxy.Config, error) {
	if f.listen == "" || len(f.backends) == 0 {
		return nil, usagef("give --config FILE, or --listen ADDR and --backend URL for the quick start (see sluice proxy --help)")
	}
	// In a fixed order, so that two misplaced objective flags name the
	// same one on every run.
	for _, o := range []struct{ flag, ctrl string }{{"slo", "auto"}, {"target-p90", "seda"}, {"target-mean", "yaksha"}} {
		if cmd.Flags().Changed(o.flag) && f.controller != o.ctrl {
			return nil, usagef("--%s is for --controller %s, not %s", o.flag, o.ctrl, f.controller)
		}
	}
	ctrl, err := f.quickStartControl()
	if err != nil {
		return nil, err
	}
	cfg := &proxy.Config{
		Listeners: []proxy.ListenerConfig{{Addr: f.listen}},
		Admin:     proxy.AdminConfig{Addr: f.admin, Pprof: f.pprof},
	}
	// The token file is read as a configuration file's admin.token_file
	// is (internal/secret: its first line, never the placeholder).
	cfg.Admin.TokenFile = f.adminTokenFile
	if err := cfg.ResolveSecrets(); err != nil {
		return nil, usageError{quickStartError(err)}
	}
	for _, b := range f.backends {
		cfg.Backends.Servers = append(cfg.Backends.Servers, proxy.ServerConfig{URL: b})
	}
	st := policy.StageConfig{Name: "all", Match: policy.MatchConfig{PathPrefix: "/"}, Control: ctrl}
	if f.controller == "seda" {
		// A bucket of 5 tokens (the stage default) refuses every burst of
		// more than 5 arrivals, even at a rate far above the offered load
		// (which track_demand then keeps where it is): a few tens of ms of
		// client or scheduler jitter at a few hundred req/s become 503s.
		// 50 absorbs ~170 ms of jitter at 300 req/s and adds at most 50
		// requests at once to a backend under a binding rate.
		st.Burst = quickStartSEDABurst
	}
	cfg.Stages = []policy.StageConfig{st}
	cfg.Shadow = f.shadow
	cfg.ResponseBuffering.Enabled = &f.buffering
	cfg.Classes.TrustedProxies = append([]string(nil), f.trusted...)
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, usageError{quickStartError(err)}
	}
	return cfg, nil
}

// quickStartControl returns the configuration of the quick start's
// controller: --controller at its defaults, with the objective its flag
// gives.
func (f *proxyFlags) quickStartControl() (control.Config, error) {
	switch f.controller {
	case "auto":
		c := auto.DefaultConfig()
		if f.slo != 0 {
			c.SLO = f.slo
		}
		return &c, nil
	case "seda":
		if f.targetP90 == 0 {
			return nil, usagef("--controller seda needs --target-p90, e.g. --target-p90 500ms")
		}
		c := control.DefaultSEDAConfig()
		c.Target = f.targetP90
		// The paper's rate_max of 5000 req/s would cap a faster service;
		// the quick start starts open, and track_demand cuts from the
		// admitted rate on the first overload.
		c.RateMax, c.InitialRate = 1e6, 1e6
		// After a stall cuts the rate to the floor, climb back in a few
		// runs rather than by adj_i-sized steps, and do not wait for the
		// smoothed p90 to forget the drained backlog before that climb
		// starts.
		c.RecoverFactor, c.DrainedReset = 2, true
		return &c, nil
	case "yaksha":
		if f.targetMean == 0 {
			return nil, usagef("--controller yaksha needs --target-mean, e.g. --target-mean 200ms")
		}
		c := control.DefaultYakshaConfig()
		c.Tref = f.targetMean
		return &c, nil
	case "gradient2", "envoy-gradient", "bbr", "none":
		return control.NewConfig(f.controller)
	}
	return nil, usagef("--controller %q is invalid: the quick start offers auto, seda, yaksha, gradient2, envoy-gradient, bbr or none (use --config for the others)", f.controller)
}

// quickStartSEDABurst is the token-bucket size of the quick start's seda
// stage, in requests.
const quickStartSEDABurst = 50

// quickStartError names the flag behind a validation error of the quick
// start configuration.
func quickStartError(err error) error {
	msg := err.Error()
	for _, m := range []struct{ path, flag string }{
		{"listeners[0].addr", "--listen"}, {"admin.addr", "--admin"}, {"admin.token", "--admin-token-file"}, {"backends.servers", "--backend"},
		{"stages[0].params.target", "--target-p90"}, {"stages[0].params.tref", "--target-mean"},
		{"stages[0].params.slo", "--slo"}, {"classes.trusted_proxies", "--trusted-proxy"},
		{"stages[0]", "--controller"},
	} {
		if strings.HasPrefix(msg, m.path) {
			return fmt.Errorf("%s: %s", m.flag, msg)
		}
	}
	return err
}

func configName(file string) string {
	if file == "" {
		return "quick start"
	}
	return file
}

// newLogger returns a logger on stderr at the named level, in the named
// format: text (slog's key=value lines) or json (slog's JSON lines: time,
// level, msg and the attributes as keys).
func newLogger(cmd *cobra.Command, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q is invalid: must be debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), opts)), nil
	}
	return nil, usagef("--log-format %q is invalid: must be text or json", format)
}

// serveProxy runs srv until SIGTERM or SIGINT, reloading on SIGHUP.
func serveProxy(parent context.Context, srv *proxy.Server, logger *slog.Logger) error {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := srv.Reload(); err != nil {
					logger.Error("reload refused; the running configuration stays", "err", err)
				}
			}
		}
	}()
	err := srv.Serve(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
