// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/monitor"
)

// TestOverloadConfigErrors: resource rules, sensors and the policer are
// validated with file:line: path errors; a sensor that cannot work here
// fails validation naming the sensor and why.
func TestOverloadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	emptyPidfile := filepath.Join(dir, "empty.pid")
	must(t, os.WriteFile(emptyPidfile, nil, 0o644))
	head := baseConfig("http://127.0.0.1:1", `stages:
  - name: cgi
    match: {path_prefix: /cgi-bin/}
    controller: voigt-cpu
  - name: big
    match: {path_prefix: /islarge/}
    controller: voigt-queue
    params: {q_ref: 35}
  - name: pi
    match: {path_prefix: /pi/}
    controller: kihl
    params: {k: 30}
  - name: plain
    match: {path_prefix: /plain/}
`)
	// head has 21 lines: the next key is on line 22.
	for _, tc := range []struct{ name, cfg, want string }{
		{"cgroup missing", "utilization: {source: cgroup, cgroup: " + dir + "/nope}\n",
			"p.yaml:22: utilization.cgroup: the cgroup CPU sensor is unavailable"},
		{"cgroup_cpus NaN", "utilization: {source: auto, cgroup_cpus: .nan}\n", "p.yaml:22: utilization.cgroup_cpus: NaN is invalid"},
		{"host cpu list not present", "utilization: {source: host, cpus: \"60000\"}\n", "p.yaml:22: utilization.cpus: the host CPU sensor is unavailable"},
		{"bad cpu list", "utilization: {source: host, cpus: \"3-1\"}\n", "p.yaml:22: utilization.cpus"},
		{"no such process", "utilization: {source: process, pid: 999999999}\n", "p.yaml:22: utilization.pid: the process CPU sensor is unavailable"},
		{"pidfile missing", "utilization: {source: process, pidfile: " + dir + "/x.pid}\n", "p.yaml:22: utilization.pidfile: the process CPU sensor is unavailable"},
		{"pidfile empty", "utilization: {source: process, pidfile: " + emptyPidfile + "}\n", "utilization.pidfile: the process CPU sensor is unavailable"},
		{"pid and pidfile", "utilization: {source: process, pid: 1, pidfile: /run/x.pid}\n", "utilization.pid: source: process needs exactly one"},
		{"unknown source", "utilization: {source: gpu}\n", "p.yaml:22: utilization.source: \"gpu\" is invalid"},
		{"field of another source", "utilization: {source: host, header: X-U}\n", "utilization.header: is only used with source: backend-header"},
		{"unknown stage", "resources:\n  - {stage: nope, resource: cpu, sensor: {source: pool-busy}}\n",
			"p.yaml:23: resources[0].stage: \"nope\" is not a configured stage"},
		{"cpu rule on a queue stage", "resources:\n  - {stage: big, resource: cpu, sensor: {source: pool-busy}}\n",
			"resources[0].resource: a cpu rule needs stage \"big\" to use controller kihl or voigt-cpu, not voigt-queue"},
		{"cpu rule without sensor", "resources:\n  - {stage: cgi, resource: cpu}\n", "resources[0].sensor: a cpu rule needs a utilization sensor"},
		{"cpu rule with a queue sensor", "resources:\n  - {stage: cgi, resource: cpu, sensor: {source: outqueue}}\n",
			"resources[0].sensor.source: \"outqueue\" is invalid for a cpu rule"},
		{"bandwidth rule on a cpu stage", "resources:\n  - {stage: cgi, resource: bandwidth, sensor: {source: outqueue, capacity_bytes: 1000}}\n",
			"needs stage \"cgi\" to use controller voigt-queue"},
		{"bandwidth rule without sensor", "resources:\n  - {stage: big, resource: bandwidth}\n", "resources[0].sensor: a bandwidth rule needs a sensor"},
		{"outqueue without capacity", "resources:\n  - stage: big\n    resource: bandwidth\n    sensor: {source: outqueue}\n",
			"p.yaml:25: resources[0].sensor.capacity_bytes: 0 is invalid"},
		{"outqueue sampled too rarely", "resources:\n  - {stage: big, resource: bandwidth, sensor: {source: outqueue, capacity_bytes: 1000, samples_per_period: 5}}\n",
			"resources[0].sensor.samples_per_period: 5 is invalid: must be >= 10"},
		{"outqueue bad mode", "resources:\n  - {stage: big, resource: bandwidth, sensor: {source: outqueue, capacity_bytes: 1000, mode: all}}\n",
			"resources[0].sensor.mode"},
		{"bandwidth without link", "resources:\n  - {stage: big, resource: bandwidth, sensor: {source: bandwidth}}\n",
			"resources[0].sensor.link_capacity: 0 is invalid"},
		{"link capacity in bits", "resources:\n  - {stage: big, resource: bandwidth, sensor: {source: bandwidth, link_capacity: 100Mb}}\n",
			"resources[0].sensor.link_capacity"},
		{"duplicate rule", "resources:\n  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}}\n  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}}\n",
			"p.yaml:24: resources[1].stage: \"cgi\" is already bound by resources[0]"},
		{"kihl auto with k", "resources:\n  - {stage: pi, resource: cpu, sensor: {source: pool-busy}, kihl: {tuning: auto}}\n",
			"resources[0].kihl.tuning: auto picks K and Ti: remove params.k from stage \"pi\""},
		{"kihl tuning on voigt-cpu", "resources:\n  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}, kihl: {tuning: auto}}\n",
			"resources[0].kihl: is only for a stage with controller kihl"},
		{"kihl bad tuning", "resources:\n  - {stage: pi, resource: cpu, sensor: {source: pool-busy}, kihl: {tuning: magic}}\n",
			"resources[0].kihl.tuning: \"magic\" is invalid"},
		{"kihl params with a1", "resources:\n  - {stage: pi, resource: cpu, sensor: {source: pool-busy}, kihl: {a1: -1}}\n",
			"only used with tuning: auto"},
		{"policer bad burst", "policer: {burst: -1}\n", "p.yaml:22: policer.burst: -1 is invalid"},
		{"policer bad controller", "policer: {controller: pid}\n", "policer.controller: \"pid\" is invalid"},
		{"policer bad kernel", "policer: {kernel: yes}\n", "policer.kernel: \"yes\" is invalid: must be auto, on or off"},
		{"policer inf rate with control", "policer: {rate: .inf}\n", "policer.rate: +Inf needs controller: none"},
		{"policer rate out of bounds", "policer: {rate: 5, control: {min_rate: 10}}\n", "policer.rate: 5 is invalid: must be within [min_rate, max_rate]"},
		{"policer bad q_ref", "policer: {control: {q_ref: -3}}\n", "policer.control.q_ref: -3 is invalid"},
		{"policer bad source prefix", "policer:\n  sources: {rules: [{prefix: 10.0.0.1/8, rate: 1, burst: 1}]}\n", "policer.sources.rules[0].prefix"},
		{"policer unknown key", "policer: {rates: 1}\n", "p.yaml:22: policer.rates: unknown field"},
	} {
		_, err := Parse("p.yaml", []byte(head+tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v\nwant %q", tc.name, err, tc.want)
		}
	}
}

