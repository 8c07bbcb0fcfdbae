// SPDX-License-Identifier: Apache-2.0

package live

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/figure/simulated"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/settle"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/proxy/overload"
	"github.com/sluicehq/sluice/share"
)

func TestRegistry(t *testing.T) {
	want := []string{"kihl-step", "kihl-distribution", "yaksha-load-sweep", "yaksha-workload-shift", "seda-spike", "seda-classes",
		"seda-degradation", "voigt-sweep", "voigt-step", "voigt-bandwidth", "lijamin-epochs", "adaptive", "graph", "graph-crowd", "graph-recover", "graph-hotel", "tenants", "costly", "cluster", "peers"}
	got := Names()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	// Every figure with a live driver has one registered here, and only
	// those.
	if len(registry) != len(want) {
		t.Errorf("%d drivers registered for %d figures with a live driver", len(registry), len(want))
	}
	sims := map[string]bool{}
	for _, n := range simulated.Names() {
		sims[n] = true
	}
	live := map[string]bool{}
	for _, e := range All() {
		live[e.Name] = true
		if e.Run == nil || e.Description == "" || e.Paper == "" {
			t.Errorf("%s: incomplete definition", e.Name)
		}
		// Every paper experiment has a virtual-time twin; "peers" compares
		// sluice with nginx and HAProxy, which only exist live, and
		// "cluster" needs several processes and Redis (its core is tested
		// in virtual time in package cluster).
		if !sims[e.Name] && e.Name != "peers" && e.Name != "cluster" {
			t.Errorf("%s has no simulator scenario of the same name", e.Name)
		}
	}
	for n := range sims {
		if !live[n] {
			t.Errorf("simulator scenario %s has no live experiment of the same name", n)
		}
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "seda-spike") {
		t.Errorf("Lookup(nope) = %v, want an error listing the names", err)
	}
}

// TestPoliciesValidate checks that every proxy configuration the
// experiments and the demo build is accepted by the proxy, both as the
// typed value they serve and as the YAML file it marshals to (what GET
// /config prints): Parse decodes strictly, so a field the typed value
// sets under a wrong name fails here.
func TestPoliciesValidate(t *testing.T) {
	sp := sedaLiveParams(figure.SEDASpikeStage)
	dp := sedaLiveParams(figure.SEDADegradationStage)
	yp := yakshaLiveParams()
	kp := kihlLiveParams()
	header := overload.UtilizationConfig{Source: overload.UtilizationBackendHeader}
	host := overload.UtilizationConfig{Source: overload.UtilizationHost, CPUs: "0"}
	cases := map[string]struct {
		pol    policy.Config
		util   overload.UtilizationConfig
		shares *share.Config
	}{
		"none":           {pol: nonePolicy()},
		"seda":           {pol: sedaPolicy(sp)},
		"classes":        {pol: classPolicy(sp, true)},
		"classes-nodiff": {pol: classPolicy(sp, false)},
		"degrade":        {pol: degradePolicy(dp, false)},
		"degrade-adm":    {pol: degradePolicy(dp, true)},
		"yaksha-self":    {pol: yakshaPolicy(yp, 0)},
		"yaksha-static":  {pol: yakshaPolicy(yp, 470)},
		"kihl-header":    {pol: kihlPolicy(kp, kp.Ti), util: header},
		"kihl-bad-ti":    {pol: kihlPolicy(kp, kp.CompareTi), util: header},
		"kihl-host-cpu":  {pol: kihlPolicy(kp, kp.Ti), util: host},
		"demo-none":      {pol: demoPolicy("uncontrolled", 0)},
		"demo-seda":      {pol: demoPolicy("seda", 150)},
		"demo-yaksha":    {pol: demoPolicy("yaksha", 150)},
		"demo-auto":      {pol: demoPolicy("auto", 150)},
		"peers-seda":     {pol: peersSEDAPolicy(391)},
		"peers-yaksha":   {pol: peersYakshaPolicy()},
		"lijamin":        {pol: lijaminPolicy(), shares: lijaminSharesConfig()},
		"tenants-fair":   {pol: tenantsPolicy(true)},
		"tenants-fifo":   {pol: tenantsPolicy(false)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := proxyConfig("http://127.0.0.1:1", 4, tc.pol, "")
			cfg.Utilization, cfg.Shares = tc.util, tc.shares
			text, err := yaml.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := proxy.Parse(name+".yaml", text)
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if len(parsed.Stages) != 1 || parsed.Stages[0].Name != mainStage {
				t.Errorf("stages = %+v, want one named %s", parsed.Stages, mainStage)
			}
			cfg.SetDefaults()
			if err := cfg.Validate(); err != nil {
				t.Errorf("typed value: %v", err)
			}
		})
	}
}

