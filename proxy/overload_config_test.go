// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/proxy/overload"
)

// TestKihlAutoTuning drives the auto-tuned kihl controller through an
// explicit timeline: periods below min_utilization or without
// completions do not count; after estimate_periods usable periods σ̂ =
// h·Σcompleted/Σ(ρ·elapsed), pole placement gives K = (2 + a1)·σ̂ and
// Ti = h·(2 + a1)/(1 + a1 + a2), and the new gains take over with the
// integrator where the provisional controller left it (bumpless).
func TestKihlAutoTuning(t *testing.T) {
	base := control.DefaultKihlConfig()
	a1, a2 := overload.DefaultKihlA1, overload.DefaultKihlA2
	tune := control.NewKihlTune("pi", a1, a2, time.Second, 0, 3, 0.2, slog.New(slog.DiscardHandler))
	c, err := (&control.KihlAutoConfig{Base: base, Tune: tune}).New()
	must(t, err)
	ref, err := control.NewKihl(base) // the provisional controller, for comparison
	must(t, err)
	t0 := time.Unix(1000, 0)
	m := func(rho, completed float64) sluice.Measurements {
		return sluice.Measurements{Elapsed: time.Second, Utilization: rho, Completed: completed, Arrivals: 100, Admitted: completed}
	}
	timeline := []sluice.Measurements{
		m(0.1, 10),  // too idle: not used
		m(0.5, 0),   // no completion: not used
		m(0.5, 40),  // used
		m(0.8, 64),  // used
		m(0.25, 20), // used: σ̂ = 124/1.55 = 80
	}
	for i, mm := range timeline[:4] {
		now := t0.Add(time.Duration(i+1) * time.Second)
		got, want := c.Update(now, mm), ref.Update(now, mm)
		if got.New != want.New || strings.Contains(got.Reason, "auto") {
			t.Fatalf("period %d before tuning: %v (%s), want the params' gains: %v", i, got.New, got.Reason, want.New)
		}
	}
	if st := tune.State(); st.PeriodsUsed != 2 || st.Sigma != 0 || st.SigmaFrom != "estimating" {
		t.Fatalf("after 4 periods: %+v", st)
	}
	now := t0.Add(5 * time.Second)
	got := c.Update(now, timeline[4])
	sigma := 124 / 1.55
	k, ti := (2+a1)*sigma, (2+a1)/(1+a1+a2)
	tuned := base
	tuned.K, tuned.Ti, tuned.InitialIntegral = k, time.Duration(ti*float64(time.Second)), ref.Integral()
	want, err := control.NewKihl(tuned)
	must(t, err)
	wd := want.Update(now, timeline[4])
	if math.Abs(got.New-wd.New) > 1e-9 || !strings.HasPrefix(got.Reason, "auto-tuned: σ 80 → K 36, Ti 2.813s") {
		t.Fatalf("tuning period: %v (%s); want %v from K %v, Ti %v with I = %v", got.New, got.Reason, wd.New, k, ti, ref.Integral())
	}
	st := tune.State()
	if math.Abs(st.Sigma-80) > 1e-9 || math.Abs(st.K-36) > 1e-9 || math.Abs(st.Ti-ti) > 1e-9 || !st.StableLinear ||
		!strings.HasPrefix(st.Verdict, "stable") || st.SigmaFrom != "estimated" || st.PeriodsUsed != 3 {
		t.Fatalf("tuning state %+v", st)
	}
	// A controller built later (a stage rebuilt on reload) starts tuned.
	c2, err := (&control.KihlAutoConfig{Base: base, Tune: tune}).New()
	must(t, err)
	d := c2.Update(now.Add(time.Second), m(0.5, 40))
	if !strings.HasPrefix(d.Reason, "auto gains (σ 80): K 36, Ti 2.813s") {
		t.Errorf("rebuilt controller: %s", d.Reason)
	}
}

// TestKihlAutoFixedSigmaInProxy: with a configured σ the gains are placed
// at start, logged, shown in /state and used by the stage.
func TestKihlAutoFixedSigmaInProxy(t *testing.T) {
	b := okBackend(t)
	p := startManual(t, baseConfig(b.URL, `stages:
  - name: pi
    controller: kihl
resources:
  - stage: pi
    resource: cpu
    sensor: {source: pool-busy}
    kihl: {tuning: auto, sigma: 44}
`))
	st := p.state(t)
	if len(st.Resources) != 1 || st.Resources[0].Kihl == nil {
		t.Fatalf("resources state: %+v", st.Resources)
	}
	k := st.Resources[0].Kihl
	if math.Abs(k.K-0.45*44) > 1e-9 || math.Abs(k.Ti-2.8125) > 1e-9 || k.SigmaFrom != "configured" || !k.StableLinear || k.Verdict == "" {
		t.Errorf("kihl state %+v; want K 19.8, Ti 2.8125 s, stable", k)
	}
	get(t, p.url+"/", nil)
	ds := p.srv.h.gen.Load().pol.Step(time.Now().Add(2 * time.Second))
	if len(ds) == 0 || !strings.HasPrefix(ds[0].Reason, "auto gains (σ 44): K 19.8, Ti 2.813s") {
		t.Errorf("decisions %+v", ds)
	}
	if m := p.metricsText(t); !strings.Contains(m, `proxy_kihl_auto{param="K",stage="pi"} 19.`) {
		t.Errorf("/metrics: %s", grepLines(m, "proxy_kihl"))
	}
}

