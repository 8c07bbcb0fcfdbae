// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/overload"
)

// The Kihl experiments are Andersson, Kihl, Robertsson & Wittenmark's
// Figs. 8–9, live: a PI controller of the backend's CPU utilization
// feeding the proxy's token bucket, with Poisson arrivals at about 2.25×
// the backend's capacity. The backend is the CGI testbed doing real CPU
// work, run as a child process of the sluice binary pinned to one CPU;
// the proxy measures that CPU's busy fraction from /proc/stat, and this
// process (proxy and load generator) is pinned to the other CPUs, so the
// measured utilization is the backend's own.

// kihlTimeScale compresses the Kihl experiments by 2: period h = 0.5 s,
// mean service 11.25 ms (the paper's 22.5 ms), arrivals 200/s (100/s).
// σ = μh ≈ 44 admissions per period and K = 20 admissions per period are
// unchanged, and Ti keeps its ratio to h (2.8 s → 1.4 s, 0.1 s → 0.05 s).
const kihlTimeScale = 0.5

// kihlExpQuantiles is the number of equally likely service-time levels
// that stand for the exponential distribution (each level is a path of
// the CGI testbed with its own amount of work).
const kihlExpQuantiles = 16

// kihlLive are the Kihl figures' parameters, declared once in package
// figure (the simulator's defaults), compressed by kihlTimeScale: every
// time (run length, period, service, integral times, measurement and
// settling windows) scaled, the arrival rate raised in proportion. Plus
// the client timeout of the live load.
type kihlLive struct {
	figure.KihlParams
	timeout time.Duration
}

func kihlLiveParams() kihlLive {
	c := figure.DefaultKihl(60 * time.Second)
	for _, d := range []*time.Duration{&c.Duration, &c.H, &c.ServiceTime, &c.Ti, &c.CompareTi, &c.MeasureFrom, &c.SettleWindow} {
		*d = scaled(*d, kihlTimeScale)
	}
	c.Rate /= kihlTimeScale
	return kihlLive{KihlParams: c, timeout: 5 * time.Second}
}

// kihlVariant is one run of the loop.
type kihlVariant struct {
	name, suffix, label string
	ti                  time.Duration
	service             string // "exp" or "det"
	length              time.Duration
	res                 *phaseResult
	util                []float64 // per period, from measureFrom
	kp                  []figure.KihlPeriod
	periods             []periodSample
	foreignBusy         float64 // busy fraction of the backend's CPU while the backend idled
	foreignDuring       float64 // the CPU's busy fraction less the backend's own over the run (NaN: not measured)
	processSensor       bool    // the proxy measured the backend process, not its CPU
}

// foreignBusyLimit is the busy fraction of the backend's CPU, with the
// backend idle, above which the CPU is taken to be shared with other work.
const foreignBusyLimit = 0.1

// idleBusy measures the busy fraction of one CPU over d.
func idleBusy(cpu int, d time.Duration) (float64, error) {
	ps, err := monitor.NewProcStat("/proc", []int{cpu})
	if err != nil {
		return 0, err
	}
	if _, err := ps.Utilization(time.Now()); err != nil && !errors.Is(err, monitor.ErrNoTimeElapsed) {
		return 0, err
	}
	time.Sleep(d)
	return ps.Utilization(time.Now())
}

// cpuPlan says where the backend and this process run.
type cpuPlan struct {
	pinned     bool
	backendCPU int
	ownCPUs    []int
	why        string // when not pinned
}

func planCPUs(env *Env) cpuPlan {
	cpus, err := processCPUs()
	switch {
	case !pinSupported:
		return cpuPlan{why: "this platform cannot pin processes"}
	case err != nil:
		return cpuPlan{why: "reading the CPU affinity: " + err.Error()}
	case len(cpus) < 2:
		return cpuPlan{why: fmt.Sprintf("only %d CPU is available", len(cpus))}
	case !childCapable(env.Executable):
		return cpuPlan{why: "the running executable is not the sluice binary (a test)"}
	}
	return cpuPlan{pinned: true, backendCPU: cpus[len(cpus)-1], ownCPUs: cpus[:len(cpus)-1]}
}

