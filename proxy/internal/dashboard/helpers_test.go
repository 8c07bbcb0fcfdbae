// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/proxy/internal/proxytest"
	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// testTimeout bounds every wait of these tests.
const testTimeout = 20 * time.Second

var client = &http.Client{Timeout: testTimeout}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fakeView is a View whose state the test sets and steps: a typed
// stand-in for the proxy, as the sampler and the metrics read it. It
// gives the last n decisions of each stage and of the policer, as the
// proxy does, and never changes a value it returned.
type fakeView struct {
	mu    sync.Mutex
	st    State
	asked []int // the decisions asked, per call
}

var _ View = (*fakeView)(nil)

func (v *fakeView) State(n int) State {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked = append(v.asked, n)
	st := v.st
	st.Stages = slices.Clone(st.Stages)
	for i := range st.Stages {
		ds := st.Stages[i].Decisions
		st.Stages[i].Decisions = slices.Clone(ds[max(len(ds)-n, 0):])
	}
	if p := st.Policer; p != nil {
		cp := *p
		cp.Decisions = slices.Clone(p.Decisions[max(len(p.Decisions)-n, 0):])
		st.Policer = &cp
	}
	return st
}

// set replaces the state.
func (v *fakeView) set(st State) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.st = st
}

// step is a control period ending at now, with fresh values: every
// class's period ends at now after 10 more requests offered and
// completed, every stage and the policer decide once, the pool serves
// 10 more and the policer sees 10 more connections.
func (v *fakeView) step(now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.st
	st.Stages = slices.Clone(st.Stages)
	for i := range st.Stages {
		s := &st.Stages[i]
		s.Classes = slices.Clone(s.Classes)
		for j := range s.Classes {
			c := &s.Classes[j]
			c.Offered += 10
			c.Admitted += 10
			c.Completed += 10
			if c.Last != nil {
				l := *c.Last
				l.End, l.Elapsed = now, time.Second
				c.Last = &l
			}
		}
		s.Decisions = append(slices.Clone(s.Decisions), stage.DecisionState{At: now, Old: s.Setting, New: s.Setting,
			Reason: fmt.Sprintf("%s at %d", s.Name, now.UnixMilli())})
	}
	st.Pool.Servers = slices.Clone(st.Pool.Servers)
	for i := range st.Pool.Servers {
		st.Pool.Servers[i].Served += 10
	}
	if p := st.Policer; p != nil {
		cp := *p
		cp.Offered += 10
		cp.Admitted += 10
		cp.Decisions = append(slices.Clone(p.Decisions), stage.DecisionState{At: now, Reason: fmt.Sprintf("policer at %d", now.UnixMilli())})
		st.Policer = &cp
	}
	v.st = st
}

func ptr(x float64) *float64 { return &x }