func rec(intended, done, lat time.Duration, out outcome) record {
	return record{intended: intended, done: done, lat: lat, out: out}
}

func TestAnalysis(t *testing.T) {
	s := time.Second
	recs := []record{
		rec(100*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond, outOK),
		rec(300*time.Millisecond, 1200*time.Millisecond, 900*time.Millisecond, outOK),
		rec(500*time.Millisecond, 500*time.Millisecond, 0, outRejected),
		rec(1100*time.Millisecond, 1100*time.Millisecond, 0, outRejected),
		rec(1500*time.Millisecond, 3500*time.Millisecond, 2*s, outTimeout),
		rec(1600*time.Millisecond, 1700*time.Millisecond, 100*time.Millisecond, outError),
		rec(1800*time.Millisecond, 2500*time.Millisecond, 700*time.Millisecond, outAborted),
	}
	c := countSent(recs, 0, 2*s, nil)
	if c != (counts{offered: 6, ok: 2, rejected: 2, timeouts: 1, errors: 1}) {
		t.Errorf("countSent = %+v", c)
	}
	if f := c.rejectFraction(); math.Abs(f-2.0/6) > 1e-12 {
		t.Errorf("reject fraction %v", f)
	}
	if lat := okLatencies(recs, 0, s, nil); len(lat) != 1 || lat[0] != 100 {
		t.Errorf("okLatencies [0,1s) = %v, want [100]", lat)
	}
	if n := goodWithin(recs, 0, 2*s, 500*time.Millisecond, nil); n != 1 {
		t.Errorf("goodWithin = %d, want 1", n)
	}
	bins := binRecords(recs, s, 2*s, 500*time.Millisecond, nil)
	if len(bins) != 2 {
		t.Fatalf("%d bins", len(bins))
	}
	if b := bins[0]; b.offered != 3 || b.ok != 1 || b.rejected != 1 || b.good != 1 || b.p90 != 100 {
		t.Errorf("bin 0 = %+v", b)
	}
	if b := bins[1]; b.offered != 3 || b.ok != 1 || b.rejected != 1 || b.errors != 1 || b.timeouts != 0 || b.good != 0 || b.p90 != 900 {
		t.Errorf("bin 1 = %+v", b)
	}
	if r := bins[1].rejectedShare(); math.Abs(r-1.0/3) > 1e-12 {
		t.Errorf("rejected share %v", r)
	}
	if !math.IsNaN(ratio(1, 0)) {
		t.Error("ratio(1, 0) is not NaN")
	}
}

func TestKihlWorkKeepsMean(t *testing.T) {
	for _, svc := range []string{"exp", "det"} {
		ws := kihlWork(svc, 10*time.Millisecond+time.Millisecond, time.Millisecond, 4)
		sum := 0.0
		for _, w := range ws {
			sum += float64(w.N)
		}
		mean := sum / float64(len(ws)) * 4 / 1e9 // seconds
		if math.Abs(mean-0.010)/0.010 > 1e-3 {
			t.Errorf("%s: mean work %.6fs, want 0.010s", svc, mean)
		}
		if svc == "exp" && (len(ws) != kihlExpQuantiles || ws[0].N >= ws[len(ws)-1].N) {
			t.Errorf("exp levels %v", ws)
		}
	}
}

func TestKihlCV2(t *testing.T) {
	if got := kihlCV2(kihlWork("det", 11*time.Millisecond, time.Millisecond, 4), time.Millisecond, 4); got != 0 {
		t.Errorf("det cv2 = %v, want 0", got)
	}
	// The exponential's midpoint quantiles approach cv2 = 1 (less the
	// tail the levels cut); a fixed overhead of a tenth of the mean
	// lowers it by about (0.9)².
	noOverhead := kihlCV2(kihlWork("exp", 10*time.Millisecond, 0, 4), 0, 4)
	withOverhead := kihlCV2(kihlWork("exp", 10*time.Millisecond, time.Millisecond, 4), time.Millisecond, 4)
	if noOverhead < 0.6 || noOverhead > 1 {
		t.Errorf("exp cv2 = %v, want in [0.6, 1]", noOverhead)
	}
	if r := withOverhead / noOverhead; math.Abs(r-0.81) > 0.02 {
		t.Errorf("overhead scales cv2 by %v, want 0.81", r)
	}
}

