// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/retry"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/lab/tick"
	"github.com/sluicehq/sluice/proxy"
)

// graph and graph-crowd run the chain of package figure (graph.go) on
// real sockets, every hop its own process: the backend is `sluice-lab
// testbed queue` (with --record, whose records say when each call
// arrived and finished, its work, its user's deadline and whether its
// caller had gone, and --control, through which the trigger divides its
// capacity), each tier `sluice-lab testbed tier` in the row's mode, and
// for the proxy row `sluice-lab proxy` (the product's proxy command) in
// front of every hop. The client populations are the load generator in
// this process, one open loop per class, each with its own client: the
// lab's naive retrying transport (package retry) or sluice's
// client.Transport, under the user's deadline. Every row starts fresh
// processes. The records of both ends, the users' and the backend's, go
// through the same analysis as the simulator's (figure.GraphResult).

// graphPlan is the shape of a live run of a chain figure.
type graphPlan struct {
	c figure.GraphParams
	// grace is how long the load may run past its end before it is
	// cancelled.
	grace time.Duration
}

func planGraph(env *Env, name string) graphPlan {
	var c figure.GraphParams
	switch name {
	case "graph-recover":
		c = figure.DefaultGraphRecover()
	default:
		c = figure.DefaultGraph(name == "graph-crowd")
	}
	if env.Transport == "grpc" {
		c.Transport, c.Rows = "grpc", figure.GraphGRPCRows
		if c.Recover {
			c.Rows = figure.GraphRecoverGRPCRows
		}
	}
	switch {
	case env.Quick && c.Recover:
		c.Warm, c.CrowdLen, c.Gap, c.TriggerLen, c.After = 6*time.Second, 6*time.Second, 6*time.Second, 6*time.Second, 6*time.Second
		if c.Transport != "grpc" {
			c.Rows = []string{figure.GraphInProcess}
		}
	case env.Quick && c.Transport == "grpc":
		if c.Crowd {
			c.Warm, c.CrowdLen, c.After = 6*time.Second, 8*time.Second, 6*time.Second
		} else {
			c.Warm, c.After = 8*time.Second, 12*time.Second
		}
	case env.Quick:
		if c.Crowd {
			c.Rows = []string{figure.GraphInProcess}
			c.Warm, c.CrowdLen, c.After = 6*time.Second, 8*time.Second, 6*time.Second
		} else {
			c.Rows = []string{figure.GraphNaive, figure.GraphInProcess}
			c.Warm, c.After = 8*time.Second, 12*time.Second
		}
	}
	return graphPlan{c: c, grace: 2 * time.Second}
}

func runGraph(ctx context.Context, env *Env) (*figure.Result, error) {
	return runGraphFigure(ctx, env, "graph")
}

func runGraphCrowd(ctx context.Context, env *Env) (*figure.Result, error) {
	return runGraphFigure(ctx, env, "graph-crowd")
}

func runGraphRecover(ctx context.Context, env *Env) (*figure.Result, error) {
	return runGraphFigure(ctx, env, "graph-recover")
}

func runGraphFigure(ctx context.Context, env *Env, name string) (*figure.Result, error) {
	if !childCapable(env.Executable) {
		return nil, fmt.Errorf("the chain experiments start `sluice-lab testbed` and `sluice-lab proxy` processes: run them from the sluice-lab binary")
	}
	pl := planGraph(env, name)
	dir, err := os.MkdirTemp("", "sluice-graph-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s := newSummary(env)
	res := &figure.Result{Bundle: report.NewBundle(s)}
	var runs []*figure.GraphRun
	for _, row := range pl.c.Rows {
		load := loadAverage()
		env.Phasef("%s: %s (load average %.2f)", row, figure.GraphRowLabel(row), load)
		s.Set(figure.GraphMetric("loadavg_1m_start", row), load)
		run, err := pl.runRow(ctx, env, dir, row)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", row, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		runs = append(runs, run)
	}
	if err := figure.GraphResult(res, pl.c, runs); err != nil {
		return nil, err
	}
	res.Setup = pl.setup()
	return res, nil
}

// loadAverage returns the 1-minute load average (NaN when unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nanValue()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nanValue()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return nanValue()
	}
	return v
}

func nanValue() float64 { v, _ := strconv.ParseFloat("NaN", 64); return v }

