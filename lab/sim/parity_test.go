// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/policy"
)

// The parity suite: one seeded request trace goes through a stage.Stage
// twice, once in the simulator's virtual time (sim.Stage, the way every
// scenario runs) and once live through the HTTP middleware and the
// policy's runner under testing/synctest, and the two must take the same
// decisions: at the same offsets from the start, from the same
// measurements, to the same settings, for the same reasons. The stage is
// built from the same policy configuration both times, so this is the
// architecture's promise that the simulator runs the proxy's objects, not
// a copy of them. Like uber-go/ratelimit's suite, it runs over every kind
// of controller: a sample-triggered one polled every stage.MaxPoll (SEDA,
// two classes), periodic rate and drop controllers, and concurrency limits
// with a class-priority wait queue, queue timeouts and slots handed from
// one request to the next.

// traceReq is one request of the trace: when it arrives (offset from the
// start), how long the handler works on it once admitted, and its class.
type traceReq struct {
	at, service time.Duration
	gold        bool
}

// parityTrace draws n requests: Poisson arrivals at rate req/s with a
// nanosecond-resolution offset (so that no two events and no control tick
// share an instant, where the order of goroutines would be arbitrary),
// exponential service of the given mean, one in five of the gold class.
func parityTrace(seed uint64, n int, rate float64, service time.Duration) []traceReq {
	r := rand.New(rand.NewPCG(seed, 0x9a417))
	out := make([]traceReq, n)
	t := 0.0
	for i := range out {
		t += r.ExpFloat64() / rate
		out[i] = traceReq{at: time.Duration(t*1e9) + 7, service: time.Duration(r.ExpFloat64()*float64(service)) + 1,
			gold: r.IntN(5) == 0}
	}
	return out
}

const parityClasses = `
classes:
  order: [gold, bronze]
  rules: [{class: gold, header: {name: X-Tier, value: gold, trust: any}}]
`

func parityPolicy(t *testing.T, stageYAML string, now time.Time) *policy.Policy {
	t.Helper()
	var c policy.Config
	dec := yaml.NewDecoder(strings.NewReader(parityClasses + "stages: [" + stageYAML + "]\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	p, err := policy.New(c, policy.Options{Now: now, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fmtDecision writes a decision with its time as an offset from start and
// every field that says what the controller saw and did.
func fmtDecision(d sluice.Decision, start time.Time) string {
	in := d.Inputs
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return fmt.Sprintf("%v class %d %s→%s rates %v q %s off %v acted %v wait %v drain %s | in: el %v arr %s adm %s rej %s done %s fail %s n %s mean %s p90 %s util %s queue %s inflight %s/%s svc %s/%s/%s wait %s exp %s | %s",
		d.At.Sub(start), d.Class, f(d.Old), f(d.New), d.ClassRates, f(d.Quality), d.GateOff, d.Acted, d.MaxWait, f(d.Drain),
		in.Elapsed, f(in.Arrivals), f(in.Admitted), f(in.Rejected), f(in.Completed), f(in.Failed), f(in.Samples),
		f(in.MeanRT), f(in.P90RT), f(in.Utilization), f(in.Queue), f(in.InFlight), f(in.MaxInFlight),
		f(in.ServiceSamples), f(in.ServiceP90), f(in.ServiceMin), f(in.QueueWaitMean), f(in.Expired), d.Reason)
}

// liveDecisions runs the trace through the middleware in a synctest
// bubble, in front of a handler with the given number of workers (0: as
// many as there are requests), and returns the stage's decisions, the
// offset at which the last request ended, and the status codes.
func liveDecisions(t *testing.T, stageYAML string, trace []traceReq, workers int) (ds []string, end time.Duration, codes map[int]int) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := parityPolicy(t, stageYAML, start)
		ctx, cancel := context.WithCancel(t.Context())
		var run sync.WaitGroup
		run.Add(1)
		go func() {
			defer run.Done()
			p.Run(ctx)
		}()
		if workers == 0 {
			workers = len(trace)
		}
		// A worker pool whose waiting requests are served in arrival
		// order (blocked channel senders are woken first in, first out).
		// Requests the stage lets in at one instant (waiters granted
		// together when the limit rises) wake in an order the runtime
		// chooses; request i first waits i ns, in both drivers, so that
		// they reach the pool one after the other by trace order.
		pool := make(chan struct{}, workers)
		h := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			i, _ := strconv.Atoi(r.Header.Get("X-Trace"))
			time.Sleep(time.Duration(i))
			pool <- struct{}{}
			time.Sleep(trace[i].service)
			<-pool
		}))
		var mu sync.Mutex
		codes = map[int]int{}
		var wg sync.WaitGroup
		for i, q := range trace {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(q.at)
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("X-Trace", strconv.Itoa(i))
				if q.gold {
					req.Header.Set("X-Tier", "gold")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				mu.Lock()
				codes[rec.Code]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		end = time.Since(start)
		cancel()
		run.Wait()
		for _, d := range p.Stage("api").Controller().History.Last(1000) {
			ds = append(ds, fmtDecision(d, start))
		}
	})
	return ds, end, codes
}