func TestSchedules(t *testing.T) {
	pairs := rampIn(2*time.Second, 80, time.Second, 4)
	sched, err := stepSchedule(pairs...)
	if err != nil {
		t.Fatal(err)
	}
	for at, want := range map[time.Duration]float64{0: 0, 2 * time.Second: 20, 2100 * time.Millisecond: 20, 2500 * time.Millisecond: 60, 2900 * time.Millisecond: 80, time.Hour: 80} {
		if got := sched.At(at); got != want {
			t.Errorf("ramp at %v = %v, want %v", at, got, want)
		}
	}
	for _, nav := range shiftNav {
		if _, err := loadgen.ParseMarkov(nav.name, []byte(navYAML(nav.p))); err != nil {
			t.Errorf("navigation %s: %v\n%s", nav.name, err, navYAML(nav.p))
		}
	}
}

func TestSettlingOnBins(t *testing.T) {
	// Mean RT per 1 s bin in ms: off the band for 3 bins after the wave
	// starts, then back at Tref; binPoints hands package settle seconds
	// weighted by the OK responses.
	var bins []bin
	for i, ms := range []float64{100, 100, 400, 400, 400, 100, 100, 100, 100, 100} {
		bins = append(bins, bin{t: float64(i), ok: 10, mean: ms})
	}
	ps := binPoints(bins, time.Second)
	if got := settle.Return(ps, 0, 10*time.Second, 0.1, 0.25, 0); got != 6 {
		t.Errorf("settle.Return = %v, want 6", got)
	}
	if ps[3].Start != 3*time.Second || ps[3].End != 4*time.Second || ps[3].Value != 0.4 || ps[3].Weight != 10 {
		t.Errorf("bin 3 as a point: %+v", ps[3])
	}
}

// TestKihlLiveIsTheSpecScaled: the live Kihl parameters are the figure's
// (declared once, in package figure) compressed by kihlTimeScale, so that
// σ = μh and K are the paper's.
func TestKihlLiveIsTheSpecScaled(t *testing.T) {
	kp, spec := kihlLiveParams(), figure.DefaultKihl(60*time.Second)
	if kp.H != 500*time.Millisecond || kp.ServiceTime != 11250*time.Microsecond || kp.Rate != 200 || kp.Ti != 1400*time.Millisecond ||
		kp.CompareTi != 50*time.Millisecond || kp.MeasureFrom != 5*time.Second || kp.Duration != 30*time.Second {
		t.Errorf("live parameters %+v", kp.KihlParams)
	}
	sigma := func(c figure.KihlParams) float64 { return c.H.Seconds() / c.ServiceTime.Seconds() }
	if sigma(kp.KihlParams) != sigma(spec) || kp.K != spec.K || kp.RhoRef != spec.RhoRef {
		t.Errorf("σ %v vs the paper's %v, K %v vs %v", sigma(kp.KihlParams), sigma(spec), kp.K, spec.K)
	}
}

// TestSEDALiveIsTheSpecScaled: the live SEDA stages are the figures'
// (declared once, in package figure) compressed by sedaTimeScale.
func TestSEDALiveIsTheSpecScaled(t *testing.T) {
	for _, tc := range []struct {
		d                             figure.SEDADefaults
		service, target, think, retry time.Duration
	}{
		{figure.SEDASpikeStage, 5 * time.Millisecond, 250 * time.Millisecond, 5 * time.Millisecond, 1250 * time.Millisecond},
		{figure.SEDAClassesStage, 5 * time.Millisecond, 250 * time.Millisecond, 5 * time.Millisecond, 1250 * time.Millisecond},
		{figure.SEDADegradationStage, 25 * time.Millisecond, 1250 * time.Millisecond, 5 * time.Millisecond, 1250 * time.Millisecond},
	} {
		p := sedaLiveParams(tc.d)
		if p.service != tc.service || p.target != tc.target || p.think != tc.think || p.retry != tc.retry || p.initialRate != 200 {
			t.Errorf("%v: live stage %+v", tc.d.ServiceTime, p)
		}
		// Every rate of the controller is the simulator's (the paper's
		// defaults) raised by 1/sedaTimeScale, not only the initial rate.
		if p.adjI != 8 || p.rateMin != 0.2 || p.rateMax != 20000 {
			t.Errorf("%v: live controller rates adj_i %g, rate_min %g, rate_max %g; want 8, 0.2, 20000", tc.d.ServiceTime, p.adjI, p.rateMin, p.rateMax)
		}
		ps := sedaPolicy(p).Stages[0].Control.(*control.SEDAConfig)
		if ps.AdjI != p.adjI || ps.RateMin != p.rateMin {
			t.Errorf("%v: the proxy's seda params %+v do not carry the scaled rates", tc.d.ServiceTime, ps)
		}
	}
}

// TestYakshaLiveIsTheSpecScaled: the live Yaksha parameters are the
// figures' (declared once, in package figure) compressed by
// yakshaTimeScale.
func TestYakshaLiveIsTheSpecScaled(t *testing.T) {
	p := yakshaLiveParams()
	if p.demand != 5*time.Millisecond || p.tref != 37500*time.Microsecond || p.period != 250*time.Millisecond ||
		p.tuneWindow != 2500*time.Millisecond || p.timeout != 2500*time.Millisecond || math.Abs(p.pole+0.4) > 1e-12 {
		t.Errorf("live parameters %+v", p)
	}
}

