// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
)

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
