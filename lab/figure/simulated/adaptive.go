// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/stage"
)

// adaptive compares every controller, on the same seeded open-loop load
// and a fresh backend per run, through the phases that separate an
// adaptive overload control from a hand-tuned one: (a) a flash crowd from
// 0.5× to 10× capacity within 1 s, (b) the backend's capacity halves under
// 3× overload, (c) it doubles, (d) its parallelism grows from 4 to 16
// workers at the same per-request cost, (e) the workers are two backends
// of half of them each, balanced by least requests in flight, and one
// becomes 3× slower. The hand-tuned rows stand for
// nginx limit_req (static-rate told the capacity) and HAProxy maxconn
// (static-concurrency told the workers, 100 ms queue timeout).

// adaptiveRows are the rows, in table order.
var adaptiveRows = []string{"none", "static-rate", "static-concurrency", "seda", "yaksha",
	"gradient2", "envoy-gradient", "bbr", "auto"}

// adaptivePhases are the phases, in table order.
var adaptivePhases = []string{"a", "b", "c", "d", "e"}

type adaptiveParams struct {
	figure.AdaptiveParams
	service     string
	base, crowd float64
	overload    float64
	rows        []string
	phases      []string
	tailGuard   bool
	medianProbe bool
	knee        string
	burstWindow time.Duration
	tailPool    int
	warm        time.Duration
	length      time.Duration
	change      time.Duration
}

// adaptivePhasesScenario declares the parameters of adaptive and returns its run.
func adaptivePhasesScenario(ps *Params) RunFunc {
	var c adaptiveParams
	figure.DeclareAdaptive(ps, &c.AdaptiveParams)
	ps.Choice(&c.service, "service", "exp", figure.AdaptiveServiceKinds, "service-time distribution: exp, lognormal (σ 1.5) or pareto (α 1.5, capped at 50× the mean), with mean service_time (figure.AdaptiveService)")
	ps.Float(&c.base, "base", 0.5, 0, 100, "offered load before the change, × capacity")
	ps.Bool(&c.tailGuard, "auto_tail_guard", false, "auto's tail_guard option (a named option, off by default)")
	ps.Bool(&c.medianProbe, "auto_median_probe", false, "auto's median_probe option")
	ps.Choice(&c.knee, "auto_knee", auto.KneeProbes, []string{auto.KneeProbes, auto.KneeOvertakes}, "auto's knee: probes (its default) or overtakes")
	ps.Duration(&c.burstWindow, "auto_burst_window", 0, 0, time.Minute, "auto's burst_window option (a named option, off by default): how long into an overload a standing queue keeps a burst's wait")
	ps.Int(&c.tailPool, "auto_tail_pool", 0, 0, 1000000, "auto's tail_pool option (a named option, off by default): how many of the latest service times the wait queue's p99 estimate pools (0: off; else at least 100)")
	ps.Float(&c.crowd, "crowd", 10, 0, 1000, "phase a: offered load of the crowd, × capacity")
	ps.Float(&c.overload, "overload", 3, 0, 1000, "phases b–e: offered load, × the initial capacity")
	ps.Duration(&c.warm, "warm", 10*time.Second, 0, time.Hour, "time at the base load before the overload")
	ps.Duration(&c.change, "change", 10*time.Second, time.Second, time.Hour, "phases b–e: time of overload before the backend changes")
	ps.Duration(&c.length, "length", 20*time.Second, time.Second, time.Hour, "time measured after the crowd (a) or the change (b–e)")
	ps.Subset(&c.rows, "rows", adaptiveRows, adaptiveRows, "controllers to run")
	ps.Subset(&c.phases, "phases", adaptivePhases, adaptivePhases, "phases to run")
	return func(env Env) (*figure.Result, error) { return runAdaptive(env, c) }
}

// adaptiveRun is one row through one phase.
type adaptiveRun struct {
	row, phase string
	reqs       []adaptiveReq
	steps      []adaptiveStep
	at         time.Duration // the crowd's arrival (a) or the change (b–d)
	end        time.Duration
	capBefore  float64
	capAfter   float64
	// serviceP99 is the p99 of the service demands (ms) the backend drew
	// from the event until the end: the service's own tail, under any
	// admission control's p99 (the live figure's service_p99_ms).
	serviceP99 float64
}

type adaptiveReq struct {
	sent, done time.Duration
	outcome    sim.Outcome
}

type adaptiveStep struct {
	at      time.Duration
	setting float64
	kind    sluice.Kind
}

