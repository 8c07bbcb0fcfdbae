// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/monitor"
)

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
