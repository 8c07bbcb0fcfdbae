// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"reflect"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	sclient "github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/strictyaml"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/admin"
	"github.com/sluicehq/sluice/proxy/buffer"
	"github.com/sluicehq/sluice/proxy/guard"
	"github.com/sluicehq/sluice/proxy/internal/dashboard"
	"github.com/sluicehq/sluice/proxy/internal/h1"
	"github.com/sluicehq/sluice/proxy/internal/telemetry"
	"github.com/sluicehq/sluice/proxy/tlsconf"
	"github.com/sluicehq/sluice/share"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// ConfigFile is the file the configuration was loaded from; Reload
	// (SIGHUP, POST /reload) reads it again. Empty disables reloading.
	ConfigFile string
	// Logger receives the proxy's logs (nil: slog.Default()).
	Logger *slog.Logger
	// Registerer receives the proxy's metrics (nil: a new registry with
	// the Go and process collectors). Nothing is registered globally
	// unless it is passed here.
	Registerer prometheus.Registerer
	// Gatherer is what GET /metrics serves and OTLP exports (nil: the
	// Registerer when it is also a Gatherer, as a *prometheus.Registry
	// is, else the new registry made for a nil Registerer). A Registerer
	// that is not a Gatherer (one wrapped with a prefix or labels) needs
	// it: New refuses the pair otherwise.
	Gatherer prometheus.Gatherer
	// Adjust, when set, is applied to every configuration Reload reads
	// from ConfigFile, after its defaults and validation; it must leave
	// the configuration valid or return an error (the reload is then
	// refused). The command line's overrides (--cluster-redis,
	// --cluster-instance) reach reloads this way.
	Adjust func(*Config) error
	// Build says which binary runs: the labels of sluice_build_info and
	// the OpenTelemetry resource's service.version. The sluice command
	// passes what `sluice version` prints; the zero value reports
	// version "(unknown)" and the running Go version.
	Build BuildInfo
}

// BuildInfo names the running binary's version.
type BuildInfo struct {
	// Version is the release version ("v1.2.3"), or "(devel)" for a
	// build from a source tree.
	Version string
	// Revision is the VCS commit the binary was built from ("" unknown).
	Revision string
	// GoVersion is the toolchain that built it ("go1.26.8").
	GoVersion string
}

// withDefaults fills what b leaves empty: version "(unknown)" and the
// running Go version.
func (b BuildInfo) withDefaults() BuildInfo {
	b.Version = cmp.Or(b.Version, "(unknown)")
	if b.GoVersion == "" {
		b.GoVersion = runtime.Version()
	}
	return b
}

// Server is a running proxy: its client listeners, the admin listener,
// and the configuration generations it swaps on reload.
//
// Lifecycle: New (builds the first generation), Listen (binds every
// address), Serve (serves until its context ends, then drains). Apply and
// Reload may be called at any time and are serialised. A Server is safe
// for concurrent use.
type Server struct {
	h    *Handler
	m    *metrics
	reg  prometheus.Registerer
	gath prometheus.Gatherer
	log  *slog.Logger
	file string

	adjust func(*Config) error // Options.Adjust

	ov *overloadRun // sensors, resource rules, the connection policer and its kernel path (package overload)

	adm       *admin.API           // the admin API (package admin; its view of the server: admin.go)
	dash      *dashboard.Dashboard // the live dashboard (adm's; its view: dashboard.go)
	conns     *guard.Conns         // the cap on client connections
	connsFrom string               // where the cap comes from
	cm        *guard.Metrics       // client-side refusals and connections
	clm       *cluster.Metrics     // cluster mode's metrics, registered on first use
	ready     readiness            // what /readyz answers (health.go)

	ppRejected *prometheus.CounterVec // proxy_proxy_protocol_rejected_total (proxyproto.go)
	tlsm       *tlsconf.Metrics       // the TLS settings' metrics (package tlsconf)
	tlsw       []*tlsconf.Watch       // the listeners' and the admin listener's TLS, after Listen

	watchMu sync.Mutex
	fileSum [sha256.Size]byte    // digest of the file content last read by a reload or the watch
	tel     *telemetry.Telemetry // OTLP export (telemetry.otlp), nil when off

	// secretSums are the digests of the secret files as the last reload
	// read them, by name, under watchMu (watch.go).
	secretSums map[string][sha256.Size]byte

	mu       sync.Mutex // serialises Apply and the runner lifecycle
	runCtx   context.Context
	running  bool
	version  uint64
	servers  []*http.Server
	lns      []net.Listener
	admin    *http.Server
	adminLn  net.Listener
	closed   bool
	stopRuns context.CancelFunc
	runs     sync.WaitGroup // the server-wide loops (policer, samplers)

	// manual, set by tests before Serve, leaves every control loop to
	// explicit Step calls (policy, policer, shares).
	manual bool
}