func runAdaptive(env Env, c adaptiveParams) (*figure.Result, error) {
	rows, phases := c.rows, c.phases
	res := newResult(env)
	tab := report.NewTable("row", "phase", "goodput_rps", "goodput_first_s_rps", "p50_ms", "p99_ms", "p99_first_s_ms", "reject_fraction", "settle_s", "capacity_rps", "service_p99_ms")
	series := report.NewTable("row", "phase", "time_s", "goodput_rps", "setting")
	var runs []*adaptiveRun
	for pi, ph := range phases {
		for _, row := range rows {
			run, err := runAdaptiveOne(env.Seed*1000+uint64(pi), c, row, ph)
			if err != nil {
				return nil, fmt.Errorf("%s, phase %s: %w", row, ph, err)
			}
			runs = append(runs, run)
			m := run.metrics(c)
			name := strings.ReplaceAll(row, "-", "_") + "_" + ph
			res.Summary.Set("goodput_rps_"+name, m.goodput)
			res.Summary.Set("p99_ms_"+name, m.p99)
			res.Summary.Set("p99_first_s_ms_"+name, m.p99First)
			res.Summary.Set("reject_fraction_"+name, m.reject)
			if ph == "a" {
				res.Summary.Set("goodput_first_s_rps_"+name, m.first)
			} else {
				res.Summary.Set("settle_s_"+name, m.settle)
			}
			if err := tab.Append(row, ph, m.goodput, m.first, m.p50, m.p99, m.p99First, m.reject, m.settle, run.capAfter, run.serviceP99); err != nil {
				return nil, err
			}
			good := run.goodputBins(c.SLO, time.Second)
			set := run.settingBins(time.Second)
			for i := range good {
				if err := series.Append(row, ph, float64(i), good[i], set[i]); err != nil {
					return nil, err
				}
			}
		}
	}
	res.AddTable("phases.csv", tab)
	res.AddTable("timeseries.csv", series)
	for _, ph := range phases {
		res.AddFigure("phase_"+ph+".png", adaptiveFigure(runs, ph, c))
	}
	var specPhases []figure.AdaptivePhase
	for _, ph := range phases {
		if slices.Contains(rows, "auto") {
			res.Key = append(res.Key, "goodput_rps_auto_"+ph)
		}
		specPhases = append(specPhases, figure.AdaptivePhase{Name: ph, Title: adaptiveTitle(ph, c)})
	}
	if len(specPhases) > 0 {
		res.Checks = figure.AdaptiveChecks(res.Summary, specPhases, ms(c.SLO.Seconds()), float64(c.Workers)/c.ServiceTime.Seconds())
	}
	return res, nil
}

// adaptiveController returns the row's controller configuration: the
// objective for auto, targets derived from it for seda and yaksha, the
// capacity or the worker count for the hand-tuned rows, the sources'
// defaults for the peers.
func adaptiveController(row string, c adaptiveParams, capacity float64) (control.Config, stage.Options, error) {
	cfg, err := control.NewConfig(row)
	if err != nil {
		return nil, stage.Options{}, err
	}
	opts := stage.Options{Burst: 5}
	switch x := cfg.(type) {
	case *auto.Config:
		x.SLO = c.SLO
		x.TailGuard = c.tailGuard
		x.MedianProbe = x.MedianProbe || c.medianProbe
		x.Knee = c.knee
		x.BurstWindow = c.burstWindow
		x.TailPool = c.tailPool
		opts.MaxQueue = 4096
	case *control.StaticRateConfig:
		x.Rate = capacity
		opts.Burst = max(1, int(capacity*0.1)) // limit_req burst of 100 ms
	case *control.StaticConcurrencyConfig:
		x.Limit = c.Workers
		opts.MaxQueue, opts.QueueTimeout = 4096, 100*time.Millisecond
	case *control.SEDAConfig:
		x.Target = figure.AdaptiveSEDATarget(c.SLO)
		x.RateMax, x.InitialRate = 1e6, 1e6
	case *control.YakshaConfig:
		x.Tref = figure.AdaptiveYakshaTref(c.SLO)
	}
	opts.Controller = cfg
	return cfg, opts, nil
}