func (pl graphPlan) setup() []string {
	c := pl.c
	s := []string{
		fmt.Sprintf("Backend: `sluice-lab testbed queue`, %d FIFO workers, service %v (C = %.0f req/s), a process of its own; the work of a request is done even if its caller left.", c.Workers, c.Service, c.Capacity()),
		"Tiers: `sluice-lab testbed tier`, one process each, in the row's mode (naive, budget, grpc-throttle: package retry's policy on the calls; sluice: the middleware with the chain's policy and the client side); the proxy row puts `sluice-lab proxy` (the product's proxy command) in front of tier 1, tier 2 and the backend.",
		fmt.Sprintf("Clients: the load generator in the experiment's process, %s arrivals, one open loop and one client per class; deadline %v per user request; %d attempts at every hop; lab policies' attempt timeouts client %v, tier 1 %v, tier 2 %v, back-off %v.",
			c.Arrivals, c.Deadline, c.Attempts, c.ClientTimeout, c.Tier1Timeout, c.Tier2Timeout, c.Backoff),
	}
	if c.Transport == "grpc" {
		s[0] = fmt.Sprintf("Backend: `sluice-lab testbed grpc --record --control`, %d FIFO workers, service %v (C = %.0f calls/s), a process of its own; every hop gRPC over h2c.", c.Workers, c.Service, c.Capacity())
		s[1] = "Tiers: `sluice-lab testbed tier --grpc`, one process each: grpc-throttle, grpc-go's own retryPolicy and retryThrottling from a service config (the library as it ships); inprocess, grpcsluice's server and client interceptors."
	}
	switch {
	case c.Recover:
		s = append(s, fmt.Sprintf("Load %.2f × C; from %v for %v a crowd at %g × C; trigger: POST /_scale?factor=%g to the backend at %v, factor 1 at %v; %v measured after. Sluice hops: auto, SLO %v. The inprocess-window row's clients throttle with the SRE book's window (throttle.forget: window); its tiers' client sides keep the default (they never throttle in this chain).",
			c.Load, c.Warm, c.CrowdLen, c.CrowdLoad, c.TriggerFactor, c.DropStart(), c.DropEnd(), c.After, c.SLO))
	case c.Crowd:
		s = append(s, fmt.Sprintf("Load %.0f req/s, high %.0f %%; from %v for %v the low class ×%g. Sluice hops: auto, SLO %v.", c.Load*c.Capacity(), 100*c.HighShare, c.Warm, c.CrowdLen, c.CrowdX, c.SLO))
	default:
		s = append(s, fmt.Sprintf("Load %.2f × C; trigger: POST /_scale?factor=%g to the backend at %v, factor 1 at %v; %v measured after. Sluice hops: auto, SLO %v.", c.Load, c.TriggerFactor, c.Warm, c.EventEnd(), c.After, c.SLO))
	}
	return s
}

// graphProcs are a row's processes, closed in reverse order.
type graphProcs struct {
	closers []func() error
}

func (g *graphProcs) Close() error {
	var err error
	for i := len(g.closers) - 1; i >= 0; i-- {
		err = errors.Join(err, g.closers[i]())
	}
	g.closers = nil
	return err
}

// runRow starts the row's processes, runs its load with the trigger, and
// collects the records of both ends.
func (pl graphPlan) runRow(ctx context.Context, env *Env, dir, row string) (run *figure.GraphRun, err error) {
	c := pl.c
	procs := &graphProcs{}
	defer func() { err = errors.Join(err, procs.Close()) }()
	if c.Transport == "grpc" {
		return pl.runRowGRPC(ctx, env, dir, row, procs)
	}
	be, err := startChildBackend(ctx, env.Executable, nil, "queue", "--workers", strconv.Itoa(c.Workers),
		"--service", c.Service.String(), "--seed", strconv.FormatUint(env.Seed, 10), "--record", "--control", "--free-gone")
	if err != nil {
		return nil, fmt.Errorf("backend: %w", err)
	}
	procs.closers = append(procs.closers, be.Close)
	next := be.URL
	var proxies []namedProxy
	polFile := ""
	if figure.InProcessRow(row) {
		if polFile, err = pl.writePolicy(dir); err != nil {
			return nil, err
		}
	}
	for _, h := range []struct {
		name, front string
		perTry      time.Duration
	}{{"tier2", "backend", c.Tier2Timeout}, {"tier1", "tier2", c.Tier1Timeout}} {
		if row == figure.GraphProxy {
			px, err := pl.startProxy(ctx, env, dir, h.front, next)
			if err != nil {
				return nil, fmt.Errorf("proxy in front of %s: %w", h.front, err)
			}
			procs.closers = append(procs.closers, px.Close)
			proxies = append(proxies, namedProxy{name: h.front + "-proxy", p: px})
			next = px.URL
		}
		args := []string{"tier", "--next", next, "--seed", strconv.FormatUint(env.Seed, 10)}
		if figure.InProcessRow(row) {
			args = append(args, "--mode", testbed.TierSluice, "--policy", polFile)
		} else {
			rc := c.Retry(row, h.perTry)
			args = append(args, "--mode", string(rc.Kind), "--attempts", strconv.Itoa(rc.MaxAttempts),
				"--per-try", rc.PerTry.String(), "--backoff", rc.Backoff.String(),
				"--budget-ratio", fmtF(rc.BudgetRatio), "--budget-min", fmtF(rc.BudgetMinPerSecond), "--budget-window", rc.BudgetWindow.String(),
				"--max-tokens", fmtF(rc.MaxTokens), "--token-ratio", fmtF(rc.TokenRatio))
		}
		t, err := startChildBackend(ctx, env.Executable, nil, args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.name, err)
		}
		procs.closers = append(procs.closers, t.Close)
		next = t.URL
	}
	if row == figure.GraphProxy {
		px, err := pl.startProxy(ctx, env, dir, "tier1", next)
		if err != nil {
			return nil, fmt.Errorf("proxy in front of tier1: %w", err)
		}
		procs.closers = append(procs.closers, px.Close)
		proxies = append(proxies, namedProxy{name: "tier1-proxy", p: px})
		next = px.URL
	}
	env.Logf("chain: clients → %s (backend %s)", next, be.URL)
	return pl.load(ctx, env, row, next, be.URL, proxies)
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// writePolicy writes the sluice hops' policy (figure.GraphParams.Policy)
// for the in-process tiers.
func (pl graphPlan) writePolicy(dir string) (string, error) {
	pol, err := pl.c.Policy()
	if err != nil {
		return "", err
	}
	b, err := yaml.Marshal(&pol)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "policy.yaml")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	return path, os.WriteFile(path, b, 0o644)
}

