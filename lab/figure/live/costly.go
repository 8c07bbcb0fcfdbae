// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
)

// costly, live: the simulator's costly figure on real sockets. Two APIs,
// /light and /costly, are called by open-loop Poisson clients through
// sluice's client side (client.Transport, which carries each call's
// deadline to the next hop) at an entry hop, an HTTP server behind the
// sluice middleware whose handler calls the leaf with its request's
// context through client.Transport; the leaf, another HTTP server behind
// the middleware, works on a processor-sharing CPU of 4 cores emulated in
// 1 ms slices (costlyCPU), and stops at the next slice when its context
// ends: the call's deadline, or its caller gone. Both hops run one auto
// stage told the SLO with its tail guard, as in the simulator, and the
// row's queue (tenants.key path: one tenant per API). The CPU times are
// the simulator's times costlyScale (light 4 ms, costly ×10 or ×50), and
// so are the SLO and the deadline; rates are the simulator's ÷
// costlyScale, so the loads are the same multiples of the leaf's
// capacity. The leaf counts the CPU time it spent on each call, and the
// analysis is figure.CostlyChecks, the simulator's.

const (
	costlyScale    = 4.0
	costlyCores    = 4
	costlySlice    = time.Millisecond
	costlyCallHdr  = "X-Lab-Call"
	costlyWorkHdr  = "X-Lab-Work"
	costlyCPUHdr   = "X-Lab-Cpu"
	costlyOverload = 8.0
	costlyLightLd  = 0.4
)

var (
	costlyLight    = scaled(time.Millisecond, costlyScale)
	costlySLO      = scaled(250*time.Millisecond, costlyScale)
	costlyDeadline = scaled(500*time.Millisecond, costlyScale)
)

// costlyPlan is one live run's shape.
type costlyPlan struct {
	warm, length time.Duration
	factors      []float64
	rows         []string
	scope        string // the client sides' throttle.scope
}

func planCostly(env *Env) (costlyPlan, error) {
	pl := costlyPlan{warm: 8 * time.Second, length: 16 * time.Second, factors: []float64{10, 50},
		rows: []string{"requests", "service_time", "service_time_share", "reported"}}
	if env.Quick {
		pl = costlyPlan{warm: time.Second, length: 2 * time.Second, factors: []float64{50}, rows: []string{"service_time_share"}}
	}
	for _, r := range env.Rows {
		if costlyTenants[r] == "" {
			return pl, fmt.Errorf("row %q: want some of requests, service_time, service_time_share, reported, service_time_share_cores", r)
		}
	}
	if len(env.Rows) > 0 {
		pl.rows = env.Rows
	}
	ps := figure.NewParams("costly")
	ps.Floats(&pl.factors, "factors", pl.factors, 1, 1000, "the costly API's cost ÷ the light one's, one run each")
	ps.Duration(&pl.warm, "warm", pl.warm, 0, time.Hour, "time before the measurement")
	ps.Duration(&pl.length, "length", pl.length, time.Second, time.Hour, "time measured")
	ps.Choice(&pl.scope, "throttle_scope", client.ScopeHop, []string{client.ScopeHop, client.ScopeDestination},
		"the client sides' throttle.scope: hop (a window per API, the calls' hop tenant) or destination (one per destination)")
	if err := ps.SetAll(env.Sets); err != nil {
		return pl, err
	}
	return pl, ps.Err()
}

// costlyTenants is each row's tenants section at both hops.
var costlyTenants = map[string]string{
	"requests":           "{fair: true, key: path}",
	"service_time":       "{fair: true, key: path, cost: service_time}",
	"service_time_share": "{fair: true, key: path, cost: service_time, slot_share: true}",
	"reported":           "{fair: true, key: path, cost: reported}",
	// The slot share at the entry; the leaf's limit at most 1.5 × its
	// cores and the entry without auto's tail guard (costlyLeafBound).
	"service_time_share_cores": "{fair: true, key: path, cost: service_time, slot_share: true}",
}