func runAdaptiveOne(seed uint64, c adaptiveParams, row, phase string) (*adaptiveRun, error) {
	e := sim.New(seed)
	capacity := float64(c.Workers) / c.ServiceTime.Seconds()
	_, opts, err := adaptiveController(row, c, capacity)
	if err != nil {
		return nil, err
	}
	opts.Name, opts.Rand = row, e.Stream("gate")
	st, err := stage.New(opts, e.Time())
	if err != nil {
		return nil, err
	}
	spec, err := figure.AdaptiveService(c.service, c.ServiceTime)
	if err != nil {
		return nil, err
	}
	svc, err := dist.ParseDuration(spec)
	if err != nil {
		return nil, err
	}
	// The backends: one FIFO of all the workers, or in phase e two of
	// half the workers each behind the proxy's least-in-flight balance
	// (figure.AdaptiveChangeOf), as the live figure runs them.
	nb := 1
	if phase == "e" {
		nb = 2
		if c.Workers < nb {
			return nil, fmt.Errorf("phase e splits the workers over two backends: workers = %d, want at least 2", c.Workers)
		}
	}
	var members []sim.Station
	var fifos []*sim.FIFO
	var weights []float64
	for i := range nb {
		w := c.Workers / nb
		if i == 0 {
			w = c.Workers - (nb-1)*(c.Workers/nb)
		}
		f, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: w})
		if err != nil {
			return nil, err
		}
		members, fifos, weights = append(members, f), append(fifos, f), append(weights, float64(w))
	}
	backend, err := sim.NewPool(members, weights)
	if err != nil {
		return nil, err
	}
	// The service time is drawn when the request reaches the backend, in
	// the order the backend receives requests, as the live testbed's
	// queue does (testbed.Queue.Serve): every row's backend serves the
	// same sequence of service times (common random numbers), so two
	// rows differ by their control, not by which of a heavy tail's draws
	// each happened to admit. The controller never sees a request's
	// demand before admitting it, so this is the same model.
	scale, draws := 1.0, e.Stream("service")
	run := &adaptiveRun{row: row, phase: phase, capBefore: capacity, capAfter: capacity}
	var demands []float64 // ms, from the event until the end
	visit := &sim.Visit{Engine: e, Station: backend, Work: func(*sim.Request) float64 {
		d := svc.Sample(draws) * scale
		if now := e.Now(); now >= run.at && now < run.end {
			demands = append(demands, d*1000)
		}
		return d
	}}
	drv, err := sim.NewStage(e, st, visit, nil)
	if err != nil {
		return nil, err
	}
	drv.OnStep = func(now time.Duration, ds []sluice.Decision) {
		for _, d := range ds {
			run.steps = append(run.steps, adaptiveStep{at: now, setting: d.New, kind: d.Kind})
		}
	}
	segs := figure.AdaptiveRates(phase, capacity, c.warm, c.base, c.crowd, c.overload)
	switch phase {
	case "a":
		run.at = c.warm
	default:
		run.at = c.warm + c.change
		ch := figure.AdaptiveChangeOf(phase, c.Workers, c.ServiceTime)
		e.Schedule(run.at, func() {
			switch {
			case ch.Workers > 0:
				_ = fifos[0].SetServers(ch.Workers)
			case ch.Backend > 0:
				_ = backend.SetScale(ch.Backend, ch.Scale)
			case ch.Scale > 0:
				scale = ch.Scale
			}
			run.capAfter = ch.Capacity
		})
	}
	run.end = run.at + c.length
	sched, err := dist.NewSchedule(segs...)
	if err != nil {
		return nil, err
	}
	src, err := sim.NewOpen(e, sim.OpenConfig{Name: "clients", Arrivals: dist.Poisson{Rate: sched},
		// The source's draw of a demand is unused (visit draws it at
		// the backend); it stays so that the arrivals, drawn from the
		// same stream, are the ones every earlier run had.
		Types: []sim.RequestType{{Demand: svc}}, Target: drv,
		OnFinish: func(r *sim.Request) {
			run.reqs = append(run.reqs, adaptiveReq{sent: r.Sent, done: r.Finished, outcome: r.Outcome})
		}})
	if err != nil {
		return nil, err
	}
	src.Start()
	e.Schedule(run.end, src.Stop)
	e.Run(run.end + c.Timeout)
	run.serviceP99 = monitor.Percentile(demands, 0.99)
	return run, nil
}

// adaptiveMetrics are one run's figures.
type adaptiveMetrics struct {
	goodput, first, p50, p99, reject, settle float64
	// p99First is the admitted p99 of the requests sent in the first
	// second after the crowd's arrival or the change, ms.
	p99First float64
}

