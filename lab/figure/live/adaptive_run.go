// SPDX-License-Identifier: Apache-2.0

package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
)

// adaptiveRun is one row through one phase.
type adaptiveRun struct {
	row   adaptiveRow
	phase adaptivePhase
	res   *phaseResult
	// capAfter is the nominal capacity after the change, in req/s.
	capAfter float64
	// serviceP99 is the p99 of the service demands (ms) of the requests
	// the backends served that arrived from the event on: the service's
	// own tail, under any admission control's p99.
	serviceP99 float64
}

// adaptiveSetup is what every run shares.
type adaptiveSetup struct {
	plan      adaptivePlan
	tools     map[string]string
	nginxArgs string
	dir       string
	capacity  float64 // measured, req/s
}

func runAdaptive(ctx context.Context, env *Env) (*figure.Result, error) {
	plan, err := planAdaptive(env)
	if err != nil {
		return nil, err
	}
	setup := &adaptiveSetup{plan: plan}
	if needsPeers(plan.rows) {
		tools, err := ensurePeerTools(ctx, env)
		if err != nil {
			return nil, err
		}
		setup.tools, setup.nginxArgs = tools, peerVersion(ctx, tools["nginx"], "-V")
	}
	if needsPeers(plan.rows) || env.ProxyProcess {
		dir, err := os.MkdirTemp("", "sluice-adaptive-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		// nginx's workers run as an unprivileged user when sluice is root.
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		setup.dir = dir
	}
	env.Phasef("measuring the backend's capacity (%v, %d closed-loop users without think time, directly)", plan.capLength, 8*adaptiveWorkers)
	be, err := startAdaptiveBackend(ctx, env, env.Seed, adaptiveWorkers)
	if err != nil {
		return nil, err
	}
	capacity, err := measureCapacity(ctx, env, be.url, 8*adaptiveWorkers, plan.capLength)
	if err = errors.Join(err, be.Close()); err != nil {
		return nil, err
	}
	if capacity < 20 {
		return nil, fmt.Errorf("the backend answered only %.1f req/s while measuring its capacity", capacity)
	}
	setup.capacity = capacity
	env.Phasef("capacity %.0f req/s (nominal %.0f, service %s)", capacity, float64(adaptiveWorkers)/adaptiveService.Seconds(), cmp.Or(env.Service, "exp"))
	var runs []*adaptiveRun
	for _, ph := range plan.phases {
		for _, row := range plan.rows {
			run, err := setup.run(ctx, env, row, ph)
			if err != nil {
				return nil, fmt.Errorf("%s, phase %s: %w", row.name, ph.name, err)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			runs = append(runs, run)
		}
	}
	versions := map[string]string{}
	if setup.tools != nil {
		versions["nginx"] = firstLine(setup.nginxArgs)
		versions["haproxy"] = firstLine(peerVersion(ctx, setup.tools["haproxy"], "-v"))
	}
	return adaptiveResult(env, setup, runs, versions)
}

func needsPeers(rows []adaptiveRow) bool {
	for _, r := range rows {
		if r.controller == "" {
			return true
		}
	}
	return false
}

// newAdaptiveBackend is the queue testbed: workers FIFO servers with
// service of mean adaptiveService, of the variant kind
// (figure.AdaptiveService; empty: exponential).
func newAdaptiveBackend(seed uint64, workers int, kind string) (*testbed.Queue, error) {
	if kind == "" {
		kind = "exp"
	}
	spec, err := figure.AdaptiveService(kind, adaptiveService)
	if err != nil {
		return nil, err
	}
	cfg := testbed.DefaultQueueConfig()
	cfg.Workers, cfg.Discipline, cfg.Seed, cfg.Service, cfg.Record = workers, testbed.DisciplineFIFO, seed, spec, true
	return testbed.NewQueue(cfg)
}

// adaptiveBackend is one queue testbed of the figure, served in the lab's
// process or, with Options.BackendProcess, as a child process
// (`sluice-lab testbed queue --control`), whose changes go over HTTP.
type adaptiveBackend struct {
	url   string
	q     *testbed.Queue // in the lab's process; nil for a child
	close func() error
}

// startAdaptiveBackend starts a backend of workers FIFO workers with the
// figure's service (env.Service) and seed.
func startAdaptiveBackend(ctx context.Context, env *Env, seed uint64, workers int) (*adaptiveBackend, error) {
	if env.BackendProcess {
		spec, err := figure.AdaptiveService(cmp.Or(env.Service, "exp"), adaptiveService)
		if err != nil {
			return nil, err
		}
		c, err := startChildBackend(ctx, env.Executable, nil, "queue", "--workers", strconv.Itoa(workers),
			"--discipline", testbed.DisciplineFIFO, "--service", spec, "--seed", strconv.FormatUint(seed, 10), "--control", "--record")
		if err != nil {
			return nil, fmt.Errorf("backend process: %w", err)
		}
		return &adaptiveBackend{url: c.URL, close: c.Close}, nil
	}
	q, err := newAdaptiveBackend(seed, workers, env.Service)
	if err != nil {
		return nil, err
	}
	srv, err := serveHTTP(q)
	if err != nil {
		return nil, errors.Join(err, q.Close())
	}
	return &adaptiveBackend{url: srv.URL, q: q, close: func() error { srv.Close(); return q.Close() }}, nil
}

// Close stops the backend.
func (b *adaptiveBackend) Close() error { return b.close() }

// records returns the backend's records of every request so far.
func (b *adaptiveBackend) records(ctx context.Context) ([]testbed.QueueRecord, error) {
	if b.q != nil {
		return b.q.Records(), nil
	}
	return fetchRecords(ctx, b.url)
}

// apply makes a phase's change to the backend.
func (b *adaptiveBackend) apply(ctx context.Context, ch figure.AdaptiveChange) error {
	switch {
	case ch.Scale > 0 && b.q != nil:
		return b.q.SetScale(ch.Scale)
	case ch.Scale > 0:
		return postControl(ctx, b.url, "/_scale?factor="+fmtF(ch.Scale))
	case ch.Workers > 0 && b.q != nil:
		return b.q.SetWorkers(ch.Workers)
	case ch.Workers > 0:
		return postControl(ctx, b.url, "/_workers?n="+strconv.Itoa(ch.Workers))
	}
	return nil
}

// measureCapacity measures the throughput of the backend at url with
// users closed-loop users sending without think time, directly, over
// length (the first quarter left out).
func measureCapacity(ctx context.Context, env *Env, url string, users int, length time.Duration) (float64, error) {
	sched, err := dist.ConstantSchedule(float64(users))
	if err != nil {
		return 0, err
	}
	load, err := closedLoad("capacity", env.Seed, sched, 0, 0, adaptiveTimeout, length, nil)
	if err != nil {
		return 0, err
	}
	ph := phase{name: "capacity", length: length, loads: []loadgen.Config{load}, target: url}
	res, err := ph.run(ctx, env)
	if err != nil {
		return 0, err
	}
	warm := length / 4
	return float64(countSent(res.recs, warm, length, nil).ok) / (length - warm).Seconds(), nil
}

// adaptiveLoad is the open-loop Poisson load of a phase: base until the
// warm-up ends, then the crowd (ramped over 1 s in ten steps) or the
// overload, until the run ends.
func (s *adaptiveSetup) adaptiveLoad(env *Env, ph adaptivePhase) (loadgen.Config, error) {
	pl := s.plan
	sched, err := dist.NewSchedule(figure.AdaptiveRates(ph.name, s.capacity, pl.warm, pl.base, pl.crowdX, pl.overloadX)...)
	if err != nil {
		return loadgen.Config{}, err
	}
	load, err := openLoad("adaptive-"+ph.name, env.Seed, sched, adaptiveTimeout, pl.length(ph))
	if err != nil {
		return loadgen.Config{}, err
	}
	load.MaxConns = adaptiveConns
	return load, nil
}

// change applies phase ph's change to its backends and returns the
// nominal capacity after it.
func (s *adaptiveSetup) change(ctx context.Context, ph adaptivePhase, bes []*adaptiveBackend) (float64, error) {
	ch := figure.AdaptiveChangeOf(ph.name, adaptiveWorkers, adaptiveService)
	return ch.Capacity, bes[ch.Backend].apply(ctx, ch)
}

// run serves fresh backends, starts the row's system in front of them,
// runs the load with the phase's change at its time, and stops
// everything, also on error and on Ctrl-C.
func (s *adaptiveSetup) run(ctx context.Context, env *Env, row adaptiveRow, ph adaptivePhase) (run *adaptiveRun, err error) {
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	var bes []*adaptiveBackend
	var urls []string
	for i := range ph.backends {
		be, err := startAdaptiveBackend(ctx, env, env.Seed+uint64(i), adaptiveWorkers/ph.backends)
		if err != nil {
			return nil, err
		}
		closers = append(closers, be.Close)
		bes, urls = append(bes, be), append(urls, be.url)
	}
	p := phase{name: row.name + "/" + ph.name, length: s.plan.length(ph), grace: 2 * time.Second}
	switch row.name {
	case "nginx", "haproxy":
		proc, err := s.startPeer(ctx, env, row.name, ph, urls)
		if err != nil {
			return nil, err
		}
		closers = append(closers, proc.Close)
		p.target = proc.URL
	default:
		cfg, err := adaptiveProxyConfig(env, row, urls)
		if err != nil {
			return nil, err
		}
		var px interface {
			stageSource
			Close() error
		}
		if env.ProxyProcess {
			cp, err := s.startProxyChild(ctx, env, row.name+"-"+ph.name, cfg)
			if err != nil {
				return nil, err
			}
			px, p.target = cp, cp.URL
		} else {
			lp, err := startProxyConfig(ctx, cfg)
			if err != nil {
				return nil, err
			}
			px, p.target = lp, lp.URL
		}
		closers = append(closers, px.Close)
		p.proxy, p.stageName, p.sampleEvery = px, mainStage, 100*time.Millisecond
		if err := testbed.WaitReady(ctx, p.target+"/", 10*time.Second); err != nil {
			return nil, err
		}
	}
	load, err := s.adaptiveLoad(env, ph)
	if err != nil {
		return nil, err
	}
	p.loads = []loadgen.Config{load}
	run = &adaptiveRun{row: row, phase: ph, capAfter: float64(adaptiveWorkers) / adaptiveService.Seconds(), serviceP99: math.NaN()}
	if ph.name != "a" {
		var changeErr error
		t := time.AfterFunc(s.plan.at(ph), func() { run.capAfter, changeErr = s.change(ctx, ph, bes) })
		defer t.Stop()
		defer func() { err = errors.Join(err, changeErr) }()
	}
	if run.res, err = p.run(ctx, env); err != nil {
		return run, err
	}
	var demands []float64
	for _, be := range bes {
		recs, err := be.records(ctx)
		if err != nil {
			return run, err
		}
		demands = append(demands, servedDemands(recs, run.res.base.Add(s.plan.at(ph)))...)
	}
	run.serviceP99 = monitor.Percentile(demands, 0.99)
	return run, nil
}

// servedDemands returns the service demands (ms) of the requests served
// that arrived from since on.
func servedDemands(recs []testbed.QueueRecord, since time.Time) []float64 {
	var out []float64
	for _, r := range recs {
		if !r.Finish.IsZero() && r.Demand > 0 && !r.Arrival.Before(since) {
			out = append(out, r.Demand*1000)
		}
	}
	return out
}

// adaptiveProxyConfig is the sluice proxy of a row: one stage for every
// request with the row's controller, the backends behind a pool that
// never binds by itself, least-in-flight balancing (so a slow server gets
// fewer requests), long upstream timeouts (the client's are the ones that
// count).
func adaptiveProxyConfig(env *Env, row adaptiveRow, urls []string) (*proxy.Config, error) {
	admin := anyPort
	if env.AdminAddr != "" {
		admin = env.AdminAddr
	}
	queueMax := 100000
	cfg := &proxy.Config{
		Listeners:    []proxy.ListenerConfig{{Addr: anyPort}},
		Admin:        proxy.AdminConfig{Addr: admin},
		DrainTimeout: time.Second,
		Backends: proxy.BackendsConfig{Balance: proxy.BalanceLeastInFlight,
			Queue:    proxy.PoolQueueConfig{Max: &queueMax, Timeout: 120 * time.Second},
			Timeouts: proxy.TimeoutsConfig{ResponseHeader: 120 * time.Second}},
	}
	for _, u := range urls {
		cfg.Backends.Servers = append(cfg.Backends.Servers, proxy.ServerConfig{URL: u, MaxConcurrency: adaptiveConns})
	}
	ctrl := row.ctrl()
	if a, ok := ctrl.(*auto.Config); ok {
		a.MedianProbe = a.MedianProbe || env.AutoMedianProbe
		if env.AutoKnee != "" {
			a.Knee = env.AutoKnee
		}
		if env.AutoBurstWindow > 0 {
			a.BurstWindow = env.AutoBurstWindow
		}
		if env.AutoTailPool > 0 {
			a.TailPool = env.AutoTailPool
		}
	}
	st := policy.StageConfig{Name: mainStage, Match: policy.MatchConfig{PathPrefix: "/"}, Control: ctrl}
	cfg.Stages = []policy.StageConfig{st}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("proxy configuration of %s: %w", row.name, err)
	}
	return cfg, nil
}

// startProxyChild serves cfg (listeners on anyPort) as a child process,
// `sluice-lab proxy --config FILE`, on free loopback ports, its file in
// the run's folder.
func (s *adaptiveSetup) startProxyChild(ctx context.Context, env *Env, name string, cfg *proxy.Config) (*childProxy, error) {
	file, listen, admin, err := writeChildConfig(s.dir, name, cfg)
	if err != nil {
		return nil, err
	}
	px, err := startChildProxy(ctx, env.Executable, file, listen, admin)
	if err != nil {
		return nil, fmt.Errorf("proxy process: %w", err)
	}
	return px, nil
}

// writeChildConfig writes cfg to dir/proxy-NAME.yaml (writeProxyFile)
// with its listener and admin listener on the ports picked, and checks
// that it parses.
func writeChildConfig(dir, name string, cfg *proxy.Config) (file, listen, admin string, err error) {
	return writeProxyFile(dir, name, func(listen, admin string) ([]byte, error) {
		c := *cfg
		c.Listeners = []proxy.ListenerConfig{{Addr: listen}}
		c.Admin.Addr = admin
		b, err := yaml.Marshal(&c)
		if err != nil {
			return nil, err
		}
		if _, err := proxy.Parse("proxy-"+name+".yaml", b); err != nil {
			return nil, fmt.Errorf("proxy configuration of %s: %w", name, err)
		}
		return b, nil
	})
}

// startProxyConfig serves a validated proxy configuration in this process.
func startProxyConfig(ctx context.Context, cfg *proxy.Config) (*liveProxy, error) {
	srv, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	return serveProxy(ctx, srv)
}

// startPeer starts nginx (limit_req at the measured capacity, a burst of
// adaptivePeerWait of it) or HAProxy (maxconn = each server's workers,
// timeout queue adaptivePeerWait) in front of the backends.
func (s *adaptiveSetup) startPeer(ctx context.Context, env *Env, name string, ph adaptivePhase, urls []string) (*peerProc, error) {
	hosts := make([]string, len(urls))
	for i, u := range urls {
		hosts[i] = strings.TrimPrefix(u, "http://")
	}
	rate := int(s.capacity + 0.5)
	burst := int(s.capacity*adaptivePeerWait.Seconds() + 0.5)
	workers := adaptiveWorkers / ph.backends
	sub := filepath.Join(s.dir, name+"-"+ph.name)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return nil, err
	}
	p, err := startPeerProc(ctx, name, func(port int) ([]string, error) {
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		if name == "nginx" {
			conf := nginxConf{Dir: sub, Listen: listen, Backends: hosts, Rate: rate, Burst: burst,
				TempPaths: nginxTempDirectives(s.nginxArgs)}
			if err := conf.Validate(); err != nil {
				return nil, err
			}
			path := filepath.Join(sub, "nginx.conf")
			if err := os.WriteFile(path, []byte(conf.Text()), 0o644); err != nil {
				return nil, err
			}
			return []string{s.tools["nginx"], "-p", sub + "/", "-c", path, "-g", "daemon off;"}, nil
		}
		conf := haproxyConf{Listen: listen, Backends: hosts, MaxConn: workers, QueueTimeout: adaptivePeerWait, IdleTimeout: 30 * time.Second}
		if err := conf.Validate(); err != nil {
			return nil, err
		}
		path := filepath.Join(sub, "haproxy.cfg")
		if err := os.WriteFile(path, []byte(conf.Text()), 0o644); err != nil {
			return nil, err
		}
		return []string{s.tools["haproxy"], "-f", path, "-db"}, nil
	})
	if err != nil {
		return nil, err
	}
	if name == "nginx" {
		env.Logf("nginx (pid %d) at %s: limit_req rate=%dr/s burst=%d → %s", p.cmd.Process.Pid, p.URL, rate, burst, strings.Join(hosts, ", "))
	} else {
		env.Logf("haproxy (pid %d) at %s: server maxconn %d, timeout queue %v → %s", p.cmd.Process.Pid, p.URL, workers, adaptivePeerWait, strings.Join(hosts, ", "))
	}
	return p, nil
}