// TestKihlAutoEstimatesSigmaFromPool: σ estimated live from the pool's
// busy time (the pool-busy sensor) and the stage's completions. The
// backend takes ≥ 20 ms per request on 2 slots, so its service rate is at
// most 100/s: σ̂ ≤ 20 per 200 ms period (and well above 0 on any
// machine). The test steps the policy itself.
func TestKihlAutoEstimatesSigmaFromPool(t *testing.T) {
	if testing.Short() {
		t.Skip("live test (≈ 2 s)")
	}
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		_, _ = io.WriteString(w, "ok")
	})
	p := startManual(t, withBackend(`listeners: [{addr: 127.0.0.1:0}]
admin: {addr: 127.0.0.1:0}
drain_timeout: 2s
backends:
  servers: [{url: BACKEND, max_concurrency: 2}]
  queue: {max: 100, timeout: 5s}
stages:
  - name: pi
    controller: kihl
    params: {period: 200ms}
resources:
  - stage: pi
    resource: cpu
    sensor: {source: pool-busy}
    kihl: {tuning: auto, estimate_periods: 5}
`, b.URL))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get(p.url + "/")
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	g := p.srv.h.gen.Load()
	var k control.KihlTuningState
	for i := 0; i < 40; i++ {
		time.Sleep(210 * time.Millisecond)
		g.pol.Step(time.Now())
		if k = *p.state(t).Resources[0].Kihl; k.Sigma > 0 {
			break
		}
	}
	t.Logf("σ̂ %.4g per 200 ms (from %d periods): K %.4g, Ti %.4g s: %s", k.Sigma, k.PeriodsUsed, k.K, k.Ti, k.Verdict)
	if k.SigmaFrom != "estimated" || k.Sigma < 3 || k.Sigma > 21 {
		t.Fatalf("σ̂ %+v; want an estimate in [3, 21] per period", k)
	}
	if math.Abs(k.K-(2+overload.DefaultKihlA1)*k.Sigma) > 1e-9 || !k.StableLinear {
		t.Errorf("gains %+v", k)
	}
}

// TestBandwidthRuleReadsOutgoingQueue: a client that stops reading a
// large reply fills its socket's send queue; the outgoing-queue sensor
// (sampled by its own loop, averaged per period) reads it, and the
// bandwidth rule's voigt-queue lowers the /islarge/ rate.
func TestBandwidthRuleReadsOutgoingQueue(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the outgoing-queue sensor needs Linux")
	}
	big := strings.Repeat("z", 32<<20)
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		_, _ = io.WriteString(w, big)
	})
	p := startProxy(t, baseConfig(b.URL, `stages:
  - name: large
    match: {path_prefix: /islarge/}
    controller: voigt-queue
    params: {period: 200ms, q_ref: 35, kp: 1, initial_rate: 500}
resources:
  - stage: large
    resource: bandwidth
    sensor: {source: outqueue, capacity_bytes: 65536, samples_per_period: 10}
`))
	c, _ := rawConn(t, p.addr)
	_, _ = io.WriteString(c, "GET /islarge/f HTTP/1.1\r\nHost: t\r\n\r\n")
	// Read the status line, then stop reading.
	if line, err := bufio.NewReaderSize(c, 64).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status line %q: %v", line, err)
	}
	var rs ResourceState
	eventually(t, "the rule fed a full outgoing queue", func() bool {
		rs = p.state(t).Resources[0]
		return rs.Input != nil && *rs.Input > 35 && rs.Rate < 500
	})
	t.Logf("bandwidth rule: queue %.4g (normalised), rate %.4g; last decision: %s", *rs.Input, rs.Rate, rs.Decisions[len(rs.Decisions)-1].Reason)
	var sensor SensorState
	for _, s := range p.state(t).Sensors {
		if s.Name == "resources[0].sensor" {
			sensor = s
		}
	}
	if sensor.Source != "outqueue" || sensor.Bytes == nil || *sensor.Bytes <= 0 {
		t.Errorf("sensor state %+v", sensor)
	}
	if m := p.metricsText(t); !strings.Contains(m, `proxy_resource_input{resource="bandwidth",stage="large"}`) ||
		!strings.Contains(m, `proxy_sensor_value{sensor="resources[0].sensor",source="outqueue",unit="queue"}`) {
		t.Errorf("/metrics: %s", grepLines(m, "proxy_resource"))
	}
	c.Close()
}

// bbr reads the top-level utilization sensor when one is configured
// (control.Needs: NeedOptional): its CPU condition uses the reading, and a
// config without a sensor is as before (condition taken as met).
func TestBBRReadsConfiguredUtilization(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sluice-Utilization", "0.3")
		_, _ = io.WriteString(w, "ok")
	})
	for _, tc := range []struct {
		util, want string
	}{
		{"utilization: {source: backend-header}\n", "CPU 0."},
		{"", "no CPU reading"},
	} {
		p := startManual(t, baseConfig(b.URL, tc.util+`stages:
  - {name: api, match: {path_prefix: /}, controller: bbr, params: {period: 100ms}}
`))
		if code, _, _ := get(t, p.url+"/", nil); code != 200 {
			t.Fatalf("request: %d", code)
		}
		st := p.srv.h.gen.Load().pol.Stage("api")
		ds := st.Step(time.Now().Add(time.Second))
		if len(ds) != 1 || !strings.Contains(ds[0].Reason, tc.want) {
			t.Errorf("%q: decisions %+v, want a reason with %q", tc.util, ds, tc.want)
		}
		if u := st.Totals(0).Last.Utilization; (u != nil) != (tc.util != "") || (u != nil && *u != 0.3) {
			t.Errorf("%q: the period's utilization %v", tc.util, u)
		}
	}
}
