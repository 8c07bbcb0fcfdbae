// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
)

// TestSensorSharesReading: a reading asked for less than gap after the
// previous one (or before it) is that reading again; later ones read
// anew, and errors are counted and carry the sensor's name and source.
func TestSensorSharesReading(t *testing.T) {
	n := 0
	s := &Sensor{name: "utilization", source: "host", unit: "utilization", gap: 500 * time.Millisecond,
		desc: func() string { return "test" },
		read: func(time.Time) (reading, error) {
			n++
			if n == 2 {
				return reading{value: math.NaN(), bytes: math.NaN()}, errors.New("no reading")
			}
			return reading{value: float64(n) / 10, bytes: math.NaN()}, nil
		}}
	t0 := time.Unix(1000, 0)
	for _, at := range []time.Duration{0, 400 * time.Millisecond} {
		if u, err := s.Utilization(t0.Add(at)); u != 0.1 || err != nil {
			t.Fatalf("at %v: %v, %v; want the first reading, 0.1", at, u, err)
		}
	}
	_, err := s.Utilization(t0.Add(time.Second))
	if err == nil || !strings.Contains(err.Error(), "utilization (host): no reading") {
		t.Fatalf("a failed reading: %v", err)
	}
	if _, err2 := s.Utilization(t0.Add(900 * time.Millisecond)); err2 == nil {
		t.Fatal("a reading before the last one read anew")
	}
	st := s.State()
	if st.Reads != 2 || st.Errors != 1 || st.Value != nil || st.Error == "" || !st.At.Equal(t0.Add(time.Second)) {
		t.Errorf("state %+v", st)
	}
	if u, err := s.Utilization(t0.Add(2 * time.Second)); u != 0.3 || err != nil {
		t.Errorf("after the gap: %v, %v", u, err)
	}
	if st := s.State(); st.Value == nil || *st.Value != 0.3 || st.Bytes != nil || st.Reads != 3 {
		t.Errorf("state %+v", st)
	}
}

// host is a Host whose readings the test sets.
type host struct {
	pol   atomic.Pointer[policy.Policy]
	queue atomic.Int64
	busy  monitor.UtilizationSource
}

func (h *host) Policy() *policy.Policy              { return h.pol.Load() }
func (h *host) QueueLen() int                       { return int(h.queue.Load()) }
func (h *host) PoolBusy() monitor.UtilizationSource { return h.busy }

type fixedUtil float64

func (u fixedUtil) Utilization(time.Time) (float64, error) { return float64(u), nil }
func (fixedUtil) Describe() string                         { return "fixed" }

// runtimeOf builds the runtime of an overload section and a policy, both
// YAML, over h.
func runtimeOf(t *testing.T, h *host, overload, pol string) (*Runtime, *policy.Config) {
	t.Helper()
	pc, err := policy.Parse("policy.yaml", []byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	var oc Config
	if err := yaml.Unmarshal([]byte(overload), &oc); err != nil {
		t.Fatal(err)
	}
	oc.SetDefaults(pc)
	if err := oc.Validate(pc); err != nil {
		t.Fatal(err)
	}
	rt, err := NewRuntime(&oc, pc, h, slog.New(slog.DiscardHandler), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return rt, pc
}

// TestRuntimeReadsHost: the pool-busy sensor, the policer's queue and CPU
// guard, the rules' states and the metrics read the proxy only through
// Host: the pool's busy time, its wait queue and the policy in force.
func TestRuntimeReadsHost(t *testing.T) {
	h := &host{}
	rt, pc := runtimeOf(t, h, `utilization: {source: pool-busy}
resources: [{stage: api, resource: cpu}]
policer: {rate: 50, control: {q_ref: 100, kp: 1, kd: 0}}
`, "stages: [{name: api, controller: voigt-cpu}]\n")
	if !rt.TracksBusy() {
		t.Error("a pool-busy sensor, but the pools are not told to track their busy time")
	}
	if acc, reg := rt.Listener(); acc == nil || acc != rt.Policer().Policer() || reg == nil {
		t.Errorf("listener: policer %p (runner's %p), registry %v", acc, rt.Policer().Policer(), reg)
	}
	now := time.Now()
	pr := rt.Policer()
	// No pool yet: the guard has no reading and says why.
	pr.Step(now.Add(time.Second))
	if st := pr.State(10); !strings.Contains(st.GuardError, "no backend pool") || st.Guard != "utilization" {
		t.Errorf("without a pool: %+v", st)
	}
	h.busy = fixedUtil(0.5)
	h.queue.Store(5)
	d, ok := pr.Step(now.Add(2 * time.Second))
	// rate = 50 + 1·(100 − 5) = 145, the CPU at 50 % below util_ref.
	if !ok || d.New != 145 {
		t.Errorf("step: %+v, %v; want 145", d, ok)
	}
	st := pr.State(10)
	if st.Last == nil || st.Last.Queue != 5 || st.Last.Utilization == nil || *st.Last.Utilization != 50 || len(st.Decisions) != 2 {
		t.Errorf("policer state %+v (last %+v)", st, st.Last)
	}

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(rt); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(rt, "proxy_resource_rate"); n != 0 {
		t.Errorf("%d rule series before a policy is in force", n)
	}
	pol, err := rt.NewPolicy(*pc, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h.pol.Store(pol)
	rs := rt.ResourceStates(pol, 0)
	if len(rs) != 1 || rs[0].Stage != "api" || rs[0].Sensor != "utilization" || rs[0].Controller != "voigt-cpu" {
		t.Errorf("rules %+v", rs)
	}
	for name, want := range map[string]int{"proxy_resource_rate": 1, "proxy_policer_rate": 1, "proxy_sensor_value": 1, "proxy_policer_queue": 1} {
		if n := testutil.CollectAndCount(rt, name); n != want {
			t.Errorf("%s: %d series, want %d", name, n, want)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("gather: %v", err)
	}
}
