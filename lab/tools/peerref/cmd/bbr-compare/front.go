// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"

	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
)

// quietLog swallows the standard library's per-request log lines (a
// client that gives up makes ReverseProxy log "context canceled").
var quietLog = log.New(io.Discard, "", 0)

// sample is a front's limiter state at one moment of a run.
type sample struct {
	t time.Duration
	// cpu is aegis's CPU gauge in ‰ (NaN for sluice, which has no CPU
	// sensor here).
	cpu float64
	// limit is the bound on requests in flight the limiter applies while
	// it sheds: aegis admits while inFlight ≤ max(maxInFlight, 1), i.e.
	// up to max(maxInFlight, 1)+1 in flight; sluice's stage admits while
	// fewer than its setting are in service.
	limit float64
	// rejected is the limiter's rejections since it started.
	rejected float64
	// inFlight is the limiter's in-flight count.
	inFlight float64
}

// front is a system in front of the backends.
type front interface {
	URL() string
	Sample() sample
	// Detail describes the limiter's estimate now, for progress lines.
	Detail() string
	Close() error
}

// system is one row of the comparison.
type system struct {
	name, label string
	start       func(ctx context.Context, urls []string) (front, error)
}

// aegisFront is net/http/httputil.ReverseProxy behind an aegis BBR
// middleware: Allow before proxying, ErrLimitExceed answered 503, the
// done func called when the proxied answer has been written.
type aegisFront struct {
	lim       *bbr.BBR
	bal       *balancer
	srv       *server
	transport *http.Transport
	rejected  atomic.Int64
}

func newAegisFront(urls []string, opts ...bbr.Option) (*aegisFront, error) {
	// The upstream transport is sized like the sluice proxy's pool
	// (conns connections per server, all kept idle), so that both proxies
	// reuse their upstream connections alike.
	tr := &http.Transport{Proxy: nil, MaxIdleConns: 0, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: 120 * time.Second, DisableCompression: true}
	f := &aegisFront{lim: bbr.NewLimiter(opts...), transport: tr}
	var rps []http.Handler
	for _, u := range urls {
		target, err := url.Parse(u)
		if err != nil {
			return nil, err
		}
		rp := &httputil.ReverseProxy{
			Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
			Transport: tr,
			ErrorLog:  quietLog,
		}
		rps = append(rps, rp)
	}
	f.bal = newBalancer(rps)
	srv, err := serve(f)
	if err != nil {
		return nil, err
	}
	f.srv = srv
	return f, nil
}