// New builds a server for a validated config (with defaults set). It does
// not listen yet.
func New(cfg *Config, opts Options) (*Server, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	reg, gath, err := registryOf(opts)
	if err != nil {
		return nil, err
	}
	m := newMetrics()
	s := &Server{h: newHandler(m, logger), m: m, reg: reg, gath: gath, log: logger, file: opts.ConfigFile, adjust: opts.Adjust,
		tlsm: tlsconf.NewMetrics()}
	s.h.ready = &s.ready
	s.adm = admin.New(adminServer{s}, admin.Options{Logger: logger, Gatherer: gath, MetricsLog: serverLog(logger),
		Healthz: http.HandlerFunc(serveHealthz), Readyz: http.HandlerFunc(s.ready.serve), View: dashView{s}})
	s.dash = s.adm.Dashboard()
	ov, err := buildOverload(cfg, s.h, logger, time.Now())
	if err != nil {
		return nil, err
	}
	s.ov = ov
	g, err := s.newGeneration(cfg, nil)
	if err != nil {
		return nil, err
	}
	if cfg.AccessLog != nil {
		out, err := openAccessLog(cfg.AccessLog.Path)
		if err != nil {
			return nil, err
		}
		s.h.alog.use(out)
	}
	s.h.gen.Store(g)
	s.h.buf.Use(&g.buf)
	if n, err := buffer.SweepTempFiles(cfg.ResponseBuffering.TempDir); err != nil {
		logger.Warn("response buffering: cannot remove stale temporary files", "dir", cfg.ResponseBuffering.TempDir, "err", err)
	} else if n > 0 {
		logger.Info("response buffering: removed stale temporary files of processes no longer running", "files", n)
	}
	if err := m.register(reg, s.h, s.ov); err != nil {
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	max, how := clientConnCap(cfg)
	s.conns, s.connsFrom = guard.NewConns(max), how
	s.cm = guard.NewMetrics(func() *guard.Conns { return s.conns })
	s.h.buf.CountConnections(s.conns.Live)
	s.h.cm = s.cm
	for _, c := range s.cm.Collectors() {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("proxy: metrics: %w", err)
		}
	}
	if err := s.tlsm.Register(reg); err != nil {
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	if err := reg.Register(readyCollector{&s.ready}); err != nil {
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	for _, c := range s.h.alog.collectors() {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("proxy: metrics: %w", err)
		}
	}
	if err := s.dash.Register(reg); err != nil {
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	if err := s.registerProxyProtocol(cfg, reg); err != nil {
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	build := opts.Build.withDefaults()
	if err := reg.Register(buildInfo(build)); err != nil {
		return nil, fmt.Errorf("proxy: metrics: %w", err)
	}
	if s.tel, err = newTelemetry(&cfg.Telemetry, s, build.Version); err != nil {
		return nil, err
	}
	s.h.tel = s.tel
	return s, nil
}

// Handler returns the proxy's request handler (for embedding and
// benchmarks). It serves whatever generation is running.
func (s *Server) Handler() http.Handler { return s.h }

// Gatherer returns what GET /metrics serves (Options.Gatherer).
func (s *Server) Gatherer() prometheus.Gatherer { return s.gath }

// registryOf returns where the metrics of a server built with opts are
// registered and gathered from (Options.Registerer, Options.Gatherer).
func registryOf(opts Options) (prometheus.Registerer, prometheus.Gatherer, error) {
	reg, gath := opts.Registerer, opts.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg = r
	}
	if gath == nil {
		g, ok := reg.(prometheus.Gatherer)
		if !ok {
			return nil, nil, fmt.Errorf("proxy: Options.Registerer (%T) is not a Gatherer: set Options.Gatherer to what /metrics serves", reg)
		}
		gath = g
	}
	return reg, gath, nil
}

// Config returns the running configuration. It must not be modified.
func (s *Server) Config() *Config { return s.h.gen.Load().cfg }

// newGeneration builds the policy and pool of cfg. With prev, an
// unchanged backends section keeps its pool (queue, in-flight counts,
// connections), and unchanged stages keep their controller state.
func (s *Server) newGeneration(cfg *Config, prev *generation) (*generation, error) {
	var pool *Pool
	var err error
	if err := cfg.validateUpstreamClient(); err != nil {
		return nil, err // Validate checked it; a config built without Validate lands here
	}
	if prev != nil && samePool(prev.cfg.Backends, cfg.Backends) {
		pool = prev.pool
	} else {
		if pool, err = NewPool(cfg.Backends); err != nil {
			return nil, err
		}
		if pool.tls != nil {
			pool.tls.Watch().SetOutputs(s.log, s.tlsm)
		}
		if s.ov.TracksBusy() {
			if err := pool.trackBusy(time.Now()); err != nil {
				return nil, err
			}
		}
	}
	var shares *share.Shares
	if cfg.Shares != nil {
		if prev != nil && prev.shares != nil && reflect.DeepEqual(prev.cfg.Shares, cfg.Shares) {
			shares = prev.shares
		} else if shares, err = share.New(*cfg.Shares); err != nil {
			return nil, fielderr.Under("shares", err)
		}
	}
	var prevPol *policy.Policy
	if prev != nil {
		prevPol = prev.pol
	}
	pol, err := s.ov.NewPolicy(cfg.Config, prevPol, s.log)
	if err != nil {
		return nil, err
	}
	s.version++
	secs := int(math.Ceil(cfg.Reject.RetryAfter.Seconds()))
	if err := s.ov.CheckPeriods(pol); err != nil {
		return nil, err
	}
	g := &generation{cfg: cfg, pol: pol, pool: pool, shares: shares, reported: s.ov.Reported(), overall: cfg.Backends.Timeouts.Overall,
		buf:          buffer.NewPolicy(&cfg.ResponseBuffering),
		access:       newAccessLogSettings(cfg.AccessLog),
		preserveHost: cfg.Backends.PreserveHost == nil || *cfg.Backends.PreserveHost,
		ignoreAbort:  cfg.Backends.IgnoreClientAbort,
		retryAfter:   time.Duration(max(secs, 1)) * time.Second, version: s.version, loaded: time.Now()}
	if cfg.Degrade.Header != "" {
		g.degradeHeader = textproto.CanonicalMIMEHeaderKey(cfg.Degrade.Header)
	}
	g.priorityHeader = textproto.CanonicalMIMEHeaderKey(cfg.Hops.PriorityHeader)
	g.tenantHeader = textproto.CanonicalMIMEHeaderKey(cfg.Hops.TenantHeader)
	g.timeoutHeader = textproto.CanonicalMIMEHeaderKey(cfg.Hops.TimeoutHeader)
	if cfg.Cluster != nil {
		if g.cluster, err = s.newClusterRunner(g, prev, time.Now()); err != nil {
			return nil, err
		}
	}
	// The upstream client side takes the generation's settings (checked
	// above, so this cannot fail).
	_ = s.h.client.SetConfig(cfg.upstreamClient())
	return g, nil
}

// samePool reports whether two backends sections describe the same pool:
// the upstream client side's settings do not (the handler's client side
// takes them at once).
func samePool(a, b BackendsConfig) bool {
	a.Client, b.Client = sclient.Config{}, sclient.Config{}
	return reflect.DeepEqual(a, b)
}

// Apply validates cfg against the running configuration and swaps it in
// atomically: requests in flight finish with the configuration they
// started with; new requests use cfg. Stages whose configuration is
// unchanged keep their controller state; an unchanged backends section
// keeps its pool. Listeners and the admin listener cannot change without
// a restart: such a cfg is refused. On error the running configuration
// stays.
func (s *Server) Apply(cfg *Config) error {
	err := s.apply(cfg)
	if err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		return err
	}
	s.m.reloads.WithLabelValues("ok").Inc()
	return nil
}

func (s *Server) apply(cfg *Config) error {
	return s.applyFrom(func(*Config) *Config { return cfg })
}

// applyFrom applies the configuration that next returns for the running
// one, both under s.mu (nil: nothing to apply).
func (s *Server) applyFrom(next func(running *Config) *Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.h.gen.Load()
	cfg := next(old.cfg)
	if cfg == nil {
		return nil
	}
	if err := restartNeeded(old.cfg, cfg); err != nil {
		return err
	}
	// The access log's output is opened anew on every reload, so that
	// logrotate's move-then-reload starts a new file.
	var alogOut io.WriteCloser
	if cfg.AccessLog != nil {
		out, err := openAccessLog(cfg.AccessLog.Path)
		if err != nil {
			return err
		}
		alogOut = out
	}
	g, err := s.newGeneration(cfg, old)
	if err != nil {
		if alogOut != nil {
			_ = alogOut.Close()
		}
		return err
	}
	if alogOut != nil {
		s.h.alog.use(alogOut)
	}
	if !s.running && old.cluster != nil {
		// Not serving yet: the replaced runner never ran, and its loop
		// would have closed its connections.
		defer old.cluster.Close()
	}
	if s.running {
		s.startRunners(g)
	}
	s.h.gen.Store(g)
	s.h.buf.Use(&g.buf)
	s.recheckTLS(g, old.pool == g.pool, time.Now())
	if old.stop != nil {
		old.stop()
	}
	if old.pool != g.pool {
		old.pool.Close()
	}
	names := make([]string, 0, len(g.pol.Stages()))
	for _, st := range g.pol.Stages() {
		names = append(names, st.Name())
	}
	s.log.Info("configuration applied", "version", g.version, "stages", names, "pool_kept", old.pool == g.pool)
	return nil
}

// Reload reads the configuration file again and applies it. An invalid
// file (a *ConfigError) or a refused change leaves the running
// configuration in place.
func (s *Server) Reload() error {
	if s.file == "" {
		s.m.reloads.WithLabelValues("error").Inc()
		return errors.New("no configuration file to reload (started without --config)")
	}
	data, err := os.ReadFile(s.file)
	if err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		return &ConfigError{File: s.file, Msg: err.Error()}
	}
	return s.reloadData(data)
}

