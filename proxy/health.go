// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/proxy/guard"
)

// Defaults of HealthConfig and ReadyShedConfig.
const (
	DefaultHealthCheckInterval = 2 * time.Second
	DefaultReadyShedAbove      = 0.5
	DefaultReadyShedFor        = 30 * time.Second
)

// DefaultBackendProbePaths are the paths of the backend's own probes that
// pass through unshed (HealthConfig.BackendPaths).
var DefaultBackendProbePaths = []string{"/healthz", "/readyz", "/livez"}

// HealthConfig is what the proxy answers to health probes (kubelet's
// liveness and readiness probes, a load balancer's health checks) and how
// it treats the backend's own probes.
//
// The admin listener always serves GET /healthz (the process is alive: it
// answers 200 whenever it answers at all, and is never shed) and GET
// /readyz (200 when sluice can serve, 503 with the reason otherwise). Both
// are unauthenticated, cheap, and tell nothing beyond ready or not and a
// one-line reason.
type HealthConfig struct {
	// BackendPaths are request paths (exact, without the query) of the
	// backend's own probes: a request for one skips classification and
	// admission control — it is never shed, never queued behind the
	// stages, never a response-time sample — and is forwarded to a
	// backend server without taking a pool slot (default: /healthz,
	// /readyz and /livez; [] forwards them like any request). They are
	// counted in proxy_probe_requests_total.
	BackendPaths []string `yaml:"backend_paths"`
	// ListenerPrefix, when set (such as "/sluice"), also serves the
	// admin listener's probes on every client listener under this prefix
	// (PREFIX/healthz, PREFIX/readyz), for setups that can only probe the
	// main port (default "": off, so that /healthz on a client listener is
	// the backend's own).
	ListenerPrefix string `yaml:"listener_prefix,omitempty"`
	// CheckInterval is how often /readyz's backend check dials every
	// server (a TCP connect bounded by backends.timeouts.dial and by this
	// interval) and how often the shed fraction is measured (default 2s).
	CheckInterval time.Duration `yaml:"check_interval"`
	// ReadyShed, when set, also makes /readyz fail while the proxy sheds
	// more than a fraction of its requests for long enough (default
	// none: shedding never makes sluice unready).
	ReadyShed *ReadyShedConfig `yaml:"ready_shed,omitempty"`
}

// ReadyShedConfig is the optional shedding condition of /readyz, with
// hysteresis. The shed fraction s = Δshed / Δoffered is measured over each
// check interval: offered counts the requests that reached admission
// control (not probe paths), shed those refused with 503 by a stage, the
// pool or a client share. sluice becomes unready once s > Above has held
// for For, and ready again once s < Below has held for ClearFor (an
// interval without requests counts as s = 0).
type ReadyShedConfig struct {
	// Above is the shed fraction in (0, 1] above which sluice becomes
	// unready after For (default 0.5).
	Above float64 `yaml:"above"`
	// For is how long the fraction must stay above Above (default 30s).
	For time.Duration `yaml:"for"`
	// Below is the shed fraction in [0, Above] below which an unready
	// sluice becomes ready again after ClearFor (default: half of Above).
	Below float64 `yaml:"below"`
	// ClearFor is how long the fraction must stay below Below (default
	// For).
	ClearFor time.Duration `yaml:"clear_for"`
}

func (h *HealthConfig) setDefaults() {
	if h.BackendPaths == nil {
		h.BackendPaths = append([]string(nil), DefaultBackendProbePaths...)
	}
	h.CheckInterval = cmp.Or(h.CheckInterval, DefaultHealthCheckInterval)
	if r := h.ReadyShed; r != nil {
		r.Above = cmp.Or(r.Above, DefaultReadyShedAbove)
		r.For = cmp.Or(r.For, DefaultReadyShedFor)
		if r.Below == 0 {
			r.Below = r.Above / 2
		}
		r.ClearFor = cmp.Or(r.ClearFor, r.For)
	}
}