// simDecisions runs the trace through a stage built from the same
// configuration, driven by sim.Stage until the offset end, in front of
// the same worker pool (a FIFO of workers held for each request's
// service), and returns its decisions and status codes (200 served, 503
// rejected).
func simDecisions(t *testing.T, stageYAML string, trace []traceReq, workers int, end time.Duration) (ds []string, codes map[int]int) {
	e := sim.New(1)
	p := parityPolicy(t, stageYAML, e.Time())
	st := p.Stage("api")
	if workers == 0 {
		workers = len(trace)
	}
	pool, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: workers})
	if err != nil {
		t.Fatal(err)
	}
	work := &sim.Delay{Engine: e, Fn: func(_ time.Time, r *sim.Request) (time.Duration, bool) { return time.Duration(r.ID), true },
		Next: &sim.Hold{Engine: e, Queue: pool, Next: &sim.Delay{Engine: e, Fn: func(_ time.Time, r *sim.Request) (time.Duration, bool) {
			return trace[r.ID].service, true
		}}}}
	entry, err := sim.NewStage(e, st, work, nil)
	if err != nil {
		t.Fatal(err)
	}
	codes = map[int]int{}
	for i, q := range trace {
		class := 1
		if q.gold {
			class = 0
		}
		e.Schedule(q.at, func() {
			r := &sim.Request{ID: uint64(i), Class: class, Sent: e.Now(), OnFinish: func(r *sim.Request) {
				if r.Outcome == sim.Completed {
					codes[200]++
				} else {
					codes[503]++
				}
			}}
			entry.Handle(r)
		})
	}
	e.Run(end)
	for _, d := range st.Controller().History.Last(1000) {
		ds = append(ds, fmtDecision(d, sim.DefaultBase))
	}
	return ds, codes
}

func TestParitySimulatorAndMiddleware(t *testing.T) {
	for _, tc := range []struct {
		name, stage string
		rate        float64
		service     time.Duration
		workers     int
	}{
		// 2× overload of a 20 ms single-file service for SEDA's p90 (nreq
		// 20, so the controller runs on samples and on its timeout).
		{"seda two classes", `{name: api, controller: seda, params: {target: 50ms, nreq: 20, initial_rate: 100}}`, 100, 20 * time.Millisecond, 0},
		{"static-rate", `{name: api, controller: static-rate, params: {rate: 40}}`, 80, 10 * time.Millisecond, 0},
		{"yaksha, a seeded dropper", `{name: api, controller: yaksha, params: {tref: 30ms, period: 250ms}}`, 60, 20 * time.Millisecond, 1},
		{"static-concurrency with a queue", `{name: api, controller: static-concurrency, params: {limit: 2}, queue: {max: 8, timeout: 30ms}}`, 150, 15 * time.Millisecond, 0},
		// Concurrency controllers in front of 4 workers of 10 ms at 2× and
		// 3× their 400 req/s.
		{"auto", `{name: api, controller: auto, params: {slo: 100ms}}`, 800, 10 * time.Millisecond, 4},
		{"gradient2", `{name: api, controller: gradient2}`, 1200, 10 * time.Millisecond, 4},
		{"bbr", `{name: api, controller: bbr}`, 1200, 10 * time.Millisecond, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trace := parityTrace(3, int(3*tc.rate), tc.rate, tc.service) // 3 s
			live, end, liveCodes := liveDecisions(t, tc.stage, trace, tc.workers)
			virtual, simCodes := simDecisions(t, tc.stage, trace, tc.workers, end)
			if len(live) < 3 || len(live) >= 1000 {
				t.Fatalf("%d live decisions: the trace must give a few and fewer than the history holds", len(live))
			}
			t.Logf("%d decisions, answers %v", len(live), liveCodes)
			if len(live) != len(virtual) {
				t.Errorf("%d live decisions, %d in virtual time", len(live), len(virtual))
			}
			for i := range min(len(live), len(virtual)) {
				if live[i] != virtual[i] {
					t.Fatalf("decision %d differs:\nlive:    %s\nvirtual: %s", i, live[i], virtual[i])
				}
			}
			if liveCodes[200] != simCodes[200] || liveCodes[503] != simCodes[503] || liveCodes[200]+liveCodes[503] != len(trace) {
				t.Errorf("answers: live %v, virtual %v (of %d)", liveCodes, simCodes, len(trace))
			}
			if math.Min(float64(liveCodes[503]), float64(liveCodes[200])) == 0 {
				t.Errorf("answers %v: the trace should both admit and reject", liveCodes)
			}
		})
	}
}