// TestOverloadConfigDefaults: the defaults of a policer and of kihl auto
// tuning, and a config that binds every kind of rule validates and builds.
func TestOverloadConfigDefaults(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte(baseConfig("http://127.0.0.1:1", `utilization: {source: pool-busy}
stages:
  - name: pi
    controller: kihl
    params: {rho_ref: 0.7}
  - name: big
    controller: voigt-queue
    params: {q_ref: 35}
resources:
  - {stage: pi, resource: cpu, kihl: {tuning: auto}}
  - {stage: big, resource: bandwidth, sensor: {source: bandwidth, link_capacity: 12.5MB}}
policer: {}
`)))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policer
	if p.Rate != 1000 || p.Burst != 20 || p.Controller != "voigt-queue" || p.Control.QRef != 100 || p.Control.Kp != 1.0/16 ||
		p.Control.Kd != 0.25 || p.Control.MinRate != 10 || p.Control.UtilRef != 70 || p.Control.Period != time.Second {
		t.Errorf("policer defaults: %+v control %+v (util_ref must default to the kihl rule's 100·rho_ref = 70)", p, p.Control)
	}
	k := cfg.Resources[0].Kihl
	if *k.A1 != DefaultKihlA1 || *k.A2 != DefaultKihlA2 || k.EstimatePeriods != 5 || k.MinUtilization != 0.2 {
		t.Errorf("kihl defaults: %+v", k)
	}
	if s := cfg.Resources[1].Sensor; s.Scale != 100 || float64(s.LinkCapacity) != 12.5e6 {
		t.Errorf("bandwidth sensor: %+v", s)
	}
	must(t, Check(cfg))
}

// TestKihlAutoTuning drives the auto-tuned kihl controller through an
// explicit timeline: periods below min_utilization or without
// completions do not count; after estimate_periods usable periods σ̂ =
// h·Σcompleted/Σ(ρ·elapsed), pole placement gives K = (2 + a1)·σ̂ and
// Ti = h·(2 + a1)/(1 + a1 + a2), and the new gains take over with the
// integrator where the provisional controller left it (bumpless).
func TestKihlAutoTuning(t *testing.T) {
	base := control.DefaultKihlConfig()
	a1, a2 := DefaultKihlA1, DefaultKihlA2
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
	b := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
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
	if math.Abs(k.K-(2+DefaultKihlA1)*k.Sigma) > 1e-9 || !k.StableLinear {
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

// TestCgroupSourceOfThisProcess: source cgroup without a directory reads
// the group this process runs in (v2 or v1, found from /proc/self/cgroup),
// with cgroup_cpus as its capacity; auto reads it only when it is
// CPU-limited, else the host's /proc/stat.
func TestCgroupSourceOfThisProcess(t *testing.T) {
	p, err := monitor.DetectCgroup(monitor.DefaultCgroupRoot, "/proc/self/cgroup")
	if err != nil {
		t.Skipf("no cgroup here: %v", err)
	}
	now := time.Now()
	src, err := newCgroupSource(&UtilizationConfig{Source: UtilizationCgroup, CgroupCPUs: 1.5}, now)
	if err != nil {
		t.Fatal(err)
	}
	cg, ok := src.(*monitor.Cgroup)
	if !ok || cg.Paths() != p {
		t.Fatalf("source cgroup = %#v, want the group at %+v", src, p)
	}
	if c, err := cg.Capacity(); err != nil || c != 1.5 {
		t.Errorf("cgroup_cpus 1.5: Capacity() = %v, %v", c, err)
	}
	limited, err := cg.Limited()
	if err != nil {
		t.Fatal(err)
	}
	auto, err := newCgroupSource(&UtilizationConfig{Source: UtilizationAuto}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, isCgroup := auto.(*monitor.Cgroup)
	if isCgroup != limited {
		t.Errorf("auto chose %q; this process's group (%v) is limited: %v", auto.Describe(), p, limited)
	}
	if !limited && !strings.Contains(auto.Describe(), "/proc/stat") {
		t.Errorf("auto on an unlimited group: %q, want the host's /proc/stat", auto.Describe())
	}
	t.Logf("cgroup: %s; auto: %s", cg.Describe(), auto.Describe())
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
