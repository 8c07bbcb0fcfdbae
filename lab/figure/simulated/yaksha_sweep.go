// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/stage"
)

// yaksha-load-sweep reproduces Kamra, Misra & Nahum's Figs. 7 and 8
// (docs/algorithms.md §2): throughput and mean response time against the
// offered load, with the self-tuning PI controller in front of the server
// and without any control. The server is the paper's plant model, an
// M/G/1 processor-sharing queue; the controller drops each arriving
// request with the probability it sets (the real gate.Dropper, seeded).

type yakshaSweepParams struct {
	figure.YakshaParams
	loads      []float64
	service    string
	duration   time.Duration
	warmup     time.Duration
	selfTuning bool
	lambda0    float64
}

// yakshaLoadSweep declares the parameters of yaksha-load-sweep and returns its run.
func yakshaLoadSweep(ps *Params) RunFunc {
	var c yakshaSweepParams
	ps.Floats(&c.loads, "loads", []float64{0.5, 1, 1.5, 2, 3, 4, 5}, 0.01, 100,
		"offered loads as multiples of the server capacity 1/E[X]; Poisson arrivals at load/E[X] req/s")
	figure.DeclareYakshaSweep(ps, &c.YakshaParams)
	ps.Choice(&c.service, "service", "exp", serviceKinds,
		"service-demand distribution (the mean response time of M/G/1-PS does not depend on it)")
	figure.DeclareYakshaTarget(ps, &c.YakshaParams)
	ps.Duration(&c.duration, "duration", 600*time.Second, time.Second, 100000*time.Second, "length of the run at each load point")
	ps.Duration(&c.warmup, "warmup", 200*time.Second, 0, 100000*time.Second,
		"start of the measurement window at each load point. The controller starts at pd = 0 facing the full load at t = 0; "+
			"at 4–5× the backlog built in the first seconds (thousands of requests sharing the server) drains through a "+
			"decaying oscillation that can last 150 s, so the steady-state points are measured from 200 s")
	ps.Bool(&c.selfTuning, "self_tuning", true, "self-tuning gains (Kg = λ0·Tref²/pa_avg); false uses the static design with lambda0")
	ps.Float(&c.lambda0, "lambda0", 0, 0, 1e9,
		"nominal arrival rate λ0 in req/s; 0 (default) lets self-tuning estimate it from the measured throughput; required when self_tuning=false")
	return func(env Env) (*figure.Result, error) { return runYakshaSweep(env, c) }
}

// yakshaPoint is the outcome of one load point with one controller.
type yakshaPoint struct {
	load                      float64
	steps                     []step
	offered, dropped          float64
	completed, good, rtSum    float64
	window                    float64
	throughput, goodput, mean float64
}

// runYakshaSweep reproduces Figs. 7 and 8: it runs a controlled and an
// uncontrolled point per offered load, analyses them into the summary,
// timeseries.csv and sweep.csv, and renders the plots.
func runYakshaSweep(env Env, c yakshaSweepParams) (*figure.Result, error) {
	if c.warmup >= c.duration {
		return nil, paramErrorf("warmup %v must be shorter than duration %v", c.warmup, c.duration)
	}
	if !c.selfTuning && c.lambda0 == 0 {
		return nil, paramErrorf("lambda0 must be > 0 when self_tuning=false")
	}
	var ctl, unc []*yakshaPoint
	for _, load := range c.loads {
		pc, err := yakshaRunPoint(env.Seed, c, load, true)
		if err != nil {
			return nil, err
		}
		pu, err := yakshaRunPoint(env.Seed, c, load, false)
		if err != nil {
			return nil, err
		}
		ctl, unc = append(ctl, pc), append(unc, pu)
	}
	res := newResult(env)
	if err := analyseYakshaSweep(res, c, ctl, unc); err != nil {
		return nil, err
	}
	renderYakshaSweep(res, c, ctl, unc)
	return res, nil
}

// yakshaIdeal returns the server's capacity 1/E[S] (req/s) and the ideal
// throughput at the target, capacity·(1 − E[S]/Tref): the rate of an
// M/M/1 queue whose mean response time is Tref.
func yakshaIdeal(c yakshaSweepParams) (capacity, ideal float64) {
	es := c.ServiceTime.Seconds()
	capacity = 1 / es
	return capacity, capacity * (1 - es/c.Tref.Seconds())
}