// calibrateCGI measures the backend's cost per unit of work as it will
// run (pinned child or in process): a CGI testbed with a path of 1 number
// (the HTTP overhead) and one of calN numbers, each requested 15 times in
// sequence; the medians give the overhead per request and the cost per
// number.
func calibrateCGI(ctx context.Context, env *Env, plan cpuPlan) (overhead time.Duration, ns float64, err error) {
	url, closeBackend, _, err := startCalibrationCGI(ctx, env, plan)
	if err != nil {
		return 0, 0, err
	}
	defer closeBackend() //nolint:errcheck // calibration backend
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	median := func(path string) (time.Duration, error) {
		var ds []float64
		for range 15 {
			t := time.Now()
			if err := getDrain(ctx, client, url+path); err != nil {
				return 0, err
			}
			ds = append(ds, float64(time.Since(t)))
		}
		return time.Duration(monitor.Percentile(ds, 0.5)), nil
	}
	if overhead, err = median("/cal0"); err != nil {
		return 0, 0, err
	}
	full, err := median("/cal")
	if err != nil {
		return 0, 0, err
	}
	return overhead, float64(full-overhead) / calN, nil
}

// startCGI starts the CGI testbed with work: a child process pinned to
// the backend CPU, or (unpinned plan) in this process. cpuNs above 0 makes
// the work CPU time (testbed.CGIConfig.CPUNsPerNumber). It returns the
// URL, the function that stops it, and the child's pid (0 in process).
func startCGI(ctx context.Context, env *Env, plan cpuPlan, work []testbed.PathWork, cpuNs float64) (string, func() error, int, error) {
	if plan.pinned {
		c, err := startChildBackend(ctx, env.Executable, []int{plan.backendCPU}, "cgi", "--work", testbed.FormatWork(work),
			"--seed", strconv.FormatUint(env.Seed, 10), "--cpu-ns-per-number", strconv.FormatFloat(cpuNs, 'g', -1, 64))
		if err != nil {
			return "", nil, 0, err
		}
		return c.URL, c.Close, c.cmd.Process.Pid, nil
	}
	cfg := testbed.DefaultCGIConfig()
	cfg.Work, cfg.Seed, cfg.CPUNsPerNumber = work, env.Seed, cpuNs
	cgi, err := testbed.NewCGI(cfg)
	if err != nil {
		return "", nil, 0, err
	}
	srv, err := serveHTTP(cgi)
	if err != nil {
		return "", nil, 0, err
	}
	return srv.URL, srv.Close, 0, nil
}

// calN is the numbers summed by a calibration request of path /cal; a
// request of /cal0 sums one (the HTTP handling's cost).
const calN = 2000000

// startCalibrationCGI starts the CGI testbed of the calibrations (startCGI,
// counted work): paths /cal0 and /cal.
func startCalibrationCGI(ctx context.Context, env *Env, plan cpuPlan) (string, func() error, int, error) {
	return startCGI(ctx, env, plan, []testbed.PathWork{{Prefix: "/cal0", N: 1}, {Prefix: "/cal", N: calN}}, 0)
}

// kihlWork returns the CGI paths and work for a service distribution of
// the given mean (the HTTP overhead per request included): "exp" as kihlExpQuantiles equally likely levels at the
// midpoint quantiles of the exponential (rescaled to the exact mean), or
// "det" as one level.
func kihlWork(service string, mean, overhead time.Duration, ns float64) []testbed.PathWork {
	total := max((mean-overhead).Seconds()*1e9/ns, 1)
	if service == "det" {
		return []testbed.PathWork{{Prefix: "/w00", N: max(1, int(math.Round(total)))}}
	}
	q := make([]float64, kihlExpQuantiles)
	sum := 0.0
	for i := range q {
		q[i] = -math.Log(1 - (float64(i)+0.5)/kihlExpQuantiles)
		sum += q[i]
	}
	out := make([]testbed.PathWork, len(q))
	for i := range q {
		out[i] = testbed.PathWork{Prefix: fmt.Sprintf("/w%02d", i), N: max(1, int(math.Round(total*q[i]*kihlExpQuantiles/sum)))}
	}
	return out
}