// reloadData applies data, the configuration file's content, and
// remembers its digest for the watch (watch.go).
func (s *Server) reloadData(data []byte) error {
	s.watchMu.Lock()
	s.fileSum = sha256.Sum256(data)
	s.watchMu.Unlock()
	cfg, err := s.parseFile(data)
	if err == nil && s.adjust != nil {
		err = s.adjust(cfg)
	}
	if err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		return err
	}
	if err := s.Apply(cfg); err != nil {
		if fielderr.Path(err) != "" {
			// A refused field (one that needs a restart) at its line.
			return strictyaml.Locate(s.file, strictyaml.ParseRoot(data), err)
		}
		return err
	}
	return nil
}

// startRunners starts g's control loops under the server's run context.
// Called with s.mu held.
func (s *Server) startRunners(g *generation) {
	ctx, cancel := context.WithCancel(s.runCtx)
	g.stop = cancel
	if s.manual {
		return
	}
	go g.pol.Run(ctx)
	if g.shares != nil {
		go runShares(ctx, g.shares)
	}
	if g.cluster != nil {
		s.runs.Go(func() { g.cluster.Run(ctx) })
	}
	if g.pool.tls != nil {
		s.runs.Go(func() { g.pool.tls.Watch().Run(ctx) })
	}
}

