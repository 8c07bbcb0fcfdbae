// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/stage"
)

// seda-spike reproduces Welsh & Culler's Fig. 10 (and the controller trace
// of Fig. 7; docs/algorithms.md §5): a flash crowd from 3 to 1000
// closed-loop users against one bottleneck stage, with SEDA's AIMD
// controller on the stage's p90 and without admission control. A rejected
// user waits 5 s before retrying.

type sedaSpikeParams struct {
	figure.SEDASpikeLoad
	stage figure.SEDAStageParams
}

// sedaSpike declares the parameters of seda-spike and returns its run.
func sedaSpike(ps *Params) RunFunc {
	var c sedaSpikeParams
	figure.DeclareSEDAStage(ps, &c.stage, figure.SEDASpikeStage)
	figure.DeclareSEDASpikeLoad(ps, &c.SEDASpikeLoad)
	return func(env Env) (*figure.Result, error) { return runSEDASpike(env, c) }
}

// sedaVariant is one run of a SEDA scenario.
type sedaVariant struct {
	name, suffix, label string
	run                 *sedaRun
}

// sedaRun is the outcome of one stage run.
type sedaRun struct {
	log    reqLog  // every finished request, as its user saw it
	gauges *gauges // the server's utilization and queue, per second
	loop   *staged // the stage and its controller steps
	until  time.Duration
}

// seconds returns the run's per-second view of the requests of class
// (every class when < 0), with the server's gauges.
func (r *sedaRun) seconds(class int) []second { return r.log.seconds(class, r.until) }

// sedaConfig returns the real controller's configuration for a stage.
func sedaConfig(c figure.SEDAStageParams) control.SEDAConfig {
	cfg := control.DefaultSEDAConfig()
	cfg.Target = c.Target
	cfg.InitialRate = c.InitialRate
	return cfg
}

// userGroup describes one group of closed-loop users of a SEDA run.
type userGroup struct {
	name  string
	class int
	count dist.Schedule
}

// runSEDAStage runs closed-loop user groups through the proxy's stage (the
// controller of cfg, its token buckets, per-class recorders and nreq
// trigger, stepped the instant a trigger is due) in front of a
// single-server FIFO stage. classes names the stage's request classes; a
// user's request has its group's class. With degrade, each request's
// service demand is scaled by the stage's quality level at the moment it
// starts service.
func runSEDAStage(seed uint64, c figure.SEDAStageParams, cfg control.Config, classes []string, groups []userGroup,
	degrade bool, until time.Duration) (*sedaRun, error) {
	svc, err := serviceDist(c.Service, c.ServiceTime.Seconds())
	if err != nil {
		return nil, err
	}
	think, err := dist.NewExponential(c.Think.Seconds())
	if err != nil {
		return nil, err
	}
	e := sim.New(seed)
	server, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: 1})
	if err != nil {
		return nil, err
	}
	run := &sedaRun{until: until}
	if run.gauges, err = newGauges(e, server.Busy, func() float64 { return float64(server.InSystem()) }, 1); err != nil {
		return nil, err
	}
	var next sim.Handler = &sim.Visit{Engine: e, Station: server}
	var quality func() float64
	if degrade {
		// The application reads the quality level when it starts serving
		// a request and does proportionally less work.
		next = &sim.Hold{Engine: e, Queue: server, Next: &sim.Delay{Engine: e,
			Fn: func(_ time.Time, r *sim.Request) (time.Duration, bool) {
				return sim.Seconds(r.Demand * quality()), true
			}}}
	}
	run.loop, err = newStaged(e, stage.Options{Name: "stage", Controller: cfg, ClassNames: classes, Burst: c.Burst}, next, nil)
	if err != nil {
		return nil, err
	}
	run.loop.entry.ExactTrigger = true
	quality = run.loop.st.Quality
	for i, g := range groups {
		u, err := sim.NewUsers(e, sim.UsersConfig{Name: g.name, Count: g.count, Think: think, RetryWait: c.RetryWait,
			Types: []sim.RequestType{{Name: "request", Demand: svc}}, Class: g.class, ClientBase: i * 1000000,
			Target: run.loop.entry, OnFinish: run.log.add})
		if err != nil {
			return nil, err
		}
		u.Start()
	}
	e.Run(until)
	return run, nil
}