// everySection is a state with every section and every field set: two
// stages (one with a concurrency limit and estimates, one with a target
// and two classes), the pool, the policer, two resource rules (one
// without a reading), a sensor and client shares.
func everySection(now time.Time) State {
	period := func(off float64) *stage.Period {
		return &stage.Period{End: now, Elapsed: time.Second, Offered: off, Admitted: off - 1, Rejected: 1, Completed: off - 2,
			Samples: int(off) - 2, MeanMS: 4.5, P50MS: 4, P90MS: 9, P99MS: 20, Utilization: ptr(0.42), Queue: 3,
			SensorError: "", ThroughputPS: off - 2}
	}
	class := func(name string, off uint64) stage.ClassState {
		return stage.ClassState{Name: name, ClassTotals: stage.ClassTotals{Offered: off, Admitted: off - 10, Rejected: 10, ShadowRejected: 1,
			Completed: off - 12, Errors: 2}, Last: period(float64(off) / 10)}
	}
	return State{ConfigVersion: 3, Shadow: true, InFlight: 5, Streams: 1, Token: true,
		Stages: []Stage{
			{State: stage.State{Name: "cgi", Controller: "auto", Kind: "concurrency", Unit: "requests", Setting: 16,
				ClassRates: []float64{16}, Quality: 1, GateOff: false, Shadow: true, Target: "500ms",
				InFlightLimited: &stage.LimiterState{Limit: 16, InFlight: 3, Queued: 1, MaxWait: "250ms", MaxWaitSeconds: 0.25, Drain: 12.5},
				Estimates:       map[string]float64{"limit": 16, "service_mean_s": 0.004},
				Classes:         []stage.ClassState{class("default", 100)},
				Decisions:       []stage.DecisionState{{At: now.Add(-time.Second), Old: 15, New: 16, Acted: true, Reason: "cgi up"}}},
				Objective: "target", Floor: ptr(1)},
			{State: stage.State{Name: "web", Controller: "seda", Kind: "rate", Unit: "req/s", Setting: 5000, Quality: 0.8,
				GateOff: true, Target: "100ms", Classes: []stage.ClassState{class("gold", 200), class("bronze", 300)}},
				Objective: "p90", Floor: ptr(0.05)},
		},
		Pool: Pool{Capacity: 8, InFlight: 3, Queue: 2, QueueMax: 1024, QueueTimeout: "1s", Rejected: 4, Waited: 7, WaitNS: 7e6,
			Servers: []Backend{{URL: "http://127.0.0.1:1", InFlight: 2, Limit: 4, Served: 100}, {URL: "http://127.0.0.1:2", InFlight: 1, Limit: 4, Served: 50}}},
		Policer: &Policer{Controller: "voigt-queue", Rate: 1000, Burst: 100, Offered: 50, Admitted: 45, Rejected: 5, LiveConns: 4,
			Last:       &PolicerPeriod{Elapsed: time.Second, HitsPerSec: 50, Admitted: 45, Rejected: 5, Queue: 2, Utilization: ptr(37.5)},
			GuardError: "cpu guard: no reading",
			Decisions:  []stage.DecisionState{{At: now.Add(-time.Second), Old: 900, New: 1000, Acted: true, Reason: "policer up"}}},
		Resources: []Resource{
			{Stage: "cgi", Resource: "cpu", Sensor: "resources[0].sensor", Rate: 100, HitsPerSec: 10, Rejected: 3, Input: ptr(0.5)},
			{Stage: "web", Resource: "bandwidth", Sensor: "resources[1].sensor", Rate: 200, HitsPerSec: 20, Rejected: 1, SensorError: "no reading"},
		},
		Sensors: []Sensor{{Name: "resources[0].sensor", Source: "pool-busy", Description: "backend pool: busy time of 8 servers",
			Unit: "utilization", Value: ptr(0.5), Bytes: ptr(1234), At: now, Error: "stale", Reads: 10, Errors: 1}},
		Shares: &share.Snapshot{TotalBandwidth: 1e8, MaxMeasured: 1e8, Utilized: 5e6, Unsatisfied: true, Ticks: 3, LastTick: now,
			Clients: []share.ClientSnapshot{{Name: "local", Share: 50, Allocation: 5e7}, {Name: "others", Share: 50, Allocation: 5e7}}},
	}
}

// running is a dashboard served over HTTP as the proxy serves it, with
// its metrics.
type running struct {
	d   *Dashboard
	url string
}

// serve serves a dashboard of v at /ui and /ui/events, and its metrics
// at /metrics.
func serve(t *testing.T, v View, opts Options) *running {
	t.Helper()
	d := New(v, opts)
	reg := prometheus.NewRegistry()
	must(t, d.Register(reg))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", d.ServePage)
	mux.HandleFunc("GET /ui/events", d.ServeEvents)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return &running{d: d, url: s.URL}
}

// get returns the body of a GET of url.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(b)
}

// sseEvent is one event of /ui/events.
type sseEvent struct {
	id   string
	data Sample
}

// openEvents opens /ui/events with the given headers and returns a reader
// of its events.
func openEvents(t *testing.T, url string, hdr map[string]string) (*http.Response, func() (sseEvent, error)) {
	t.Helper()
	resp := proxytest.Send(t, client, http.MethodGet, url, nil, hdr)
	er := NewEventReader(resp.Body)
	next := func() (sseEvent, error) {
		id, smp, err := er.Next()
		return sseEvent{id: id, data: smp}, err
	}
	return resp, next
}