// Listen binds the client and admin listeners of the running
// configuration.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) > 0 {
		return errors.New("proxy: already listening")
	}
	cfg := s.h.gen.Load().cfg
	var lns []net.Listener
	var bound []net.Addr // the client listeners' addresses, for the kernel path
	var watches []*tlsconf.Watch
	fail := func(err error) error {
		for _, l := range lns {
			l.Close()
		}
		return err
	}
	s.log.Info("client connection cap", "max_client_connections", s.conns.Max(), "from", s.connsFrom)
	for i, lc := range cfg.Listeners {
		ln, err := net.Listen("tcp", lc.Addr)
		if err != nil {
			return fail(listenError(fmt.Sprintf("listeners[%d].addr", i), lc.Addr, err))
		}
		bound = append(bound, ln.Addr())
		if s.ov.accept != nil {
			// Early discard: the policer resets non-compliant connections
			// before anything is read (and tracks the admitted ones for
			// the network sensors).
			ln = s.ov.accept.Wrap(ln, s.ov.registry)
		}
		if ln, err = s.withProxyProtocol(ln, i, &lc); err != nil {
			return fail(err)
		}
		ln = s.conns.Wrap(ln, lc.SendTimeout, lc.TLS == nil)
		if lc.TLS != nil {
			w, err := s.newServerTLS(fmt.Sprintf("listeners[%d].tls", i), lc.TLS)
			if err != nil {
				ln.Close()
				return fail(err)
			}
			watches = append(watches, w)
			// TLS is terminated in the listener: HTTP/1.1 over TLS is
			// scanned too (internal/h1, tlsscan.go).
			ln = h1.NewTLSListener(ln, w.ServerConfig(), lc.ReadHeaderTimeout)
		}
		lns = append(lns, ln)
		srv := &http.Server{
			Handler:                      guard.New(s.h, &lc.GuardConfig, s.cm, s.m.badRequests),
			ReadHeaderTimeout:            lc.ReadHeaderTimeout,
			ReadTimeout:                  lc.ReadTimeout,
			WriteTimeout:                 lc.WriteTimeout,
			IdleTimeout:                  lc.IdleTimeout,
			MaxHeaderBytes:               guard.TransportHeaderBytes(lc.MaxHeaderBytes), // max_header_bytes itself: the guard (package guard)
			DisableGeneralOptionsHandler: true,                                          // OPTIONS * reaches the handler: one handler call per request
			ErrorLog:                     serverLog(s.log),
			ConnState:                    s.conns.State,
			ConnContext:                  guard.ConnContext,
		}
		if lc.TLS != nil {
			// Only to make Serve set up HTTP/2 for the *tls.Conns the
			// listener hands over.
			srv.TLSConfig = &tls.Config{NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
		} else {
			srv.Protocols = cleartextProtocols()
		}
		s.servers = append(s.servers, srv)
	}
	aln, err := net.Listen("tcp", cfg.Admin.Addr)
	if err != nil {
		return fail(listenError("admin.addr", cfg.Admin.Addr, err))
	}
	if cfg.Admin.TLS != nil {
		w, err := s.newServerTLS("admin.tls", cfg.Admin.TLS)
		if err != nil {
			aln.Close()
			return fail(err)
		}
		watches = append(watches, w)
		aln = tls.NewListener(aln, w.ServerConfig())
	}
	if err := s.startKernel(bound); err != nil {
		aln.Close()
		return fail(err)
	}
	s.lns, s.adminLn, s.tlsw = lns, aln, watches
	s.admin = &http.Server{Handler: s.adm.Handler(cfg.Admin.Pprof), ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout: DefaultIdleTimeout, ErrorLog: serverLog(s.log)}
	return nil
}