// ok reports whether a request is an answer within the objective.
func (q adaptiveReq) good(slo time.Duration) bool {
	return q.outcome == sim.Completed && q.done-q.sent <= slo
}

func (r *adaptiveRun) metrics(c adaptiveParams) adaptiveMetrics {
	var m adaptiveMetrics
	from, to := r.at, r.end
	var rts, firstRTs []float64
	good, offered, rejected, first := 0, 0, 0, 0
	for _, q := range r.reqs {
		if q.sent < from || q.sent >= to {
			continue
		}
		offered++
		switch {
		case q.outcome == sim.Rejected:
			rejected++
		case q.outcome == sim.Completed && q.done-q.sent <= c.Timeout:
			rts = append(rts, (q.done - q.sent).Seconds())
			if q.sent < from+time.Second {
				firstRTs = append(firstRTs, (q.done - q.sent).Seconds())
			}
		}
		if q.good(c.SLO) {
			good++
			if q.sent < from+time.Second {
				first++
			}
		}
	}
	m.goodput = float64(good) / (to - from).Seconds()
	m.first = float64(first)
	m.p50 = ms(monitor.Percentile(rts, 0.5))
	m.p99 = ms(monitor.Percentile(rts, 0.99))
	m.p99First = ms(monitor.Percentile(firstRTs, 0.99))
	m.reject = ratio(float64(rejected), float64(offered))
	m.settle = report.SettleTime(r.goodputBins(c.SLO, time.Second), int(r.at/time.Second), 2, 5, 0.1)
	return m
}

// goodputBins returns answers within the objective per second, by the
// second their request was sent, from 0 to the end of the run.
func (r *adaptiveRun) goodputBins(slo, width time.Duration) []float64 {
	n := int((r.end + width - 1) / width)
	out := make([]float64, n)
	for _, q := range r.reqs {
		if i := int(q.sent / width); i < n && q.good(slo) {
			out[i] += 1 / width.Seconds()
		}
	}
	return out
}

// settingBins returns the controller's last setting in each bin (NaN
// before the first step).
func (r *adaptiveRun) settingBins(width time.Duration) []float64 {
	n := int((r.end + width - 1) / width)
	out := make([]float64, n)
	v, j := math.NaN(), 0
	for i := range out {
		for j < len(r.steps) && r.steps[j].at < time.Duration(i+1)*width {
			v = r.steps[j].setting
			j++
		}
		out[i] = v
	}
	return out
}

// adaptiveTitle is a phase's title.
func adaptiveTitle(phase string, c adaptiveParams) string {
	return map[string]string{
		"a": fmt.Sprintf("(a) flash crowd %g× → %g× capacity at t = %gs", c.base, c.crowd, c.warm.Seconds()),
		"b": "(b) capacity halves", "c": "(c) capacity doubles", "d": "(d) parallelism 4× (same cost per request)",
		"e": "(e) two backends of half the workers, one becomes 3× slower"}[phase]
}

func adaptiveFigure(runs []*adaptiveRun, phase string, c adaptiveParams) *report.Figure {
	title := adaptiveTitle(phase, c)
	good := report.Panel{Title: title, XLabel: "time (s)", YLabel: fmt.Sprintf("answers within %v per second", c.SLO), YMin: 0}
	conc := report.Panel{XLabel: "time (s)", YLabel: "concurrency limit (concurrency rows)", YMin: 0, LogY: true}
	for _, r := range runs {
		if r.phase != phase {
			continue
		}
		g := r.goodputBins(c.SLO, time.Second)
		x := make([]float64, len(g))
		for i := range x {
			x[i] = float64(i) + 0.5
		}
		good.Series = append(good.Series, report.Series{Label: r.row, X: x, Y: g})
		if len(r.steps) > 0 && r.steps[0].kind == sluice.KindConcurrency {
			var sx, sy []float64
			for _, s := range r.steps {
				sx = append(sx, s.at.Seconds())
				sy = append(sy, s.setting)
			}
			conc.Series = append(conc.Series, report.Series{Label: r.row, X: sx, Y: sy})
		}
		good.VLines = []report.RefLine{{Value: r.at.Seconds()}}
		good.HLines = []report.RefLine{{Value: r.capBefore, Label: "capacity"}}
		if r.capAfter != r.capBefore {
			good.HLines = append(good.HLines, report.RefLine{Value: r.capAfter, Label: "new capacity"})
		}
	}
	return &report.Figure{PanelHeight: 3.4, Panels: []report.Panel{good, conc}}
}