func (h *HealthConfig) validate() error {
	seen := map[string]int{}
	for i, p := range h.BackendPaths {
		f := fmt.Sprintf("health.backend_paths[%d]", i)
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t") {
			return fieldErr(f, "%q is invalid: must be a path such as /healthz, without query or spaces", p)
		}
		if j, dup := seen[p]; dup {
			return fieldErr(f, "%q is already health.backend_paths[%d]", p, j)
		}
		seen[p] = i
	}
	if p := h.ListenerPrefix; p != "" {
		if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, "?# \t") {
			return fieldErr("health.listener_prefix", "%q is invalid: must be a path such as /sluice (leading /, no trailing /, no query)", p)
		}
		for _, q := range []string{p + "/healthz", p + "/readyz"} {
			if j, clash := seen[q]; clash {
				return fieldErr("health.listener_prefix", "%q serves %s, which is also health.backend_paths[%d]: the backend's probe would never be reached", p, q, j)
			}
		}
	}
	if h.CheckInterval <= 0 {
		return fieldErr("health.check_interval", "%v is invalid: must be a positive duration", h.CheckInterval)
	}
	if r := h.ReadyShed; r != nil {
		if !(r.Above > 0 && r.Above <= 1) {
			return fieldErr("health.ready_shed.above", "%v is invalid: must be a fraction in (0, 1]", r.Above)
		}
		if !(r.Below >= 0 && r.Below <= r.Above) {
			return fieldErr("health.ready_shed.below", "%v is invalid: must be a fraction in [0, above] (above is %v)", r.Below, r.Above)
		}
		if r.For <= 0 {
			return fieldErr("health.ready_shed.for", "%v is invalid: must be a positive duration", r.For)
		}
		if r.ClearFor <= 0 {
			return fieldErr("health.ready_shed.clear_for", "%v is invalid: must be a positive duration", r.ClearFor)
		}
	}
	return nil
}

// isProbePath reports whether path is one of the backend's probe paths.
// A linear scan: there are a few, and it allocates nothing.
func (g *generation) isProbePath(path string) bool {
	for _, p := range g.cfg.Health.BackendPaths {
		if p == path {
			return true
		}
	}
	return false
}

// ShedWatch is the hysteresis of ReadyShedConfig: a deterministic state
// machine fed one measured shed fraction per interval. The zero value with
// a config is ready. Not safe for concurrent use.
type ShedWatch struct {
	Config ReadyShedConfig
	over   bool      // unready for shedding
	since  time.Time // start of the current run past the threshold; zero: none
}

// Observe records the shed fraction s measured over [from, now] and
// reports whether sluice is unready for shedding. A run starts at from,
// the start of the interval it was first seen in: unready after
// s > Above held for For, ready again after s < Below held for ClearFor.
func (w *ShedWatch) Observe(from, now time.Time, s float64) (unready bool) {
	past, hold := s > w.Config.Above, w.Config.For
	if w.over {
		past, hold = s < w.Config.Below, w.Config.ClearFor
	}
	switch {
	case !past:
		w.since = time.Time{}
	case w.since.IsZero():
		w.since = from
	}
	if past && now.Sub(w.since) >= hold {
		w.over, w.since = !w.over, time.Time{}
	}
	return w.over
}

// Unready reports whether sluice is unready for shedding.
func (w *ShedWatch) Unready() bool { return w.over }

// readiness is what /readyz answers, updated by the health loop.
type readiness struct {
	draining atomic.Bool
	mu       sync.Mutex
	checked  bool   // the first backend check is done
	reason   string // "" when ready
	watch    ShedWatch
	watchCfg *ReadyShedConfig // the config watch was built from
	last     time.Time
	offered  uint64
	shed     uint64
}