// Addrs returns the bound client addresses (after Listen).
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]net.Addr, len(s.lns))
	for i, l := range s.lns {
		out[i] = l.Addr()
	}
	return out
}

// AdminAddr returns the bound admin address (after Listen).
func (s *Server) AdminAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.adminLn == nil {
		return nil
	}
	return s.adminLn.Addr()
}

// Serve starts the control loops and serves every listener until ctx
// ends; then it stops accepting, lets in-flight requests finish for up to
// drain_timeout (closing what is left after that), and returns nil. It
// returns an error if a listener fails. Call Listen first (Serve calls it
// if needed).
func (s *Server) Serve(ctx context.Context) error {
	if s.AdminAddr() == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if s.running || s.closed {
		s.mu.Unlock()
		return errors.New("proxy: Serve called twice")
	}
	runCtx, stopRuns := context.WithCancel(context.Background())
	s.runCtx, s.stopRuns, s.running = runCtx, stopRuns, true
	g := s.h.gen.Load()
	s.startRunners(g)
	if !s.manual {
		s.ov.Run(runCtx, &s.runs)
		s.runs.Go(func() { s.dash.Run(runCtx) })
		for _, w := range s.tlsw {
			s.runs.Go(func() { w.Run(runCtx) })
		}
	}
	s.runs.Go(func() { s.runHealth(runCtx) })
	s.runs.Go(func() { s.h.alog.run(runCtx) })
	s.runs.Go(func() { s.runMemLimit(runCtx) })
	if s.file != "" {
		s.watchBaseline()
		s.runs.Go(func() { s.runWatch(runCtx) })
	}
	cfg := g.cfg
	s.mu.Unlock()

	errc := make(chan error, len(s.servers)+1)
	for i, srv := range s.servers {
		var ln net.Listener = s.lns[i]
		go func() {
			errc <- srv.Serve(ln)
		}()
	}
	go func() { errc <- s.admin.Serve(s.adminLn) }()
	addrs := make([]string, len(s.lns))
	for i, l := range s.lns {
		addrs[i] = l.Addr().String()
	}
	s.log.Info("sluice proxy serving", "listen", addrs, "admin", s.adminLn.Addr().String(),
		"backends", len(cfg.Backends.Servers), "stages", len(cfg.Stages), "shadow", cfg.Shadow)

	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	s.shutdown(s.h.gen.Load().cfg.DrainTimeout)
	return serveErr
}