// costlyLeafBound is, for the rows that bound the leaf's limit near its
// cores (not run by default: --rows), that bound, × the cores: a
// processor-sharing CPU serves no more past them, it only stretches
// every call past its deadline. The slot share is then at the entry
// only, and the entry runs without the tail guard (a hop whose service
// time is a chain's; see the simulator's costly figure and the notebook).
var costlyLeafBound = map[string]float64{"service_time_share_cores": 1.5}

// costlyStage is the YAML of one hop's stage in a row.
func costlyStage(name, row string) string {
	ten := costlyTenants[row]
	params := fmt.Sprintf("slo: %v, tail_guard: true, min_completions: 200", costlySLO)
	if b := costlyLeafBound[row]; b > 0 {
		switch name {
		case "leaf":
			ten = strings.Replace(ten, ", slot_share: true", "", 1)
			params += fmt.Sprintf(", max_limit: %g, initial_limit: %g", math.Round(b*costlyCores), math.Round(b*costlyCores))
		default:
			params = strings.Replace(params, "tail_guard: true", "tail_guard: false", 1)
		}
	}
	return fmt.Sprintf(`classes: {trusted_proxies: [127.0.0.1/32]}
stages:
  - name: %s
    controller: auto
    params: {%s}
    tenants: %s
`, name, params, ten)
}

func newCostlyPolicy(src string) (*policy.Policy, error) {
	var c policy.Config
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	return policy.New(c, policy.Options{})
}

// costlyCPU is a processor-sharing CPU of n cores emulated in slices: a
// call takes a core for a slice (a channel send: waiting senders are
// served in order, so the cores go round the calls), sleeps it, gives
// the core back, and checks its context before the next. A slice's work
// is the time its sleep took (at most what the call has left), so that
// late timer wake-ups do not take capacity from the CPU.
type costlyCPU struct {
	cores chan struct{}
	// nominal and wall sum the slices' CPU time and the wall time their
	// sleeps took, in nanoseconds; held sums the time a core was held.
	nominal, wall, held atomic.Int64
}

// stretch describes how much longer than their CPU time the slices took.
func (c *costlyCPU) stretch() string {
	n := float64(max(1, c.nominal.Load()))
	return fmt.Sprintf("slices' sleeps took %.2f× their CPU time, cores held %.2f× it (%.1f s of CPU)",
		float64(c.wall.Load())/n, float64(c.held.Load())/n, n/1e9)
}

// work does demand of CPU time unless ctx ends first, and returns the
// CPU time done.
func (c *costlyCPU) work(ctx context.Context, demand time.Duration) (time.Duration, error) {
	var done time.Duration
	for done < demand {
		select {
		case c.cores <- struct{}{}:
		case <-ctx.Done():
			return done, ctx.Err()
		}
		d := min(costlySlice, demand-done)
		t0 := time.Now()
		time.Sleep(d)
		slept := time.Since(t0)
		<-c.cores
		c.held.Add(int64(time.Since(t0)))
		c.wall.Add(int64(slept))
		c.nominal.Add(int64(d))
		// The core was held for as long as the sleep took, past the
		// slice when the timer fired late (a loaded machine wakes a
		// 1 ms sleep 1–2 ms late): the call did that much work, or the
		// emulated CPU would lose the overshoot and deliver fewer cores
		// than it has.
		done += min(slept, demand-done)
		if ctx.Err() != nil {
			return done, ctx.Err()
		}
	}
	return done, nil
}

// costlyLeaf is the leaf's handler and its per-call bookkeeping.
type costlyLeaf struct {
	cpu  costlyCPU
	tr   *costlyTrace
	mu   sync.Mutex
	work map[uint64]time.Duration // CPU time spent, by call
	late map[uint64]bool          // finished after its deadline
}

