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

// seda-classes reproduces Welsh & Culler's Figs. 14 and 15
// (docs/algorithms.md §5): 128 low-priority users load one bottleneck
// stage; 128 high-priority users join at t = 100 s and leave at t = 200 s.
// With service differentiation the stage runs SEDA's multiclass controller
// (one token bucket per class, lower classes cut first); without it, one
// controller and one bucket serve everybody.

type sedaClassesParams struct {
	stage figure.SEDAStageParams
	figure.SEDAClassesLoad
}

// sedaClasses declares the parameters of seda-classes and returns its run.
func sedaClasses(ps *Params) RunFunc {
	var c sedaClassesParams
	figure.DeclareSEDAStage(ps, &c.stage, figure.SEDAClassesStage)
	figure.DeclareSEDAClassesLoad(ps, &c.SEDAClassesLoad)
	return func(env Env) (*figure.Result, error) { return runSEDAClasses(env, c) }
}

func runSEDAClasses(env Env, c sedaClassesParams) (*figure.Result, error) {
	if c.HighEnd <= c.HighStart {
		return nil, paramErrorf("high_end %v must be after high_start %v", c.HighEnd, c.HighStart)
	}
	low, err := dist.ConstantSchedule(float64(c.Users))
	if err != nil {
		return nil, err
	}
	high, err := dist.NewSchedule(dist.Segment{Start: 0, Rate: 0}, dist.Segment{Start: c.HighStart, Rate: float64(c.Users)},
		dist.Segment{Start: c.HighEnd, Rate: 0})
	if err != nil {
		return nil, err
	}
	// Class 0 is the highest priority.
	groups := []userGroup{{name: "high", class: 0, count: high}, {name: "low", class: 1, count: low}}
	vars := []*sedaVariant{
		{name: "differentiated", label: "with service differentiation"},
		{name: "undifferentiated", suffix: "_nodiff", label: "without differentiation"},
	}
	// The stage has both classes either way: with differentiation its
	// controller has a rate per class; without, one controller and one
	// bucket see every request (the stage feeds it both classes' samples).
	names := []string{"high", "low"}
	if err := runSEDAVariants(env.Seed, c.stage, vars, func(v *sedaVariant) control.Config {
		cfg := sedaConfig(c.stage)
		if v.name == "differentiated" {
			cfg.Classes = 2
			cfg.ClassTargets = []time.Duration{c.stage.Target, c.stage.Target}
		}
		return &cfg
	}, names, groups, false, c.Duration); err != nil {
		return nil, err
	}

	res := newResult(env)
	s := res.Summary
	ts := report.NewTable("variant", "class", "time_s", "users", "offered", "admitted", "rejected", "completed",
		"mean_rt_ms", "p90_rt_ms", "rate_rps")
	for _, v := range vars {
		steps := v.run.loop.steps
		for cl := range names {
			rows := v.run.seconds(cl)
			k := 0
			rate := c.stage.InitialRate
			var offered, rejected float64
			for _, w := range rows {
				for k < len(steps) && steps[k].end() <= w.end {
					d := steps[k].Decision
					if d.ClassRates != nil {
						rate = d.ClassRates[cl]
					} else {
						rate = d.New
					}
					k++
				}
				users := int(groups[cl].count.At(w.start))
				if err := ts.Append(v.name, names[cl], w.end.Seconds(), users, w.offered, w.admitted, w.rejected, w.completed,
					ms(w.meanRT), ms(w.p90RT), rate); err != nil {
					return nil, err
				}
				if w.start >= c.HighStart && w.end <= c.HighEnd {
					offered += float64(w.offered)
					rejected += float64(w.rejected)
				}
			}
			s.Set("reject_"+names[cl]+v.suffix, ratio(rejected, offered))
			rts := v.run.log.completed(cl, c.HighStart, c.HighEnd)
			s.Set("p90_ms_"+names[cl]+v.suffix, ms(monitor.Percentile(rts, 0.9)))
		}
		s.Set("reject_diff"+v.suffix, s.Metric("reject_low"+v.suffix)-s.Metric("reject_high"+v.suffix))
	}
	s.Set("target_ms", ms(c.stage.Target.Seconds()))
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", controllerTable(vars[0].run.loop.steps))
	res.Key = []string{"reject_low", "reject_high", "reject_diff", "reject_diff_nodiff"}
	res.Checks = figure.SEDAClassesChecks(s)

	fig := &report.Figure{PanelHeight: 3}
	for _, v := range vars {
		rej := report.Panel{Title: fmt.Sprintf("%s: rejected %s (low) / %s (high) while both active", v.label,
			pct(s.Metric("reject_low"+v.suffix)), pct(s.Metric("reject_high"+v.suffix))),
			XLabel: "time (s)", YLabel: "fraction rejected (5 s)", YMin: 0, YMax: 1.35,
			VLines: []report.RefLine{{Value: c.HighStart.Seconds()}, {Value: c.HighEnd.Seconds()}}}
		p90 := report.Panel{XLabel: "time (s)", YLabel: "p90 RT (ms)", LogY: true, LegendBottom: true,
			HLines: []report.RefLine{{Value: ms(c.stage.Target.Seconds()), Label: fmt.Sprintf("target %v", c.stage.Target)}},
			VLines: []report.RefLine{{Value: c.HighStart.Seconds()}, {Value: c.HighEnd.Seconds()}}}
		for cl := range names {
			x, y, p := fiveSecond(v.run.seconds(cl))
			rej.Series = append(rej.Series, report.Series{Label: names[cl] + " priority", X: x, Y: y})
			p90.Series = append(p90.Series, report.Series{Label: names[cl] + " priority", X: x, Y: p})
		}
		fig.Panels = append(fig.Panels, rej, p90)
	}
	res.AddFigure("classes.png", fig)
	return res, nil
}