// startProxy starts `sluice-lab proxy` in front of backendURL with the
// chain's policy and the proxy's defaults otherwise.
func (pl graphPlan) startProxy(ctx context.Context, env *Env, dir, name, backendURL string) (*childProxy, error) {
	file, listen, admin, err := writeProxyFile(dir, name, func(listen, admin string) ([]byte, error) {
		return pl.proxyConfig(listen, admin, backendURL)
	})
	if err != nil {
		return nil, err
	}
	return startChildProxy(ctx, env.Executable, file, listen, admin)
}

// proxyConfig returns the YAML of a proxy listening on listen (admin on
// admin) in front of backendURL: the chain's policy, the proxy's
// defaults otherwise (its pool, its upstream client side, which neither
// throttles nor retries), checked by the proxy's own parser.
func (pl graphPlan) proxyConfig(listen, admin, backendURL string) ([]byte, error) {
	pol, err := pl.c.Policy()
	if err != nil {
		return nil, err
	}
	cfg := &proxy.Config{
		Listeners:    []proxy.ListenerConfig{{Addr: listen}},
		Admin:        proxy.AdminConfig{Addr: admin},
		Backends:     proxy.BackendsConfig{Servers: []proxy.ServerConfig{{URL: backendURL}}},
		DrainTimeout: time.Second,
		Config:       pol,
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := proxy.Parse("proxy.yaml", b); err != nil {
		return nil, err
	}
	return b, nil
}

// graphTransport is the base transport of the clients: keep-alive
// connections to the loopback target, no proxy, no compression.
func graphTransport() *http.Transport {
	return &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
}

// stampDeadline puts the deadline of the request's context in
// LabDeadlineHeader (the lab's instrumentation, passed on by every tier
// to the backend's records) and sends it through next.
type stampDeadline struct{ next http.RoundTripper }

func (s stampDeadline) RoundTrip(req *http.Request) (*http.Response, error) {
	if d, ok := req.Context().Deadline(); ok {
		out := *req
		out.Header = req.Header.Clone()
		out.Header.Set(testbed.LabDeadlineHeader, strconv.FormatInt(d.UnixNano(), 10))
		req = &out
	}
	return s.next.RoundTrip(req)
}

// clientOf returns a class's client population's transport: sluice's
// client side for the in-process row, the lab's retry policy for the
// others.
func (pl graphPlan) clientOf(row string, seed uint64, base *http.Transport) (http.RoundTripper, error) {
	if figure.InProcessRow(row) {
		return client.New(base, pl.c.SluiceClientOf(row), client.Options{Rand: rand.New(rand.NewPCG(seed, 0x636c69656e74))})
	}
	return retry.NewTransport(base, pl.c.Retry(row, pl.c.ClientTimeout), seed)
}

// load runs the row's clients against target with the trigger on the
// backend, and returns the records of both ends (and the proxies' states
// over time, when the row has proxies).
func (pl graphPlan) load(ctx context.Context, env *Env, row, target, backendURL string, proxies []namedProxy) (*figure.GraphRun, error) {
	c := pl.c
	classes := c.Classes()
	var bases []*http.Transport
	defer func() {
		for _, b := range bases {
			b.CloseIdleConnections()
		}
	}()
	run := &figure.GraphRun{Row: row}
	var mu sync.Mutex
	t0 := time.Now()
	var cfgs []loadgen.Config
	for cl, name := range classes {
		w, err := loadgen.NewURLs("chain-"+name, "url", []loadgen.Weighted{{Name: "/item", Weight: 1}})
		if err != nil {
			return nil, err
		}
		arr, err := c.ArrivalsOf(cl)
		if err != nil {
			return nil, err
		}
		cfg := loadgen.Config{Mode: loadgen.ModeOpen, Target: target, Duration: c.End(),
			Seed: env.Seed*10 + uint64(cl), Timeout: c.Deadline, Workload: w, Arrivals: arr,
			MaxInflight: 50000, MaxConns: 8192,
			Classes: []loadgen.Weighted{{Name: name, Weight: 1}}, ClassHeader: figure.GraphClassHeader}
		if c.Transport == "grpc" {
			if cfg.Workload, err = loadgen.NewURLs("chain-"+name, "url", []loadgen.Weighted{{Name: loadgen.DefaultGRPCMethod, Weight: 1}}); err != nil {
				return nil, err
			}
			if cfg.GRPC, err = pl.grpcClientOf(row, env.Seed*10+uint64(cl)); err != nil {
				return nil, err
			}
		} else {
			base := graphTransport()
			bases = append(bases, base)
			rt, err := pl.clientOf(row, env.Seed*10+uint64(cl), base)
			if err != nil {
				return nil, err
			}
			cfg.Transport = stampDeadline{next: rt}
		}
		cfgs = append(cfgs, cfg)
	}
	lctx, cancel := context.WithTimeout(ctx, c.End()+c.Deadline+pl.grace)
	defer cancel()
	var trigErr error
	if from, to, ok := c.TriggerSpan(); ok {
		scale := func(f float64) {
			if err := postScale(lctx, backendURL, f); err != nil && trigErr == nil {
				trigErr = err
			}
		}
		t1 := time.AfterFunc(from, func() { scale(c.TriggerFactor) })
		t2 := time.AfterFunc(to, func() { scale(1) })
		defer t1.Stop()
		defer t2.Stop()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { pl.progress(env, run, &mu, t0, stop) })
	bg.Go(func() { sampleProxies(proxies, run, &mu, t0, stop) })
	var wg sync.WaitGroup
	errs := make([]error, len(cfgs))
	for i := range cfgs {
		cfg := cfgs[i]
		wg.Go(func() {
			shift := time.Since(t0)
			cfg.OnRequest = func(q loadgen.RequestRecord) {
				u := figure.GraphUser{Class: i, Sent: q.Intended + shift, Done: q.Done + shift, Status: q.Status}
				mu.Lock()
				run.Users = append(run.Users, u)
				mu.Unlock()
			}
			_, errs[i] = loadgen.Run(lctx, cfg)
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if trigErr != nil {
		return nil, fmt.Errorf("trigger: %w", trigErr)
	}
	recs, err := fetchRecords(ctx, backendURL)
	if err != nil {
		return nil, err
	}
	off := func(t time.Time) time.Duration {
		if t.IsZero() {
			return 0
		}
		return max(t.Sub(t0), time.Nanosecond)
	}
	for _, r := range recs {
		run.Calls = append(run.Calls, figure.GraphCall{Arrival: off(r.Arrival), Finish: off(r.Finish), Demand: r.Demand,
			UserDeadline: off(r.UserDeadline), Gone: r.Gone})
	}
	return run, nil
}

// progress prints one line a second: answers within the deadline and
// failures of the last second, by completion.
func (pl graphPlan) progress(env *Env, run *figure.GraphRun, mu *sync.Mutex, t0 time.Time, stop <-chan struct{}) {
	seen := 0
	tick.Every(stop, time.Second, func() {
		now := time.Since(t0)
		mu.Lock()
		good, bad := 0, 0
		for _, u := range run.Users[seen:] {
			if u.Good(pl.c.Deadline) {
				good++
			} else {
				bad++
			}
		}
		seen = len(run.Users)
		mu.Unlock()
		env.Logf("%-14s %3.0fs/%.0fs  good %4d/s  failed %4d/s", run.Row, now.Seconds(), pl.c.End().Seconds(), good, bad)
	})
}

func postScale(ctx context.Context, backendURL string, f float64) error {
	return postControl(ctx, backendURL, "/_scale?factor="+fmtF(f))
}

// postControl POSTs to a queue testbed's control path (with its query).
func postControl(ctx context.Context, backendURL, pathQuery string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, backendURL+pathQuery, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", pathQuery, resp.Status)
	}
	return nil
}

func fetchRecords(ctx context.Context, backendURL string) ([]testbed.QueueRecord, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, backendURL+"/_records", nil)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{Proxy: nil}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("backend records: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("backend records: %s", resp.Status)
	}
	return testbed.ParseQueueRecords(resp.Body)
}