// kihlCV2 is the squared coefficient of variation of the service times
// kihlWork's equally likely levels give: each request costs the HTTP
// overhead plus its level's N random numbers of ns each.
func kihlCV2(ws []testbed.PathWork, overhead time.Duration, ns float64) float64 {
	if len(ws) == 0 {
		return 0
	}
	var sum, sq float64
	for _, w := range ws {
		t := overhead.Seconds() + float64(w.N)*ns*1e-9
		sum += t
		sq += t * t
	}
	n := float64(len(ws))
	mean := sum / n
	return max(sq/n-mean*mean, 0) / (mean * mean)
}

func kihlPolicy(p kihlLive, ti time.Duration) policy.Config {
	c := control.DefaultKihlConfig()
	c.Period, c.RhoRef, c.K, c.Ti = p.H, p.RhoRef, p.K, ti
	return mainPolicy(&c)
}

// runKihlStep is Fig. 9: the step response.
func runKihlStep(ctx context.Context, env *Env) (*figure.Result, error) {
	return runKihl(ctx, env, false)
}

// runKihlDistribution is Fig. 8: the distribution of the utilization.
func runKihlDistribution(ctx context.Context, env *Env) (*figure.Result, error) {
	return runKihl(ctx, env, true)
}

// runKihl is the experiment in four steps: plan (pin the backend and
// this process, calibrate the backend's work, choose the variants), run
// each variant, analyse the proxy's control periods into the summary's
// metrics with the figures' own rules (figure.KihlMetrics), and render
// tables, plots, the paper's expectations (figure.KihlChecks) and the
// setup.
func runKihl(ctx context.Context, env *Env, cdf bool) (*figure.Result, error) {
	pl, restore, err := planKihl(ctx, env, cdf)
	defer restore()
	if err != nil {
		return nil, err
	}
	for _, v := range pl.vars {
		if v.res, err = runKihlVariant(ctx, env, pl.p, pl.cpu, v, kihlWork(v.service, pl.p.ServiceTime, pl.overhead, pl.ns), pl.cpuNs); err != nil {
			return nil, err
		}
	}
	return finish(env, func(s *report.Summary) { analyseKihl(s, pl, cdf) },
		func(r *figure.Result) error { return renderKihl(r, pl, cdf) })
}

// kihlPlan is what the Kihl runs share: the parameters, where the backend
// and this process run, the backend's calibration and the variants.
type kihlPlan struct {
	p        kihlLive
	cpu      cpuPlan
	overhead time.Duration // HTTP handling per request
	ns       float64       // per random number of the CGI work
	cpuNs    float64       // the CPU-time mode's ns per number (0: counted; cgiWorkNs)
	vars     []*kihlVariant
}

// planKihl pins the backend's CPU and this process (restore undoes the
// latter), calibrates the backend and lays out the variants: the good
// parameters and the bad integral time, and M/D/1 in the full step form.
func planKihl(ctx context.Context, env *Env, cdf bool) (pl *kihlPlan, restore func(), err error) {
	restore = func() {}
	p := kihlLiveParams()
	plan := planCPUs(env)
	if plan.pinned {
		undo, err := pinProcess(plan.ownCPUs)
		if err != nil {
			plan = cpuPlan{why: "pinning this process: " + err.Error()}
		} else {
			restore = func() { _ = undo() } // best effort when the experiment ends
			env.Phasef("backend pinned to CPU %d; proxy and load generator on CPU %v", plan.backendCPU, plan.ownCPUs)
		}
	}
	if !plan.pinned {
		env.Phasef("not pinning (%s): the backend runs in process and reports its own utilization", plan.why)
	}
	overhead, ns, err := calibrateCGI(ctx, env, plan)
	if err != nil {
		return nil, restore, fmt.Errorf("calibrating the backend: %w", err)
	}
	env.Phasef("backend calibrated: %v per request of HTTP handling, %.2f ns per random number; mean service %v ≈ %.0f numbers",
		overhead, ns, p.ServiceTime, (p.ServiceTime-overhead).Seconds()*1e9/ns)

	mm := fmt.Sprintf("M/M/1-like, K=%g, Ti=%v", p.K, p.Ti)
	vars := []*kihlVariant{{name: "main", label: mm, ti: p.Ti, service: "exp"},
		{name: "compare_ti", suffix: "_compare_ti", label: fmt.Sprintf("M/M/1-like, K=%g, Ti=%v", p.K, p.CompareTi), ti: p.CompareTi, service: "exp"}}
	if cdf {
		vars[0].length = pick(env, 120*time.Second, 30*time.Second)
		vars[1].length = pick(env, 45*time.Second, 15*time.Second)
	} else {
		vars[0].length = pick(env, p.Duration, 20*time.Second)
		vars[1].length = vars[0].length
		if !env.Quick {
			vars = append(vars, &kihlVariant{name: "md1", suffix: "_md1", label: fmt.Sprintf("M/D/1-like, K=%g, Ti=%v", p.K, p.Ti),
				ti: p.Ti, service: "det", length: vars[0].length})
		}
	}
	return &kihlPlan{p: p, cpu: plan, overhead: overhead, ns: ns, cpuNs: cgiWorkNs(env, ns), vars: vars}, restore, nil
}