// state returns the current answer: ready, or why not.
func (r *readiness) state() (bool, string) {
	if r.draining.Load() {
		return false, "draining: shutting down"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.checked {
		return false, "starting: the first backend check has not completed"
	}
	return r.reason == "", r.reason
}

// healthCheck runs one readiness check at now: it dials every backend
// server, and measures the shed fraction since the last check.
func (s *Server) healthCheck(ctx context.Context, now time.Time) {
	g := s.h.gen.Load()
	hc := g.cfg.Health
	timeout := min(g.cfg.Backends.Timeouts.Dial, hc.CheckInterval)
	servers := g.pool.Backends()
	var up atomic.Int32
	var wg sync.WaitGroup
	var d net.Dialer
	for _, b := range servers {
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			c, err := d.DialContext(dctx, "tcp", hostPort(b.URL.Scheme, b.URL.Host))
			if err == nil {
				c.Close()
				up.Add(1)
			}
		})
	}
	wg.Wait()
	offered, shed := s.h.offered.Load(), s.h.shed.Load()

	r := &s.ready
	r.mu.Lock()
	defer r.mu.Unlock()
	reason := ""
	if up.Load() == 0 {
		reason = fmt.Sprintf("no backend server reachable (0 of %d answered a TCP connect within %v)", len(servers), timeout)
	}
	if hc.ReadyShed == nil {
		r.watchCfg = nil
	} else {
		if r.watchCfg == nil || *r.watchCfg != *hc.ReadyShed {
			// New or changed by a reload: start from ready.
			r.watch = ShedWatch{Config: *hc.ReadyShed}
			c := *hc.ReadyShed
			r.watchCfg = &c
		}
		if r.checked {
			frac := 0.0
			if do := offered - r.offered; do > 0 {
				frac = float64(shed-r.shed) / float64(do)
			}
			if r.watch.Observe(r.last, now, frac) && reason == "" {
				reason = fmt.Sprintf("shedding: more than %g of requests refused for %v (ready again below %g for %v)",
					hc.ReadyShed.Above, hc.ReadyShed.For, hc.ReadyShed.Below, hc.ReadyShed.ClearFor)
			}
		}
	}
	r.reason, r.checked, r.last, r.offered, r.shed = reason, true, now, offered, shed
}

// hostPort is host with the scheme's default port when it has none.
func hostPort(scheme, host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(host, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}

// runHealth checks readiness at once, then every check_interval (read
// from the running configuration each time) until ctx ends.
func (s *Server) runHealth(ctx context.Context) {
	for {
		s.healthCheck(ctx, time.Now())
		t := time.NewTimer(s.h.gen.Load().cfg.Health.CheckInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// serveHealthz is GET /healthz: the process is alive.
func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, "ok\n")
}

// serve is GET /readyz: 200 "ready", or 503 with the reason.
func (r *readiness) serve(w http.ResponseWriter, _ *http.Request) {
	ok, reason := r.state()
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: "+reason+"\n")
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

// serveProbe forwards a request for one of the backend's probe paths:
// past classification and admission control, to a server chosen in
// rotation without taking a pool slot, and with no stage to sample it.
func (h *Handler) serveProbe(w http.ResponseWriter, r *http.Request, g *generation, arrival time.Time) {
	h.m.probes.Inc()
	bs := g.pool.Backends()
	b := bs[int(g.pool.rr.Add(1)%uint64(len(bs)))]
	rs := &reqState{Context: r.Context(), h: h, gen: g, backend: b, arrival: arrival, in: r, writeWait0: guard.ClientWriteWait(r)}
	completed := false
	defer func() {
		if !completed {
			rs.finish(true)
		}
	}()
	h.rp.ServeHTTP(w, r.WithContext(rs))
	completed = true
	rs.finish(false)
}

// descReady is the readiness gauge.
var descReady = prometheus.NewDesc("proxy_ready",
	"1 when /readyz answers 200 (sluice can serve), 0 otherwise.", nil, nil)

// readyCollector exports proxy_ready at each scrape.
type readyCollector struct{ r *readiness }

func (c readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descReady }

func (c readyCollector) Collect(ch chan<- prometheus.Metric) {
	v := 0.0
	if ok, _ := c.r.state(); ok {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, v)
}