// runSEDAVariants runs the stage once per variant (runSEDAStage: fresh
// users and server), with the controller configuration cfgOf gives it.
func runSEDAVariants(seed uint64, c figure.SEDAStageParams, vars []*sedaVariant, cfgOf func(*sedaVariant) control.Config,
	classes []string, groups []userGroup, degrade bool, until time.Duration) error {
	for _, v := range vars {
		var err error
		if v.run, err = runSEDAStage(seed, c, cfgOf(v), classes, groups, degrade, until); err != nil {
			return fmt.Errorf("variant %s: %w", v.name, err)
		}
	}
	return nil
}

// setSpikeMetrics sets a variant's metrics over the spike [from, to):
// the p90 and mean response time of the requests that finished in it,
// the fraction rejected (of offered), the goodput, the goodput within
// the target and, for a spike longer than 2 min, the p90 after its first
// minute (its steady part). Each is named base+infix+suffix
// (p90_ms_spike_uncontrolled).
func (v *sedaVariant) setSpikeMetrics(s *report.Summary, infix string, from, to, target time.Duration, rejected, offered float64) {
	rts := v.run.log.completed(-1, from, to)
	s.Set("p90_ms"+infix+v.suffix, ms(monitor.Percentile(rts, 0.9)))
	s.Set("mean_rt_ms"+infix+v.suffix, ms(report.Mean(rts)))
	s.Set("reject_fraction"+infix+v.suffix, ratio(rejected, offered))
	s.Set("goodput_rps"+infix+v.suffix, float64(len(rts))/(to-from).Seconds())
	s.Set("goodput_within_target_rps"+infix+v.suffix, float64(countAtMost(rts, target.Seconds()))/(to-from).Seconds())
	if to-from > 2*time.Minute {
		s.Set("p90_ms"+infix+"_after_60s"+v.suffix, ms(monitor.Percentile(v.run.log.completed(-1, from+time.Minute, to), 0.9)))
	}
}

