// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
)

// seda-classes is Welsh & Culler's Figs. 14–15, live: 128 low-priority
// users load one FIFO server; 128 high-priority users join and leave. The
// class travels in the X-Sluice-Class header, which the proxy's class
// rule believes from any client (a test set-up; production rules trust
// only configured proxies).

// classPolicy is the two-class SEDA policy; differentiate selects one
// controller and bucket per class (true) or one shared (false).
func classPolicy(p sedaLive, differentiate bool) policy.Config {
	pol := sedaPolicy(p)
	pol.Classes = policy.ClassesConfig{Order: []string{"high", "low"}, Default: "low",
		Rules: []policy.ClassRule{{Class: "high", Header: &policy.HeaderMatch{Name: "X-Sluice-Class", Value: "high", Trust: "any"}}}}
	pol.Stages[0].Differentiate = &differentiate
	return pol
}

// runSEDAClasses is the experiment in four steps: plan the classes' load
// (the figure's, compressed by the time scale) and the two variants, run
// them on fresh backends, analyse them into the summary's metrics, and
// render the tables, plots, checks and setup.
func runSEDAClasses(ctx context.Context, env *Env) (*figure.Result, error) {
	pl, err := planSEDAClasses(env)
	if err != nil {
		return nil, err
	}
	for _, v := range pl.vars {
		var loads []loadgen.Config
		for i, sched := range []dist.Schedule{pl.high, pl.low} {
			cfg, err := closedLoad("classes", env.Seed+uint64(i)*1000, sched, pl.p.think, pl.p.retry, pl.p.timeout, pl.length,
				[]loadgen.Weighted{{Name: sedaClassNames[i], Weight: 1}})
			if err != nil {
				return nil, err
			}
			loads = append(loads, cfg)
		}
		run := proxied{newBackend: queueBackend(pl.qcfg), maxConcurrency: 1024, policy: classPolicy(pl.p, v.diff),
			phase: phase{name: v.name, length: pl.length, loads: loads, grace: 2 * time.Second,
				users: func(t time.Duration) float64 { return pl.low.At(t) + pl.high.At(t) }}}
		if v.res, err = run.run(ctx, env); err != nil {
			return nil, err
		}
	}
	return finish(env, func(s *report.Summary) { analyseSEDAClasses(s, pl) },
		func(r *figure.Result) error { return renderSEDAClasses(r, pl) })
}

// sedaClassNames are the classes, highest first; a load group's index is
// its class's.
var sedaClassNames = []string{"high", "low"}

// classesPlan is the classes experiment's plan: the compressed stage and
// load, the users of each class over time and the two variants.
type classesPlan struct {
	p                          sedaLive
	users                      float64
	highStart, highEnd, length time.Duration
	low, high                  dist.Schedule
	qcfg                       testbed.QueueConfig
	vars                       []*classesVariant
}

// classesVariant is one run: with or without differentiation.
type classesVariant struct {
	name, suffix, label string
	diff                bool
	res                 *phaseResult
}

func planSEDAClasses(env *Env) (*classesPlan, error) {
	p, c, scale := sedaLiveParams(figure.SEDAClassesStage), figure.DefaultSEDAClassesLoad(), sedaTimeScale
	pl := &classesPlan{p: p, users: float64(c.Users),
		highStart: pick(env, scaled(c.HighStart, scale), 6*time.Second),
		highEnd:   pick(env, scaled(c.HighEnd, scale), 18*time.Second),
		length:    pick(env, scaled(c.Duration, scale), 24*time.Second)}
	// Each class joins over one retry wait in 8 steps, not in one instant:
	// users that join together and are rejected together retry together
	// after the load generator's fixed wait, and stay in lockstep against
	// a 5-token bucket for the rest of the run (the simulator draws the
	// wait from 4–6 s for the same reason). Joining over one wait spreads
	// their phases as real clients' would be.
	var err error
	if pl.low, err = stepSchedule(rampIn(0, pl.users, p.retry, 8)...); err != nil {
		return nil, err
	}
	if pl.high, err = stepSchedule(append(rampIn(pl.highStart, pl.users, p.retry, 8), pl.highEnd.Seconds(), 0)...); err != nil {
		return nil, err
	}
	pl.qcfg = testbed.DefaultQueueConfig()
	pl.qcfg.Workers, pl.qcfg.Discipline, pl.qcfg.Service, pl.qcfg.Seed = 1, testbed.DisciplineFIFO, "exp:"+p.service.String(), env.Seed
	pl.vars = []*classesVariant{
		{name: "differentiated", label: "with service differentiation", diff: true},
		{name: "undifferentiated", suffix: "_nodiff", label: "without differentiation"},
	}
	return pl, nil
}

// analyseSEDAClasses sets, for each variant and class, the fraction
// rejected and the p90 while both classes are active, and the difference
// of the classes' rejections.
func analyseSEDAClasses(s *report.Summary, pl *classesPlan) {
	for _, v := range pl.vars {
		for cl, name := range sedaClassNames {
			k := inGroup(uint8(cl))
			c := countSent(v.res.recs, pl.highStart, pl.highEnd, k)
			s.Set("reject_"+name+v.suffix, c.rejectFraction())
			s.Set("p90_ms_"+name+v.suffix, monitor.Percentile(okLatencies(v.res.recs, pl.highStart, pl.highEnd, k), 0.9))
		}
		s.Set("reject_diff"+v.suffix, s.Metric("reject_low"+v.suffix)-s.Metric("reject_high"+v.suffix))
	}
	s.Set("target_ms", msOf(pl.p.target))
	s.Set("time_scale", sedaTimeScale)
}