// analyseKihl sets the summary's metrics: for each variant the
// utilization metrics of its class-0 periods (figure.KihlMetrics, the
// simulator's rules), the mean once settled, the mean response time of
// the answered requests from MeasureFrom; then the sensor and the
// calibration.
func analyseKihl(s *report.Summary, pl *kihlPlan, cdf bool) {
	p := pl.p
	foreign, during, process := 0.0, math.NaN(), false
	for _, v := range pl.vars {
		v.periods = v.periods[:0]
		var kp []figure.KihlPeriod
		for _, ps := range v.res.periods {
			if ps.class != 0 {
				continue
			}
			v.periods = append(v.periods, ps)
			u := math.NaN()
			if ps.Utilization != nil {
				u = *ps.Utilization
			}
			kp = append(kp, figure.KihlPeriod{Start: ps.end - ps.Elapsed, End: ps.end, Offered: ps.Offered, Admitted: ps.Admitted,
				Rejected: ps.Rejected, Completed: ps.Completed, Utilization: u})
		}
		cv2 := kihlCV2(kihlWork(v.service, p.ServiceTime, pl.overhead, pl.ns), pl.overhead, pl.ns)
		v.util = figure.KihlMetrics(s, v.suffix, kp, p.KihlParams, v.length, !cdf, cv2)
		v.kp = kp
		s.Set("mean_rt_ms"+v.suffix, report.Mean(okLatencies(v.res.recs, p.MeasureFrom, v.length, nil)))
		foreign = math.Max(foreign, v.foreignBusy)
		if !math.IsNaN(v.foreignDuring) && !(v.foreignDuring <= during) {
			during = v.foreignDuring
		}
		process = process || v.processSensor
	}
	for _, v := range pl.vars {
		if !cdf {
			figure.KihlSettling(s, v.suffix, v.kp, p.KihlParams, v.length)
			figure.KihlAfterSettling(s, v.suffix, v.kp, v.length)
		}
	}
	s.Set("backend_cpu_foreign_busy", foreign)
	s.Set("backend_cpu_foreign_during", during)
	s.Set("sensor_process", b2f(process))
	s.Set("rho_ref", p.RhoRef)
	s.Set("time_scale", kihlTimeScale)
	s.Set("pinned", b2f(pl.cpu.pinned))
	s.Set("ns_per_number", pl.ns)
	s.Set("cgi_work_cpu_time", b2f(pl.cpuNs > 0))
	s.Set("http_overhead_ms", msOf(pl.overhead))
}