func runSEDASpike(env Env, c sedaSpikeParams) (*figure.Result, error) {
	end := c.End()
	users, err := c.Schedule()
	if err != nil {
		return nil, err
	}
	groups := []userGroup{{name: "users", count: users}}
	vars := []*sedaVariant{{name: "controlled", label: fmt.Sprintf("SEDA AIMD, p90 target %v", c.stage.Target)},
		{name: "uncontrolled", suffix: "_uncontrolled", label: "no admission control"}}
	if err := runSEDAVariants(env.Seed, c.stage, vars, func(v *sedaVariant) control.Config {
		if v.name == "controlled" {
			sc := sedaConfig(c.stage)
			return &sc
		}
		none := control.DefaultNoneConfig()
		return &none
	}, nil, groups, false, end); err != nil {
		return nil, err
	}
	res := newResult(env)
	s := res.Summary
	from, to := c.SpikeStart, c.SpikeStart+c.SpikeLen
	ts := report.NewTable("variant", "time_s", "users", "offered", "admitted", "rejected", "completed",
		"mean_rt_ms", "p90_rt_ms", "utilization", "queue", "rate_rps")
	for _, v := range vars {
		rows, steps, g := v.run.seconds(-1), v.run.loop.steps, v.run.gauges
		k := 0
		rate := v.run.loop.initial()
		for i, w := range rows {
			// The rate in force at the row's end: the last controller step
			// at or before it.
			for k < len(steps) && steps[k].end() <= w.end {
				rate = steps[k].Decision.New
				k++
			}
			if v.name == "uncontrolled" {
				rate = 0
			}
			if err := ts.Append(v.name, w.end.Seconds(), int(users.At(w.start)), w.offered, w.admitted, w.rejected, w.completed,
				ms(w.meanRT), ms(w.p90RT), g.at(i).util, g.at(i).queue, rate); err != nil {
				return nil, err
			}
		}
		var offered, rejected float64
		for _, w := range rows {
			if w.start >= from && w.end <= to {
				offered += float64(w.offered)
				rejected += float64(w.rejected)
			}
		}
		v.setSpikeMetrics(s, "_spike", from, to, c.stage.Target, rejected, offered)
	}
	s.Set("target_ms", ms(c.stage.Target.Seconds()))
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", controllerTable(vars[0].run.loop.steps))
	res.Key = []string{"p90_ms_spike", "reject_fraction_spike", "p90_ms_spike_uncontrolled"}
	res.Checks = figure.SEDASpikeChecks(s)

	// Fig. 10: p90 per second and the fraction rejected.
	p90 := report.Panel{Title: fmt.Sprintf("massive load spike: %d → %d users at t = %gs", c.BaseUsers, c.SpikeUsers, c.SpikeStart.Seconds()),
		XLabel: "time (s)", YLabel: "p90 RT (ms)", LogY: true, LegendLeft: true,
		HLines: []report.RefLine{{Value: ms(c.stage.Target.Seconds()), Label: fmt.Sprintf("target %v", c.stage.Target)}},
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	rej := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.05, LegendLeft: true,
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	for _, v := range vars {
		rows := v.run.seconds(-1)
		x, y, r := make([]float64, len(rows)), make([]float64, len(rows)), make([]float64, len(rows))
		for i, w := range rows {
			x[i], y[i], r[i] = w.end.Seconds(), ms(w.p90RT), ratio(float64(w.rejected), float64(w.offered))
		}
		p90.Series = append(p90.Series, report.Series{Label: v.label, X: x, Y: y})
		if v.name == "controlled" {
			rej.Series = append(rej.Series, report.Series{Label: "rejected / offered, " + v.label, X: x, Y: r})
		}
	}
	res.AddFigure("spike.png", &report.Figure{PanelHeight: 3.4, Panels: []report.Panel{p90, rej}})
	res.AddFigure("controller.png", controllerFigure(vars[0].run.loop.steps, c.stage.Target, "SEDA controller trace (Fig. 7)"))
	return res, nil
}

// controllerTable lists every controller run: when, class, samples, the
// p90 it saw, and the resulting rate (and quality).
func controllerTable(steps []step) *report.Table {
	t := report.NewTable("time_s", "class", "samples", "p90_rt_ms", "rate_rps", "quality", "gate_off", "acted")
	for _, st := range steps {
		d := st.Decision
		_ = t.Append(st.end().Seconds(), d.Class, d.Inputs.Samples, ms(d.Inputs.P90RT), d.New, d.Quality, d.GateOff, d.Acted)
	}
	return t
}

// controllerFigure draws the p90 each run saw and the token rate it set.
func controllerFigure(steps []step, target time.Duration, title string) *report.Figure {
	var x, p, r []float64
	for _, st := range steps {
		x = append(x, st.end().Seconds())
		p = append(p, ms(st.in().P90RT))
		r = append(r, st.Decision.New)
	}
	return &report.Figure{PanelHeight: 3, Panels: []report.Panel{
		{Title: title, XLabel: "time (s)", YLabel: "p90 per run (ms)", LogY: true, LegendLeft: true,
			Series: []report.Series{{Label: "p90 of the samples of each run", X: x, Y: p}},
			HLines: []report.RefLine{{Value: ms(target.Seconds()), Label: fmt.Sprintf("target %v", target)}}},
		{XLabel: "time (s)", YLabel: "token rate (req/s)", LogY: true, LegendLeft: true,
			Series: []report.Series{{Label: "admission rate", X: x, Y: r}}},
	}}
}