// renderSEDAClasses writes the per-second and controller tables, the
// plots of Figs. 14–15, the checks and the setup.
func renderSEDAClasses(res *figure.Result, pl *classesPlan) error {
	s, p, vars, names, scale := res.Summary, pl.p, pl.vars, sedaClassNames, sedaTimeScale
	users, highStart, highEnd, length := pl.users, pl.highStart, pl.highEnd, pl.length
	ts := report.NewTable("variant", "class", "time_s", "users", "offered", "ok", "rejected", "timeouts", "errors",
		"mean_rt_ms", "p90_rt_ms", "rate_rps")
	fig := &report.Figure{PanelHeight: 3}
	for _, v := range vars {
		panel := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.05, LegendLeft: true,
			VLines: []report.RefLine{{Value: highStart.Seconds()}, {Value: highEnd.Seconds()}},
			Title: fmt.Sprintf("%s: rejected %.1f%% (low) / %.1f%% (high) while both active", v.label,
				100*s.Metric("reject_low"+v.suffix), 100*s.Metric("reject_high"+v.suffix))}
		for cl, name := range names {
			bins := binRecords(v.res.recs, time.Second, length, 0, inGroup(uint8(cl)))
			sched := []func(time.Duration) float64{pl.high.At, pl.low.At}[cl]
			for _, b := range bins {
				at := time.Duration((b.t + 1) * float64(time.Second))
				rate := settingAt(v.res.states, at, func(st *stateSample) float64 {
					if cl < len(st.classRates) {
						return st.classRates[cl]
					}
					return st.setting
				})
				if err := ts.Append(v.name, name, b.t, sched(time.Duration(b.t*float64(time.Second))), b.offered, b.ok, b.rejected,
					b.timeouts, b.errors, b.mean, b.p90, rate); err != nil {
					return err
				}
			}
			x, y := binColumns(bins, (*bin).rejectedShare)
			panel.Series = append(panel.Series, report.Series{Label: name + " priority", X: x, Y: y})
		}
		fig.Panels = append(fig.Panels, panel)
	}
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", controllerTable(vars[0].res))
	res.AddFigure("classes.png", fig)

	// The class rates of the differentiated run (Fig. 15's lower half).
	rates := report.Panel{Title: "per-class admission rates, with differentiation", XLabel: "time (s)", YLabel: "token rate (req/s)",
		LogY: true, LegendLeft: true, VLines: []report.RefLine{{Value: highStart.Seconds()}, {Value: highEnd.Seconds()}}}
	for cl, name := range names {
		var x, y []float64
		for _, st := range vars[0].res.states {
			if cl < len(st.classRates) {
				x, y = append(x, st.t.Seconds()), append(y, st.classRates[cl])
			}
		}
		rates.Series = append(rates.Series, report.Series{Label: name + " priority", X: x, Y: y})
	}
	res.AddFigure("class_rates.png", &report.Figure{PanelHeight: 3, Panels: []report.Panel{rates}})

	res.Checks = figure.SEDAClassesChecks(s)
	res.Key = []string{"reject_low", "reject_high", "reject_diff", "reject_diff_nodiff"}
	res.Setup = []string{
		fmt.Sprintf("Backend: the queue testbed, one FIFO server with exponential service of mean %v (%.0f req/s).", p.service, 1/p.service.Seconds()),
		fmt.Sprintf("Load: %g low-priority closed-loop users throughout and %g high-priority users from t = %gs to %gs (%gs in all), each class joining over %v (one retry wait, so that retries are not in lockstep); think time exponential, mean %v; a rejected user waits %v; the class is sent in X-Sluice-Class.",
			users, users, highStart.Seconds(), highEnd.Seconds(), length.Seconds(), p.retry, p.think, p.retry),
		fmt.Sprintf("Proxy: classes [high, low], one seda stage with p90 target %v for both classes (controller timeout %v); differentiate: true runs one controller and token bucket per class (lower classes cut first, adjlo_d 10, lc_thresh 20), false one shared.",
			p.target, scaled(time.Second, scale)),
		fmt.Sprintf("Time compression %g: the simulator's 20 ms stage with a 1 s target (the paper's slow e-mail service had a 10 s target), 20 ms think time, 5 s retry wait and the 100–200 s window of 300 s are scaled by %g; the controller's rates (adj_i, rate_min, rate_max) are raised by 1/%g.", scale, scale, scale),
	}
	return nil
}

// rampIn returns schedule pairs (start s, users) that reach n users from
// start over the given time in equal steps (0 users before start).
func rampIn(start time.Duration, n float64, over time.Duration, steps int) []float64 {
	var pairs []float64
	if start > 0 {
		pairs = append(pairs, 0, 0)
	}
	for k := 1; k <= steps; k++ {
		pairs = append(pairs, (start + time.Duration(k-1)*over/time.Duration(steps)).Seconds(), n*float64(k)/float64(steps))
	}
	return pairs
}