// renderKihl writes the per-period table, the plots of Figs. 8 and 9,
// the paper's expectations, the headline metrics and the setup.
func renderKihl(res *figure.Result, pl *kihlPlan, cdf bool) error {
	s, p, vars, plan, ns, overhead := res.Summary, pl.p, pl.vars, pl.cpu, pl.ns, pl.overhead
	ts := report.NewTable("variant", "time_s", "offered", "admitted", "rejected", "completed", "mean_rt_ms", "p90_rt_ms",
		"utilization", "rate_rps")
	for _, v := range vars {
		for _, ps := range v.periods {
			u := math.NaN()
			if ps.Utilization != nil {
				u = *ps.Utilization
			}
			rate := settingAt(v.res.states, ps.end+p.H/4, func(st *stateSample) float64 { return st.setting })
			if err := ts.Append(v.name, ps.end.Seconds(), ps.Offered, ps.Admitted, ps.Rejected, ps.Completed, ps.MeanMS, ps.P90MS, u, rate); err != nil {
				return err
			}
		}
	}
	res.AddTable("timeseries.csv", ts)

	var plotted []figure.KihlVariant
	for _, v := range vars {
		plotted = append(plotted, figure.KihlVariant{Label: v.label, Suffix: v.suffix, Periods: v.kp, Util: v.util})
	}
	if cdf {
		res.AddFigure("utilization_cdf.png", figure.KihlCDFFigure(plotted, p.KihlParams))
	}
	res.AddFigure("utilization.png", figure.KihlUtilizationFigure(s, plotted, p.KihlParams))

	if !cdf {
		if err := figure.KihlModelSettling(s, p.KihlParams); err != nil {
			return err
		}
	}
	res.Checks = figure.KihlChecks(s, p.KihlParams, kihlTimeScale, cdf)
	res.Key = []string{"utilization_mean", "utilization_std", "settling_time_s", "settling_time_s_md1", "settle_window_s", "utilization_std_compare_ti"}
	if cdf {
		res.Key = []string{"p_util_within_0_1", "utilization_mean", "utilization_std", "p_util_within_0_1_compare_ti"}
	}
	foreign, process := s.Metric("backend_cpu_foreign_busy"), s.Metric("sensor_process") == 1
	where := fmt.Sprintf("Backend: the CGI testbed (`sluice-lab testbed cgi`) as a child process pinned to CPU %d; the proxy's utilization sensor is /proc/stat for CPU %d alone (utilization: {source: host, cpus: \"%d\"}); this process (proxy and load generator) is pinned to CPUs %v.",
		plan.backendCPU, plan.backendCPU, plan.backendCPU, plan.ownCPUs)
	if process {
		where += fmt.Sprintf(" But CPU %d was up to %.0f%% busy with other work while the backend idled (a shared machine), so for those runs the proxy measured the backend process's own CPU time instead (utilization: {source: process, process_cpus: 1}).",
			plan.backendCPU, 100*foreign)
	}
	if d := s.Metric("backend_cpu_foreign_during"); !math.IsNaN(d) {
		where += fmt.Sprintf(" Over the runs CPU %d was busy with other work for at most %.1f%% of the time (its busy fraction less the backend's own CPU time, worst variant; backend_cpu_foreign_during)",
			plan.backendCPU, 100*d)
		if d > foreignBusyLimit {
			where += ": the machine was not quiet, and the host sensor counted that work as the backend's utilization."
		} else {
			where += "."
		}
	}
	if !plan.pinned {
		where = fmt.Sprintf("Backend: the CGI testbed in this process, not pinned (%s); the proxy reads the utilization the backend reports in X-Sluice-Utilization (in-flight estimate). Run the sluice binary on a Linux machine with 2 CPUs to pin it.", plan.why)
	}
	res.Setup = []string{
		where,
		fmt.Sprintf("Service: real CPU work, calibrated on the backend before the runs (%.2f ns per random number, %v of HTTP handling per request; %s); exponential service of mean %v (HTTP handling included) stands as %d equally likely levels (paths /w00–/w%02d) at the exponential's midpoint quantiles; the M/D/1 variant has one level.",
			ns, overhead.Round(time.Microsecond), cgiWorkNote(pl.cpuNs), p.ServiceTime, kihlExpQuantiles, kihlExpQuantiles-1),
		fmt.Sprintf("Load: open-loop Poisson arrivals at %.0f req/s (about 2.25× capacity), client timeout %v; runs of %v (main) and %v (comparison).", p.Rate, p.timeout, vars[0].length, vars[1].length),
		fmt.Sprintf("Controller: the proxy's kihl stage, period %v, ρ_ref %g, K %g admissions per period, Ti %v (comparison Ti %v), integrator from 0; the token bucket's burst is the stage default 5. Metrics from t = %v (the paper's 10 s).",
			p.H, p.RhoRef, p.K, p.Ti, p.CompareTi, p.MeasureFrom),
		fmt.Sprintf("Time compression %g: period 1 s, service 22.5 ms, 100 req/s, Ti 2.8 s and 0.1 s of the paper become %v, %v, %.0f req/s, %v and %v; σ = μh ≈ 44 and K are unchanged.",
			kihlTimeScale, p.H, p.ServiceTime, p.Rate, p.Ti, p.CompareTi),
	}
	return nil
}