// TestYakshaShiftPlanIsTheSpecScaled: the live workload shift is the
// figure's (declared once, in package figure) compressed by
// yakshaTimeScale.
func TestYakshaShiftPlanIsTheSpecScaled(t *testing.T) {
	pl, err := planYakshaShift(newEnv("yaksha-workload-shift", Options{}))
	if err != nil {
		t.Fatal(err)
	}
	c := pl.c
	if pl.users != 100 || c.Wave != 12500*time.Millisecond || c.Think != 175*time.Millisecond || c.ThinkCap != 1750*time.Millisecond ||
		c.SettleWindow != 1250*time.Millisecond || c.SettleBand != 0.25 || c.HighFactor != 3 || pl.length != 3*c.Wave || len(pl.vars) != 3 {
		t.Errorf("plan %+v, shift %+v", pl, c)
	}
}

// TestAdaptiveIsTheSpec: the live adaptive experiment's backend,
// objective, clients and row targets are the figure's (declared once, in
// package figure).
func TestAdaptiveIsTheSpec(t *testing.T) {
	if adaptiveWorkers != 4 || adaptiveService != 10*time.Millisecond || adaptiveSLO != 250*time.Millisecond ||
		adaptiveTimeout != 5*time.Second || adaptivePeerWait != 125*time.Millisecond {
		t.Errorf("live adaptive: workers %d, service %v, SLO %v, timeout %v, peer wait %v",
			adaptiveWorkers, adaptiveService, adaptiveSLO, adaptiveTimeout, adaptivePeerWait)
	}
	for _, r := range adaptiveRows {
		switch r.name {
		case "seda":
			if c := r.ctrl().(*control.SEDAConfig); c.Target != 150*time.Millisecond {
				t.Errorf("seda target %v, want 0.6 × the SLO", c.Target)
			}
		case "yaksha":
			if c := r.ctrl().(*control.YakshaConfig); c.Tref != 60*time.Millisecond {
				t.Errorf("yaksha tref %v, want 0.24 × the SLO", c.Tref)
			}
		}
	}
}

// TestSEDAPlans: the live SEDA spike and degradation runs put the
// figure's crowd (3 → 1000 users) on their own timelines.
func TestSEDAPlans(t *testing.T) {
	sp, err := planSEDASpike(newEnv("seda-spike", Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if sp.from != 10*time.Second || sp.to != 50*time.Second || sp.length != 60*time.Second ||
		sp.users.At(5*time.Second) != 3 || sp.users.At(20*time.Second) != 1000 || sp.users.At(55*time.Second) != 3 {
		t.Errorf("spike plan from %v to %v length %v", sp.from, sp.to, sp.length)
	}
	cp, err := planSEDAClasses(newEnv("seda-classes", Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if cp.users != 128 || cp.highStart != 25*time.Second || cp.highEnd != 50*time.Second || cp.length != 75*time.Second ||
		cp.high.At(40*time.Second) != 128 || cp.high.At(60*time.Second) != 0 || cp.low.At(60*time.Second) != 128 {
		t.Errorf("classes plan: %d users, high %v–%v of %v", int(cp.users), cp.highStart, cp.highEnd, cp.length)
	}
	dp, err := planSEDADegradation(newEnv("seda-degradation", Options{Quick: true}))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range dp.vars {
		want := dp.from + dp.spikeDeg
		if v.name == "none" {
			want = dp.from + dp.spikeNone
		}
		if v.to != want || v.length != v.to+time.Second || v.users.At(v.to-time.Millisecond) != 1000 || v.users.At(v.to) != 3 {
			t.Errorf("degradation variant %s: to %v, length %v", v.name, v.to, v.length)
		}
	}
}

func TestForeignMeter(t *testing.T) {
	if d := foreignMeter(cpuPlan{}, os.Getpid())(); !math.IsNaN(d) {
		t.Errorf("unpinned: %v, want NaN", d)
	}
	if d := foreignMeter(cpuPlan{pinned: true}, 0)(); !math.IsNaN(d) {
		t.Errorf("no backend pid: %v, want NaN", d)
	}
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	// This process as the "backend" on CPU 0: a reading, host busy less
	// the process's own share, in [−1, 1].
	m := foreignMeter(cpuPlan{pinned: true, backendCPU: 0}, os.Getpid())
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	if d := m(); math.IsNaN(d) || d < -1 || d > 1 {
		t.Errorf("pinned: %v, want a fraction", d)
	}
}