func (f *aegisFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	done, err := f.lim.Allow()
	if err != nil {
		if errors.Is(err, ratelimit.ErrLimitExceed) {
			f.rejected.Add(1)
			http.Error(w, "aegis bbr: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sw := &testbed.StatusRecorder{ResponseWriter: w}
	f.bal.ServeHTTP(sw, r)
	var out error
	switch {
	case sw.Code() >= 500:
		out = fmt.Errorf("upstream answered %d", sw.Code())
	case r.Context().Err() != nil:
		out = r.Context().Err()
	}
	done(ratelimit.DoneInfo{Err: out})
}

func (f *aegisFront) URL() string { return f.srv.URL }

func (f *aegisFront) Sample() sample {
	st := f.lim.Stat()
	return sample{cpu: float64(st.CPU), limit: float64(max(st.MaxInFlight, 1) + 1), rejected: float64(f.rejected.Load()),
		inFlight: float64(st.InFlight)}
}

func (f *aegisFront) Detail() string {
	st := f.lim.Stat()
	return fmt.Sprintf("maxPass %d, minRT %d ms → maxInFlight %d", st.MaxPass, st.MinRt, st.MaxInFlight)
}

func (f *aegisFront) Close() error {
	err := f.srv.Close()
	f.transport.CloseIdleConnections()
	return err
}

// balancer sends each request to the server with the fewest requests in
// flight, ties broken round-robin, as the sluice proxy's least-in-flight
// balancing does.
type balancer struct {
	servers  []http.Handler
	inFlight []atomic.Int64
	rr       atomic.Uint64
}

func newBalancer(servers []http.Handler) *balancer {
	return &balancer{servers: servers, inFlight: make([]atomic.Int64, len(servers))}
}

func (b *balancer) pick() int {
	n := len(b.servers)
	start := int(b.rr.Add(1) % uint64(n))
	best, bestN := -1, int64(0)
	for i := range n {
		j := (start + i) % n
		if c := b.inFlight[j].Load(); best < 0 || c < bestN {
			best, bestN = j, c
		}
	}
	return best
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := b.pick()
	b.inFlight[i].Add(1)
	defer b.inFlight[i].Add(-1)
	b.servers[i].ServeHTTP(w, r)
}

// mainStage is the name of the sluice proxy's one stage.
const mainStage = "site"

// sluiceFront is the sluice proxy in this process.
type sluiceFront struct {
	url    string
	srv    *proxy.Server
	cancel context.CancelFunc
	done   chan error
}

// sluiceConfig is the sluice proxy of the adaptive experiment's rows
// (figure/live/adaptive_run.go, adaptiveProxyConfig): one stage for every
// request with the controller, the backends behind a pool that never binds
// by itself, least-in-flight balancing, long upstream timeouts.
func sluiceConfig(controller string, urls []string) (*proxy.Config, error) {
	queueMax := 100000
	cfg := &proxy.Config{
		Listeners:    []proxy.ListenerConfig{{Addr: "127.0.0.1:0"}},
		Admin:        proxy.AdminConfig{Addr: "127.0.0.1:0"},
		DrainTimeout: time.Second,
		Backends: proxy.BackendsConfig{Balance: proxy.BalanceLeastInFlight,
			Queue:    proxy.PoolQueueConfig{Max: &queueMax, Timeout: 120 * time.Second},
			Timeouts: proxy.TimeoutsConfig{ResponseHeader: 120 * time.Second}},
	}
	for _, u := range urls {
		cfg.Backends.Servers = append(cfg.Backends.Servers, proxy.ServerConfig{URL: u, MaxConcurrency: conns})
	}
	cfg.Stages = []policy.StageConfig{{Name: mainStage, Match: policy.MatchConfig{PathPrefix: "/"}, Controller: controller}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sluice proxy configuration: %w", err)
	}
	return cfg, nil
}

func newSluiceFront(ctx context.Context, urls []string) (*sluiceFront, error) {
	cfg, err := sluiceConfig("bbr", urls)
	if err != nil {
		return nil, err
	}
	srv, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("sluice proxy: %w", err)
	}
	if err := srv.Listen(); err != nil {
		return nil, fmt.Errorf("sluice proxy: %w", err)
	}
	addrs := srv.Addrs()
	if len(addrs) == 0 {
		return nil, errors.New("sluice proxy: no listener")
	}
	pctx, cancel := context.WithCancel(ctx)
	f := &sluiceFront{url: "http://" + addrs[0].String(), srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { f.done <- srv.Serve(pctx) }()
	if err := testbed.WaitReady(ctx, f.url+"/", 10*time.Second); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

func (f *sluiceFront) URL() string { return f.url }

func (f *sluiceFront) Sample() sample {
	s := sample{cpu: math.NaN(), limit: math.NaN(), rejected: math.NaN(), inFlight: math.NaN()}
	for _, st := range f.srv.State(0).Stages {
		if st.Name != mainStage {
			continue
		}
		s.limit, s.rejected = st.Setting, 0
		for _, c := range st.Classes {
			s.rejected += float64(c.Rejected)
		}
		if st.InFlightLimited != nil {
			s.inFlight = float64(st.InFlightLimited.InFlight)
		}
	}
	return s
}

func (f *sluiceFront) Detail() string {
	for _, st := range f.srv.State(1).Stages {
		if st.Name == mainStage && len(st.Decisions) > 0 {
			r := st.Decisions[len(st.Decisions)-1].Reason
			if i := strings.Index(r, "maxInFlight"); i >= 0 {
				r = r[i:]
			}
			if i := strings.Index(r, ":"); i >= 0 {
				r = r[:i]
			}
			return r
		}
	}
	return ""
}

func (f *sluiceFront) Close() error {
	f.cancel()
	select {
	case err := <-f.done:
		return err
	case <-time.After(10 * time.Second):
		return errors.New("sluice proxy: did not stop within 10s")
	}
}