// runKihlVariant starts the backend (pinned child or in process), the
// proxy with the kihl stage, and the Poisson load.
func runKihlVariant(ctx context.Context, env *Env, p kihlLive, plan cpuPlan, v *kihlVariant, work []testbed.PathWork, cpuNs float64) (*phaseResult, error) {
	util := overload.UtilizationConfig{Source: overload.UtilizationBackendHeader}
	backendURL, closeBackend, pid, err := startCGI(ctx, env, plan, work, cpuNs)
	if err != nil {
		return nil, err
	}
	if plan.pinned {
		// The backend's CPU must be its own for /proc/stat to measure it:
		// on a machine shared with other work, measure the backend
		// process's CPU time instead (same quantity on a quiet machine).
		busy, err := idleBusy(plan.backendCPU, time.Second)
		if err != nil {
			return nil, errors.Join(err, closeBackend())
		}
		v.foreignBusy = busy
		if busy <= foreignBusyLimit {
			util = overload.UtilizationConfig{Source: overload.UtilizationHost, CPUs: strconv.Itoa(plan.backendCPU)}
		} else {
			v.processSensor = true
			util = overload.UtilizationConfig{Source: overload.UtilizationProcess, PID: pid, ProcessCPUs: 1}
			env.Phasef("CPU %d was %.0f%% busy with other work while the backend idled: measuring the backend process's CPU time instead", plan.backendCPU, 100*busy)
		}
	}
	cfg := proxyConfig(backendURL, 256, kihlPolicy(p, v.ti), "")
	cfg.Utilization = util
	px, err := startProxy(ctx, cfg)
	if err != nil {
		return nil, errors.Join(err, closeBackend())
	}
	during := foreignMeter(plan, pid)
	var urls []loadgen.Weighted
	for _, w := range work {
		urls = append(urls, loadgen.Weighted{Name: w.Prefix, Weight: 1})
	}
	wl, err := loadgen.NewURLs("kihl", "url", urls)
	if err != nil {
		return nil, errors.Join(err, px.Close(), closeBackend())
	}
	rate, err := dist.ConstantSchedule(p.Rate)
	if err != nil {
		return nil, errors.Join(err, px.Close(), closeBackend())
	}
	ph := phase{name: v.name, length: v.length, target: px.URL, proxy: px, stageName: mainStage, sampleEvery: p.H / 4,
		grace: time.Second,
		loads: []loadgen.Config{{Mode: loadgen.ModeOpen, Duration: v.length, Seed: env.Seed, Timeout: p.timeout, Workload: wl,
			Arrivals: dist.Poisson{Rate: rate}}}}
	res, runErr := ph.run(ctx, env)
	v.foreignDuring = during()
	if err := errors.Join(runErr, px.Close(), closeBackend()); err != nil {
		return nil, err
	}
	return res, nil
}

// foreignMeter starts measuring, on a pinned plan, how busy the backend's
// CPU is with work other than the backend's own: the function it returns
// gives the CPU's busy fraction (/proc/stat) less the backend process's
// CPU time per second of wall time (/proc/<pid>/stat) since the call, or
// NaN where it cannot tell. The idle probe before a run sees only that
// moment; on a shared machine other work can start later, and the host
// sensor counts it as the backend's utilization (lab/NOTEBOOK.md,
// "Why the Kihl figures missed": 0.01 ± 0.009 per period on the quiet
// machine, 0.19 ± 0.19 at load 6.5).
func foreignMeter(plan cpuPlan, pid int) func() float64 {
	none := func() float64 { return math.NaN() }
	if !plan.pinned || pid <= 0 {
		return none
	}
	host, err := monitor.NewProcStat("/proc", []int{plan.backendCPU})
	if err != nil {
		return none
	}
	proc, err := monitor.NewProcess("/proc", pid, 1, time.Now())
	if err != nil {
		return none
	}
	return func() float64 {
		h, errH := host.Utilization(time.Now())
		p, errP := proc.Utilization(time.Now())
		if errH != nil || errP != nil {
			return math.NaN()
		}
		return h - p
	}
}

// getDrain GETs url with client and reads the whole reply: one request of
// the calibrations, which time it or count its CPU.
func getDrain(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}