// shutdown stops accepting, drains in-flight requests for up to timeout,
// then closes everything.
func (s *Server) shutdown(timeout time.Duration) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.ready.draining.Store(true)
	s.log.Info("draining", "in_flight", s.h.active.Load(), "timeout", timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range s.servers {
		wg.Go(func() {
			if err := srv.Shutdown(ctx); err != nil {
				s.log.Warn("drain timeout: closing remaining connections", "in_flight", s.h.active.Load())
				srv.Close()
			}
		})
	}
	wg.Wait()
	s.stopKernel() // no listener left: the table polices nothing
	_ = s.admin.Close()
	s.mu.Lock()
	s.running = false
	if g := s.h.gen.Load(); g.cluster != nil {
		g.cluster.SetLeaving() // the others take over this instance's part at once
	}
	if s.stopRuns != nil {
		s.stopRuns()
	}
	s.mu.Unlock()
	s.runs.Wait()
	s.h.gen.Load().pool.Close()
	if s.tel != nil {
		// The last spans and one last metrics export, within 5 s.
		tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.tel.Shutdown(tctx); err != nil {
			s.log.Warn("telemetry: final export failed", "err", err)
		}
		tcancel()
	}
	s.log.Info("stopped")
}

// serverLog adapts http.Server's error log to slog: accept errors (such
// as EMFILE, which the server retries with a back-off of 5 ms doubling to
// 1 s) are warnings, the rest (TLS handshake noise) debug.
func serverLog(l *slog.Logger) *log.Logger { return log.New(&logAdapter{l: l}, "", 0) }

type logAdapter struct{ l *slog.Logger }

func (a *logAdapter) Write(p []byte) (int, error) {
	msg := string(bytes.TrimSpace(p))
	if bytes.Contains(p, []byte("Accept error")) {
		a.l.Warn(msg)
	} else {
		a.l.Debug(msg)
	}
	return len(p), nil
}

// Check builds what cfg (validated, with defaults) describes — the
// admission policy and the backend pool — without listening or running,
// to catch what Validate cannot see.
func Check(cfg *Config) error {
	s := &Server{h: newHandler(newMetrics(), slog.New(slog.DiscardHandler)), log: slog.New(slog.DiscardHandler)}
	ov, err := buildOverload(cfg, s.h, s.log, time.Now())
	if err != nil {
		return err
	}
	s.ov = ov
	g, err := s.newGeneration(cfg, nil)
	if g != nil && g.cluster != nil {
		g.cluster.Close()
	}
	return err
}