// analyseYakshaSweep writes timeseries.csv (every control period of every
// run) and sweep.csv, and sets per load the throughput, goodput, mean RT,
// drop fraction and throughput/ideal of both variants, the largest
// relative error of the mean RT against Tref from 2× capacity up, the key
// and the checks. ctl and unc are in the order of c.loads.
func analyseYakshaSweep(res *figure.Result, c yakshaSweepParams, ctl, unc []*yakshaPoint) error {
	capacity, ideal := yakshaIdeal(c)
	s := res.Summary
	ts := report.NewTable("variant", "load_x", "time_s", "offered", "admitted", "rejected", "completed",
		"mean_rt_ms", "p90_rt_ms", "utilization", "drop_probability")
	sweep := report.NewTable("load_x", "offered_rps", "throughput_rps", "goodput_rps", "mean_rt_ms", "drop_fraction",
		"throughput_ratio", "throughput_rps_uncontrolled", "goodput_rps_uncontrolled", "mean_rt_ms_uncontrolled")
	for i, load := range c.loads {
		pc, pu := ctl[i], unc[i]
		for _, v := range []struct {
			name string
			p    *yakshaPoint
		}{{"controlled", pc}, {"uncontrolled", pu}} {
			for _, st := range v.p.steps {
				w := st.in()
				if err := ts.Append(v.name, load, st.end().Seconds(), w.Arrivals, w.Admitted, w.Rejected, w.Completed,
					ms(w.MeanRT), ms(w.P90RT), w.Utilization, st.Decision.New); err != nil {
					return err
				}
			}
		}
		tag := figure.LoadTag(load)
		s.Set("throughput_rps_at_"+tag, pc.throughput)
		s.Set("goodput_rps_at_"+tag, pc.goodput)
		s.Set("mean_rt_ms_at_"+tag, ms(pc.mean))
		s.Set("drop_fraction_at_"+tag, ratio(pc.dropped, pc.offered))
		s.Set("throughput_ratio_at_"+tag, pc.throughput/ideal)
		s.Set("throughput_rps_at_"+tag+"_uncontrolled", pu.throughput)
		s.Set("goodput_rps_at_"+tag+"_uncontrolled", pu.goodput)
		s.Set("mean_rt_ms_at_"+tag+"_uncontrolled", ms(pu.mean))
		if err := sweep.Append(load, load*capacity, pc.throughput, pc.goodput, ms(pc.mean), ratio(pc.dropped, pc.offered),
			pc.throughput/ideal, pu.throughput, pu.goodput, ms(pu.mean)); err != nil {
			return err
		}
	}
	s.Set("capacity_rps", capacity)
	s.Set("ideal_throughput_rps", ideal)
	s.Set("tref_ms", ms(c.Tref.Seconds()))
	maxErr := 0.0
	for _, p := range ctl {
		if p.load >= 2 {
			maxErr = math.Max(maxErr, math.Abs(p.mean-c.Tref.Seconds())/c.Tref.Seconds())
		}
	}
	s.Set("mean_rt_max_rel_error_at_2x_plus", maxErr)
	res.Checks = figure.YakshaSweepChecks(s)
	res.AddTable("timeseries.csv", ts)
	res.AddTable("sweep.csv", sweep)
	res.Key = []string{"mean_rt_ms_at_3x", "throughput_ratio_at_3x", "mean_rt_ms_at_3x_uncontrolled"}
	return nil
}

// renderYakshaSweep draws load_sweep.png (Figs. 7 and 8: throughput and
// mean RT against the offered load) and trace.png (the controlled run at
// the highest load ≤ 3×: mean RT and drop probability per period).
func renderYakshaSweep(res *figure.Result, c yakshaSweepParams, ctl, unc []*yakshaPoint) {
	capacity, ideal := yakshaIdeal(c)
	loads := make([]float64, len(ctl))
	series := func(pts []*yakshaPoint, f func(p *yakshaPoint) float64) []float64 {
		out := make([]float64, len(pts))
		for i, p := range pts {
			loads[i] = p.load
			out[i] = f(p)
		}
		return out
	}
	thr := report.Panel{Title: "throughput vs offered load (Fig. 7)", XLabel: "offered load (× capacity)", YLabel: "throughput (req/s)",
		Series: []report.Series{
			{Label: "controlled: completed", X: loads, Y: series(ctl, func(p *yakshaPoint) float64 { return p.throughput }), Kind: report.LinePoints},
			{Label: "uncontrolled: completed", X: loads, Y: series(unc, func(p *yakshaPoint) float64 { return p.throughput }), Kind: report.LinePoints},
			{Label: fmt.Sprintf("uncontrolled: goodput (RT ≤ %v)", c.Timeout), X: loads,
				Y: series(unc, func(p *yakshaPoint) float64 { return p.goodput }), Kind: report.LinePoints, Dashed: true},
		},
		HLines: []report.RefLine{{Value: ideal, Label: fmt.Sprintf("ideal at Tref: %.1f req/s", ideal)}},
		YMin:   0, YMax: capacity * 1.7}
	rt := report.Panel{Title: "mean response time vs offered load (Fig. 8)", XLabel: "offered load (× capacity)", YLabel: "mean RT (ms)",
		LogY: true, LegendLeft: true,
		Series: []report.Series{
			{Label: "controlled", X: loads, Y: series(ctl, func(p *yakshaPoint) float64 { return ms(p.mean) }), Kind: report.LinePoints},
			{Label: "uncontrolled", X: loads, Y: series(unc, func(p *yakshaPoint) float64 { return ms(p.mean) }), Kind: report.LinePoints},
		},
		HLines: []report.RefLine{{Value: ms(c.Tref.Seconds()), Label: fmt.Sprintf("Tref = %v", c.Tref)}}}
	res.AddFigure("load_sweep.png", &report.Figure{PanelHeight: 4, Panels: []report.Panel{thr, rt}})

	// Time series at the highest load ≤ 3× (the summary's reference point).
	ref := len(ctl) - 1
	for i, p := range ctl {
		if p.load <= 3 {
			ref = i
		}
	}
	if len(ctl) > 0 {
		p := ctl[ref]
		x, y, pd := []float64{}, []float64{}, []float64{}
		for _, st := range p.steps {
			x = append(x, st.end().Seconds())
			y = append(y, ms(st.in().MeanRT))
			pd = append(pd, st.Decision.New)
		}
		res.AddFigure("trace.png", &report.Figure{PanelHeight: 2.8, Panels: []report.Panel{
			{Title: fmt.Sprintf("controlled run at %g× capacity", p.load), XLabel: "time (s)", YLabel: "mean RT per period (ms)",
				Series: []report.Series{{Label: "mean RT", X: x, Y: y}},
				HLines: []report.RefLine{{Value: ms(c.Tref.Seconds()), Label: fmt.Sprintf("Tref = %v", c.Tref)}}, YMin: 0, YMax: 4 * ms(c.Tref.Seconds())},
			{XLabel: "time (s)", YLabel: "drop probability pd", Series: []report.Series{{Label: "pd", X: x, Y: pd}}, YMin: 0, YMax: 1, LegendBottom: true},
		}})
	}
}