// fiveSecond aggregates 1 s rows into 5 s buckets: the bucket's end time,
// its fraction rejected and the largest per-second p90 in it (ms).
func fiveSecond(rows []second) (x, rej, p90 []float64) {
	for i := 0; i < len(rows); i += 5 {
		var off, r float64
		p := -1.0
		for _, w := range rows[i:min(i+5, len(rows))] {
			off += float64(w.offered)
			r += float64(w.rejected)
			if finite(w.p90RT) && ms(w.p90RT) > p {
				p = ms(w.p90RT)
			}
		}
		if p < 0 {
			p = nan()
		}
		x = append(x, rows[min(i+5, len(rows))-1].end.Seconds())
		rej = append(rej, ratio(r, off))
		p90 = append(p90, p)
	}
	return x, rej, p90
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// seda-degradation reproduces Welsh & Culler's Figs. 12 and 13
// (docs/algorithms.md §5): a single CPU-bound bottleneck stage whose work
// per request scales with a quality level the controller sets, under a
// spike of 3 → 1000 users; no control, degradation alone, and degradation
// that re-enables admission control at the lowest quality.

type sedaDegradeParams struct {
	figure.SEDASpikeLoad
	stage figure.SEDAStageParams
	qmin  float64
}

// sedaDegradation declares the parameters of seda-degradation and returns its run.
func sedaDegradation(ps *Params) RunFunc {
	var c sedaDegradeParams
	figure.DeclareSEDAStage(ps, &c.stage, figure.SEDADegradationStage)
	ps.Float(&c.qmin, "quality_min", 0.1, 0.001, 0.999, "lowest quality level q_min (controller default 0.1)")
	figure.DeclareSEDASpikeLoad(ps, &c.SEDASpikeLoad)
	return func(env Env) (*figure.Result, error) { return runSEDADegradation(env, c) }
}

func runSEDADegradation(env Env, c sedaDegradeParams) (*figure.Result, error) {
	end := c.End()
	users, err := c.Schedule()
	if err != nil {
		return nil, err
	}
	groups := []userGroup{{name: "users", count: users}}
	vars := []*sedaVariant{
		{name: "none", suffix: "_none", label: "no control"},
		{name: "degrade", suffix: "_degrade_only", label: "degradation alone"},
		{name: "degrade_admission", label: "degradation + admission control"},
	}
	if err := runSEDAVariants(env.Seed, c.stage, vars, func(v *sedaVariant) control.Config {
		if v.name == "none" {
			none := control.DefaultNoneConfig()
			return &none
		}
		sc := sedaConfig(c.stage)
		sc.Degrade.Enabled = true
		sc.Degrade.QualityMin = c.qmin
		sc.Degrade.Admission = v.name == "degrade_admission"
		return &sc
	}, nil, groups, true, end); err != nil {
		return nil, err
	}

	res := newResult(env)
	s := res.Summary
	from, to := c.SpikeStart, c.SpikeStart+c.SpikeLen
	ts := report.NewTable("variant", "time_s", "users", "offered", "admitted", "rejected", "completed",
		"mean_rt_ms", "p90_rt_ms", "utilization", "queue", "quality", "gate_on", "rate_rps")
	for _, v := range vars {
		rows, steps, g := v.run.seconds(-1), v.run.loop.steps, v.run.gauges
		k := 0
		q, gateOn, rate := 1.0, false, 0.0
		var qSum, qN, offered, rejected float64
		for i, w := range rows {
			for k < len(steps) && steps[k].end() <= w.end {
				d := steps[k].Decision
				if d.Quality > 0 {
					q = d.Quality
				}
				gateOn = !d.GateOff
				rate = d.New
				if d.GateOff {
					rate = 0
				}
				k++
			}
			if err := ts.Append(v.name, w.end.Seconds(), int(users.At(w.start)), w.offered, w.admitted, w.rejected, w.completed,
				ms(w.meanRT), ms(w.p90RT), g.at(i).util, g.at(i).queue, q, gateOn, rate); err != nil {
				return nil, err
			}
			if w.start >= from && w.end <= to {
				qSum += q
				qN++
				offered += float64(w.offered)
				rejected += float64(w.rejected)
			}
		}
		s.Set("quality_mean"+v.suffix, ratio(qSum, qN))
		v.setSpikeMetrics(s, "", from, to, c.stage.Target, rejected, offered)
	}
	s.Set("target_ms", ms(c.stage.Target.Seconds()))
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", controllerTable(vars[2].run.loop.steps))
	res.Key = []string{"p90_ms", "p90_ms_degrade_only", "p90_ms_none", "reject_fraction", "quality_mean"}
	res.Checks = figure.SEDADegradationChecks(s, time.Minute)

	p90 := report.Panel{Title: fmt.Sprintf("service degradation under a %d → %d user spike", c.BaseUsers, c.SpikeUsers),
		XLabel: "time (s)", YLabel: "p90 RT (ms)", LogY: true, LegendBottom: true,
		HLines: []report.RefLine{{Value: ms(c.stage.Target.Seconds()), Label: fmt.Sprintf("target %v", c.stage.Target)}},
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	qual := report.Panel{XLabel: "time (s)", YLabel: "quality level", YMin: 0, YMax: 1.4,
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	rej := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.3,
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	for _, v := range vars {
		var x, y, r []float64
		for _, w := range v.run.seconds(-1) {
			x = append(x, w.end.Seconds())
			y = append(y, ms(w.p90RT))
			r = append(r, ratio(float64(w.rejected), float64(w.offered)))
		}
		p90.Series = append(p90.Series, report.Series{Label: v.label, X: x, Y: y})
		if v.name != "none" {
			var qx, qy []float64
			for _, st := range v.run.loop.steps {
				qx = append(qx, st.end().Seconds())
				qy = append(qy, st.Decision.Quality)
			}
			qual.Series = append(qual.Series, report.Series{Label: v.label, X: qx, Y: qy})
		}
		if v.name == "degrade_admission" {
			rej.Series = append(rej.Series, report.Series{Label: v.label, X: x, Y: r})
		}
	}
	// Keep the colours of the p90 panel: pad the other panels' series.
	qual.Series = append([]report.Series{{}}, qual.Series...)
	rej.Series = append([]report.Series{{}, {}}, rej.Series...)
	res.AddFigure("degradation.png", &report.Figure{PanelHeight: 3, Panels: []report.Panel{p90, qual, rej}})
	return res, nil
}