func (l *costlyLeaf) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseUint(r.Header.Get(costlyCallHdr), 10, 64)
	demand, _ := strconv.ParseInt(r.Header.Get(costlyWorkHdr), 10, 64)
	done, err := l.cpu.work(r.Context(), time.Duration(demand))
	dl, hasDL := r.Context().Deadline()
	l.mu.Lock()
	l.work[id] += done
	if err == nil && hasDL && time.Now().After(dl) {
		l.late[id] = true
	}
	l.mu.Unlock()
	if err != nil {
		l.tr.mark(r, lostLeafWork)
		return // the middleware answers a request whose context ended
	}
	// The CPU time spent is the call's cost, for a stage that shares by
	// reported cost (the reported row), here and, in a header, at the
	// entry.
	sluice.ReportCost(r.Context(), done)
	w.Header().Set(costlyCPUHdr, strconv.FormatInt(int64(done), 10))
	_, _ = io.WriteString(w, "ok\n")
}

// costlyEntry is the entry hop's handler: it calls the leaf with its
// request's context through sluice's client side.
type costlyEntry struct {
	leaf string
	hc   *http.Client
	tr   *costlyTrace
}

func (e *costlyEntry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, e.leaf+r.URL.Path, nil)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	req.Header.Set(costlyCallHdr, r.Header.Get(costlyCallHdr))
	req.Header.Set(costlyWorkHdr, r.Header.Get(costlyWorkHdr))
	resp, err := e.hc.Do(req)
	switch {
	case err == nil:
	case r.Context().Err() != nil:
		return // the middleware answers a request whose context ended
	case errors.Is(err, sluice.ErrRejected):
		// The client side refused the call to the leaf (its throttle):
		// a refusal, as the leaf's own would be.
		e.tr.mark(r, lostEntryThrottle)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	default:
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if cpu, err := strconv.ParseInt(resp.Header.Get(costlyCPUHdr), 10, 64); err == nil && cpu > 0 {
		// What the call cost the leaf is its cost here too (the
		// reported row).
		sluice.ReportCost(r.Context(), time.Duration(cpu))
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// costlyServe serves h on 127.0.0.1 and returns its URL and a stop.
func costlyServe(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// costlyClient is sluice's client side over a transport with room for
// the open loops' connections, its throttle of the given scope.
func costlyClient(scope string) (*http.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConns, base.MaxIdleConnsPerHost = 4096, 4096
	cfg := client.DefaultConfig()
	cfg.Throttle.Scope = scope
	rt, err := client.New(base, cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt}, nil
}

// costlyCall is one call's record at the client.
type costlyCall struct {
	id     uint64
	api    int
	sent   time.Duration // since the run's start
	demand time.Duration
	ok     bool // answered 200 within its deadline
	lat    time.Duration
}

func runCostly(ctx context.Context, env *Env) (*figure.Result, error) {
	pl, err := planCostly(env)
	if err != nil {
		return nil, err
	}
	runs := map[string]figure.CostlyRun{}
	for _, f := range pl.factors {
		for _, row := range pl.rows {
			env.Phasef("costly ×%g, %s (load average %.2f)", f, row, loadAverage())
			r, err := pl.run(ctx, env, f, row)
			if err != nil {
				return nil, fmt.Errorf("×%g %s: %w", f, row, err)
			}
			runs[fmt.Sprint(f, row)] = r
		}
	}
	var checks []figure.Check
	var key []string
	tab := figure.NewCostlyTable()
	var failed error
	return finish(env, func(s *report.Summary) {
		for _, f := range pl.factors {
			for _, row := range pl.rows {
				c, k, err := figure.CostlyChecks(s, tab, row, f, costlyCores, msOf(costlySLO), runs[fmt.Sprint(f, row)])
				if err != nil {
					failed = err
					return
				}
				checks, key = append(checks, c...), append(key, k...)
			}
		}
		s.Set("time_scale", costlyScale)
		s.Set("slo_ms", msOf(costlySLO))
	}, func(r *figure.Result) error {
		if failed != nil {
			return failed
		}
		r.AddTable("costly.csv", tab)
		r.Checks, r.Key = checks, key
		r.Setup = []string{
			fmt.Sprintf("Leaf: an HTTP server behind the sluice middleware, a processor-sharing CPU of %d cores emulated in %v slices; the light API's calls take %v of CPU, the costly API's ×10 and ×50 (exponential), and a call whose context ends stops at its next slice.", costlyCores, costlySlice, costlyLight),
			"Entry: an HTTP server behind the sluice middleware that calls the leaf with its request's context through sluice's client.Transport (the deadline travels in X-Sluice-Timeout, the API as the hop's tenant in X-Sluice-Tenant); a call the client side refuses is answered 503.",
			fmt.Sprintf("Load: two open-loop Poisson clients through client.Transport, %g× the leaf's CPU capacity in all, the light API %g× of it; every call's deadline %v, its API its hop tenant. Both client sides' throttle.scope: %s.", costlyOverload, costlyLightLd, costlyDeadline, pl.scope),
			fmt.Sprintf("Both hops: auto told the SLO %v with tail_guard, and the row's tenants (key: path); times are the simulator's × %g. The reported row (cost: reported) charges each call the leaf's CPU time, which the leaf reports (sluice.ReportCost) and returns in a header that the entry reports in turn.", costlySLO, costlyScale),
			fmt.Sprintf("Measured: the calls sent in [%v, %v); goodput and wasted work in the leaf's CPU seconds per second.", pl.warm, pl.warm+pl.length),
		}
		return nil
	})
}

// run runs one row at one cost factor on fresh servers and policies.
func (pl costlyPlan) run(ctx context.Context, env *Env, factor float64, row string) (figure.CostlyRun, error) {
	var out figure.CostlyRun
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leafPol, err := newCostlyPolicy(costlyStage("leaf", row))
	if err != nil {
		return out, err
	}
	entryPol, err := newCostlyPolicy(costlyStage("entry", row))
	if err != nil {
		return out, err
	}
	go leafPol.Run(ctx)
	go entryPol.Run(ctx)
	tr := newCostlyTrace()
	entryGate, leafGate := tr.gates(entryPol, leafPol)
	leaf := &costlyLeaf{cpu: costlyCPU{cores: make(chan struct{}, costlyCores)}, tr: tr, work: map[uint64]time.Duration{}, late: map[uint64]bool{}}
	leafURL, stopLeaf, err := costlyServe(sluice.Middleware(leafGate)(leaf))
	if err != nil {
		return out, err
	}
	defer stopLeaf()
	hc, err := costlyClient(pl.scope)
	if err != nil {
		return out, err
	}
	entryURL, stopEntry, err := costlyServe(sluice.Middleware(entryGate)(&costlyEntry{leaf: leafURL, hc: hc, tr: tr}))
	if err != nil {
		return out, err
	}
	defer stopEntry()
	users, err := costlyClient(pl.scope)
	if err != nil {
		return out, err
	}
	means := []time.Duration{costlyLight, time.Duration(factor * float64(costlyLight))}
	loads := []float64{costlyLightLd * costlyCores, (costlyOverload - costlyLightLd) * costlyCores}
	var mu sync.Mutex
	var calls []costlyCall
	var wg sync.WaitGroup
	var next sync.Mutex
	id := uint64(0)
	end := pl.warm + pl.length
	rec := &recorder{base: time.Now()}
	start := rec.base
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { (&phase{name: "costly", length: end}).progress(env, rec, stop) })
	bg.Go(func() { tr.sample(start, pl.warm, [2]*policy.Policy{entryPol, leafPol}, stop) })
	for api := range figure.CostlyAPIs {
		rate := loads[api] / means[api].Seconds()
		rng := rand.New(rand.NewPCG(env.Seed, uint64(api)+1))
		wg.Go(func() {
			at := time.Duration(0)
			for {
				at += time.Duration(rng.ExpFloat64() / rate * 1e9)
				if at >= end || ctx.Err() != nil {
					return
				}
				if d := time.Until(start.Add(at)); d > 0 {
					time.Sleep(d)
				}
				demand := time.Duration(rng.ExpFloat64() * float64(means[api]))
				next.Lock()
				id++
				cid := id
				next.Unlock()
				sent := at
				wg.Go(func() {
					c := costlyCall{id: cid, api: api, sent: sent, demand: demand}
					var q record
					c.ok, c.lat, q = costlyDo(ctx, users, entryURL+"/"+figure.CostlyAPIs[api], sluice.Hop{Tenant: figure.CostlyAPIs[api]}, cid, demand, tr)
					q.group, q.intended, q.done = uint8(api), sent, time.Since(start)
					rec.mu.Lock()
					rec.recs = append(rec.recs, q)
					rec.mu.Unlock()
					mu.Lock()
					calls = append(calls, c)
					mu.Unlock()
				})
			}
		})
	}
	// Every call ends by its deadline; the leaf's last slices end soon
	// after.
	wg.Wait()
	close(stop)
	bg.Wait()
	time.Sleep(100 * time.Millisecond)
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	tr.report(env, pl, calls, &leaf.cpu)
	return pl.analyse(calls, leaf), nil
}

// costlyDo makes one call with its deadline and hop (the API as its
// tenant, which the next hops carry on); ok when answered 200 in time. It returns the call's progress record (outcome and latency) and
// tells tr how the caller's side ended.
func costlyDo(ctx context.Context, hc *http.Client, url string, hop sluice.Hop, id uint64, demand time.Duration, tr *costlyTrace) (bool, time.Duration, record) {
	ctx, cancel := context.WithTimeout(ctx, costlyDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(sluice.WithHop(ctx, hop), http.MethodGet, url, nil)
	if err != nil {
		return false, 0, record{out: outError}
	}
	req.Header.Set(costlyCallHdr, strconv.FormatUint(id, 10))
	req.Header.Set(costlyWorkHdr, strconv.FormatInt(int64(demand), 10))
	t0 := time.Now()
	resp, err := hc.Do(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	lat := time.Since(t0)
	tr.callEnd(id, err, status, lat)
	ok := err == nil && status == http.StatusOK && lat <= costlyDeadline
	q := record{lat: lat, fail: failIndex(err)}
	switch {
	case ok:
		q.out = outOK
	case errors.Is(err, sluice.ErrRejected) || status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		q.out = outRejected
	case errors.Is(err, context.DeadlineExceeded) || status == http.StatusGatewayTimeout || lat > costlyDeadline:
		q.out = outTimeout
	default:
		q.out = outError
	}
	return ok, lat, q
}

// analyse measures the calls sent in [warm, warm + length): each API's
// offered CPU time and its goodput (of the calls answered in time) per
// second, the leaf's CPU time on them and on those not answered in time.
func (pl costlyPlan) analyse(calls []costlyCall, leaf *costlyLeaf) figure.CostlyRun {
	run := figure.CostlyRun{APIs: make([]figure.CostlyAPI, len(figure.CostlyAPIs))}
	rts := make([][]float64, len(figure.CostlyAPIs))
	leaf.mu.Lock()
	defer leaf.mu.Unlock()
	for _, c := range calls {
		if c.sent < pl.warm || c.sent >= pl.warm+pl.length {
			continue
		}
		w := leaf.work[c.id].Seconds()
		run.LeafWork += w
		if !c.ok {
			run.Wasted += w
		}
		if leaf.late[c.id] {
			run.Late++
		}
		a := &run.APIs[c.api]
		a.Offered += c.demand.Seconds()
		a.Sent++
		if c.ok {
			a.Goodput += c.demand.Seconds()
			a.Served++
			rts[c.api] = append(rts[c.api], msOf(c.lat))
		}
	}
	secs := pl.length.Seconds()
	for i := range run.APIs {
		a := &run.APIs[i]
		a.Offered /= secs
		a.Goodput /= secs
		a.P99MS = monitor.Percentile(rts[i], 0.99)
	}
	return run
}