// yakshaController returns the real controller's configuration: Yaksha,
// or no control at all.
func yakshaController(tref, period time.Duration, selfTuning bool, lambda0 float64, controlled bool) control.Config {
	if !controlled {
		cfg := control.DefaultNoneConfig()
		cfg.Period = period
		return &cfg
	}
	cfg := control.DefaultYakshaConfig()
	cfg.Tref, cfg.Period, cfg.SelfTuning, cfg.Lambda0 = tref, period, selfTuning, lambda0
	return &cfg
}

// yakshaStage drives the proxy's stage for cfg in front of server: its
// dropper (bucket of 1 for the token kinds), its recorder, and the
// server's busy fraction as its utilization sensor.
func yakshaStage(e *sim.Engine, cfg control.Config, server sim.Station) (*staged, error) {
	busy, err := sim.NewBusy(e, server.Busy, "server")
	if err != nil {
		return nil, err
	}
	return newStaged(e, stage.Options{Name: "site", Controller: cfg, Burst: 1, Utilization: busy},
		&sim.Visit{Engine: e, Station: server}, nil)
}

// yakshaRunPoint runs one load point: Poisson arrivals → the proxy's
// stage → a single processor-sharing server.
func yakshaRunPoint(seed uint64, c yakshaSweepParams, load float64, controlled bool) (*yakshaPoint, error) {
	svc, err := serviceDist(c.service, c.ServiceTime.Seconds())
	if err != nil {
		return nil, err
	}
	e := sim.New(seed)
	server, err := sim.NewPS(e, sim.PSConfig{Capacity: 1})
	if err != nil {
		return nil, err
	}
	loop, err := yakshaStage(e, yakshaController(c.Tref, c.Period, c.selfTuning, c.lambda0, controlled), server)
	if err != nil {
		return nil, err
	}
	rate, err := dist.ConstantSchedule(load / c.ServiceTime.Seconds())
	if err != nil {
		return nil, err
	}
	p := &yakshaPoint{load: load, window: (c.duration - c.warmup).Seconds()}
	timeout := c.Timeout.Seconds()
	src, err := sim.NewOpen(e, sim.OpenConfig{Name: "clients", Arrivals: dist.Poisson{Rate: rate},
		Types:  []sim.RequestType{{Name: "page", Demand: svc}},
		Target: loop.entry,
		OnFinish: func(r *sim.Request) {
			if r.Finished < c.warmup || r.Outcome != sim.Completed {
				return
			}
			rt := r.ResponseTime().Seconds()
			p.completed++
			p.rtSum += rt
			if timeout == 0 || rt <= timeout {
				p.good++
			}
		}})
	if err != nil {
		return nil, err
	}
	src.Start()
	e.Run(c.duration)
	p.steps = loop.steps
	for _, st := range p.steps {
		if st.start() >= c.warmup {
			p.offered += st.in().Arrivals
			p.dropped += st.in().Rejected
		}
	}
	p.throughput = p.completed / p.window
	p.goodput = p.good / p.window
	p.mean = ratio(p.rtSum, p.completed)
	if p.completed == 0 {
		p.mean = math.NaN()
	}
	return p, nil
}

// yakshaGainA reads the controller's current gain A (NaN for a controller
// that is not Yaksha).
func yakshaGainA(c sluice.Controller) float64 {
	if y, ok := c.(*control.Yaksha); ok {
		return y.Gains().A
	}
	return math.NaN()
}
