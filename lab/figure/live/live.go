// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/lab/tick"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/stage"
)

// httpServer is an in-process HTTP server on a free loopback port.
type httpServer struct {
	URL string
	srv *http.Server
}

// serveHTTP serves h on 127.0.0.1 at a free port.
func serveHTTP(h http.Handler) (*httpServer, error) {
	ln, err := testbed.Listen("127.0.0.1:0", false)
	if err != nil {
		return nil, err
	}
	s := &httpServer{URL: "http://" + ln.Addr().String(),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}}
	go s.srv.Serve(ln) //nolint:errcheck // Close ends it with ErrServerClosed
	return s, nil
}

// Close closes the listener and every connection at once.
func (s *httpServer) Close() error { return s.srv.Close() }

// liveProxy is a sluice proxy serving in this process.
type liveProxy struct {
	URL    string
	srv    *proxy.Server
	cancel context.CancelFunc
	done   chan error
}

// serveProxy listens and serves srv until Close.
func serveProxy(ctx context.Context, srv *proxy.Server) (*liveProxy, error) {
	if err := srv.Listen(); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	addrs := srv.Addrs()
	if len(addrs) == 0 {
		return nil, errors.New("proxy: no listener")
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &liveProxy{URL: "http://" + addrs[0].String(), srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- srv.Serve(pctx) }()
	return p, nil
}

// Close stops the proxy and waits for it (at most its drain timeout).
func (p *liveProxy) Close() error {
	p.cancel()
	select {
	case err := <-p.done:
		return err
	case <-time.After(10 * time.Second):
		return errors.New("proxy: did not stop within 10s")
	}
}

// stageSource is a proxy whose stages a phase samples: one in this
// process (liveProxy) or a child process read over its admin listener
// (childProxy).
type stageSource interface {
	// stage returns the state of the named stage with up to decisions
	// recent decisions, or false.
	stage(name string, decisions int) (stage.State, bool)
}

// stage returns the state of the named stage (no decisions), or false.
func (p *liveProxy) stage(name string, decisions int) (stage.State, bool) {
	for _, st := range p.srv.State(decisions).Stages {
		if st.Name == name {
			return st, true
		}
	}
	return stage.State{}, false
}

// outcome is a request's outcome as the experiments count it.
type outcome uint8

const (
	outOK outcome = iota
	outRejected
	outTimeout
	outError // HTTP errors, transport errors, drops
	outAborted
)

func outcomeOf(s string) outcome {
	switch s {
	case "ok":
		return outOK
	case "rejected":
		return outRejected
	case "timeout":
		return outTimeout
	case "aborted":
		return outAborted
	default:
		return outError
	}
}

// record is one finished request of a phase. Times are offsets from the
// phase's start.
type record struct {
	group    uint8 // index of the load spec that sent it
	typ      string
	intended time.Duration
	done     time.Duration
	lat      time.Duration
	out      outcome
	fail     uint8 // why it got no response: 1 + its index in loadgen.FailureKinds; 0 for a response
}

// failIndex is record.fail for err.
func failIndex(err error) uint8 {
	k := loadgen.FailureKind(err)
	for i, name := range loadgen.FailureKinds {
		if name == k {
			return uint8(i + 1)
		}
	}
	return 0
}

// failureCounts counts recs' failures by loadgen.FailureKinds.
func failureCounts(recs []record) map[string]int {
	n := map[string]int{}
	for _, q := range recs {
		if q.fail > 0 {
			n[loadgen.FailureKinds[q.fail-1]]++
		}
	}
	return n
}

// recorder collects the records of a phase's concurrent loads. It is safe
// for concurrent use.
type recorder struct {
	base time.Time
	mu   sync.Mutex
	recs []record
}

// hook returns the OnRequest function of the load started at runStart.
func (r *recorder) hook(group uint8, runStart time.Time) func(loadgen.RequestRecord) {
	shift := runStart.Sub(r.base)
	return func(q loadgen.RequestRecord) {
		rec := record{group: group, typ: q.Type, intended: q.Intended + shift, done: q.Done + shift, lat: q.Latency, out: outcomeOf(q.Outcome), fail: failIndex(q.Err)}
		r.mu.Lock()
		r.recs = append(r.recs, rec)
		r.mu.Unlock()
	}
}

// lastSecond summarises the records completed in (now−1s, now].
func (r *recorder) lastSecond(now time.Duration) (ok, rejected, failed int, p90 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lats []float64 // ns
	for i := len(r.recs) - 1; i >= 0; i-- {
		q := r.recs[i]
		if q.done < now-3*time.Second {
			break // records arrive in near completion order
		}
		if q.done <= now-time.Second || q.done > now {
			continue
		}
		switch q.out {
		case outOK:
			ok++
			lats = append(lats, float64(q.lat))
		case outRejected:
			rejected++
		case outTimeout, outError:
			failed++
		}
	}
	if len(lats) > 0 {
		p90 = time.Duration(monitor.Percentile(lats, 0.9))
	}
	return ok, rejected, failed, p90
}

func (r *recorder) records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]record, len(r.recs))
	copy(out, r.recs)
	sort.SliceStable(out, func(i, j int) bool { return out[i].done < out[j].done })
	return out
}

// stateSample is the proxy's main stage as sampled during a phase.
type stateSample struct {
	t          time.Duration
	setting    float64
	classRates []float64
	quality    float64
	gateOff    bool
}

// periodSample is one control period of one class of the main stage, as
// the proxy measured it (deduplicated by the period's end).
type periodSample struct {
	class int
	end   time.Duration
	stage.Period
}

// phase describes one run of load against a target.
type phase struct {
	// name labels progress lines ("uncontrolled", "seda").
	name string
	// length is the planned length, for progress.
	length time.Duration
	// loads run concurrently; their Target, OnRequest and Progress are
	// set by run.
	loads []loadgen.Config
	// target is the base URL every load is sent to.
	target string
	// proxy, when set, is sampled every sampleEvery (default 250 ms).
	proxy       stageSource
	stageName   string
	sampleEvery time.Duration
	// users, when set, gives the number of users at t for progress lines.
	users func(t time.Duration) float64
	// grace, when positive, cancels the loads at length+grace: requests
	// still in flight then (a backlog left by an uncontrolled run) are
	// aborted instead of waited for. Zero waits (at most the loads'
	// timeouts).
	grace time.Duration
}

// phaseResult is what a phase recorded.
type phaseResult struct {
	recs    []record
	states  []stateSample
	periods []periodSample
	results []*loadgen.Result
	elapsed time.Duration
	// base is when the phase's clock started (recs' times are from it).
	base time.Time
}

// run executes the phase: every load at once, a progress line per second
// and the proxy's state sampled meanwhile.
func (ph *phase) run(ctx context.Context, env *Env) (*phaseResult, error) {
	if env.AdminAddr != "" {
		env.Phasef("%s: %s of load (live: http://%s/ui)", ph.name, ph.length, env.AdminAddr)
	} else {
		env.Phasef("%s: %s of load", ph.name, ph.length)
	}
	rec := &recorder{base: time.Now()}
	res := &phaseResult{results: make([]*loadgen.Result, len(ph.loads)), base: rec.base}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	if ph.proxy != nil {
		every := ph.sampleEvery
		if every <= 0 {
			every = 250 * time.Millisecond
		}
		bg.Add(1)
		go func() {
			defer bg.Done()
			ph.sample(rec.base, every, stop, res)
		}()
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		ph.progress(env, rec, stop)
	}()
	errs := make([]error, len(ph.loads))
	lctx := ctx
	if ph.grace > 0 {
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, ph.length+ph.grace)
		defer cancel()
	}
	var wg sync.WaitGroup
	for i := range ph.loads {
		cfg := ph.loads[i]
		cfg.Target = ph.target
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg.OnRequest = rec.hook(uint8(i), time.Now())
			res.results[i], errs[i] = loadgen.Run(lctx, cfg)
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	res.elapsed = time.Since(rec.base)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: load: %w", ph.name, err)
	}
	res.recs = rec.records()
	if line := failureLine(failureCounts(res.recs)); line != "" {
		env.Logf("%s: no answer: %s", ph.name, line)
	}
	return res, nil
}

// failureLine lists the non-zero counts of n in loadgen.FailureKinds'
// order ("" when there are none).
func failureLine(n map[string]int) string {
	var parts []string
	for _, k := range loadgen.FailureKinds {
		if n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

// sample polls the proxy's stage until stop is closed.
func (ph *phase) sample(base time.Time, every time.Duration, stop <-chan struct{}, res *phaseResult) {
	lastEnd := map[int]time.Time{}
	tick.Every(stop, every, func() {
		st, ok := ph.proxy.stage(ph.stageName, 0)
		if !ok {
			return
		}
		res.states = append(res.states, stateSample{t: time.Since(base), setting: st.Setting,
			classRates: append([]float64(nil), st.ClassRates...), quality: st.Quality, gateOff: st.GateOff})
		for c, cs := range st.Classes {
			if cs.Last == nil || cs.Last.End.IsZero() || cs.Last.End.Equal(lastEnd[c]) {
				continue
			}
			lastEnd[c] = cs.Last.End
			res.periods = append(res.periods, periodSample{class: c, end: cs.Last.End.Sub(base), Period: *cs.Last})
		}
	})
}

// progress prints one line per second until stop is closed.
func (ph *phase) progress(env *Env, rec *recorder, stop <-chan struct{}) {
	tick.Every(stop, time.Second, func() {
		now := time.Since(rec.base)
		ok, rej, failed, p90 := rec.lastSecond(now)
		var b strings.Builder
		fmt.Fprintf(&b, "%-14s %3.0fs/%.0fs", ph.name, now.Seconds(), ph.length.Seconds())
		if ph.users != nil {
			fmt.Fprintf(&b, "  users %4.0f", ph.users(now))
		}
		fmt.Fprintf(&b, "  ok %4d/s  rejected %4d/s  failed %3d/s  p90 %s", ok, rej, failed, fmtMS(p90))
		if ph.proxy != nil {
			if st, found := ph.proxy.stage(ph.stageName, 0); found && st.Controller != "none" {
				unit := " " + st.Unit
				if st.Unit == "probability" || st.Unit == "" {
					unit = ""
				}
				fmt.Fprintf(&b, "  %s %.3g%s", strings.ReplaceAll(st.Kind, "_", " "), st.Setting, unit)
				if st.Quality > 0 && st.Quality < 1 {
					fmt.Fprintf(&b, " quality %.2f", st.Quality)
				}
			}
		}
		env.Logf("%s", b.String())
	})
}

// fmtMS formats a latency for progress lines.
func fmtMS(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

// anyPort is "127.0.0.1:0": every listener of an experiment picks a free
// port on the loopback interface.
const anyPort = "127.0.0.1:0"
