package live

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/dist"
	"github.com/sluicehq/sluice/figure"
	"github.com/sluicehq/sluice/loadgen"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/report"
	"github.com/sluicehq/sluice/testbed"
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

func runSEDAClasses(ctx context.Context, env *Env) (*figure.Result, error) {
	p := sedaLiveParams(figure.SEDAClassesStage)
	users := 128.0
	scale := sedaTimeScale
	highStart := pick(env, scaled(100*time.Second, scale), 6*time.Second)
	highEnd := pick(env, scaled(200*time.Second, scale), 18*time.Second)
	length := pick(env, scaled(300*time.Second, scale), 24*time.Second)
	// Each class joins over one retry wait in 8 steps, not in one instant:
	// users that join together and are rejected together retry together
	// after the load generator's fixed wait, and stay in lockstep against
	// a 5-token bucket for the rest of the run (the simulator draws the
	// wait from 4–6 s for the same reason). Joining over one wait spreads
	// their phases as real clients' would be.
	low, err := stepSchedule(rampIn(0, users, p.retry, 8)...)
	if err != nil {
		return nil, err
	}
	high, err := stepSchedule(append(rampIn(highStart, users, p.retry, 8), highEnd.Seconds(), 0)...)
	if err != nil {
		return nil, err
	}
	qcfg := testbed.DefaultQueueConfig()
	qcfg.Workers, qcfg.Discipline, qcfg.Service, qcfg.Seed = 1, testbed.DisciplineFIFO, "exp:"+p.service.String(), env.Seed
	names := []string{"high", "low"} // load group index = class index (0 is the highest)

	type variant struct {
		name, suffix, label string
		diff                bool
		res                 *phaseResult
	}
	vars := []*variant{
		{name: "differentiated", label: "with service differentiation", diff: true},
		{name: "undifferentiated", suffix: "_nodiff", label: "without differentiation"},
	}
	for _, v := range vars {
		var loads []loadgen.Config
		for i, sched := range []dist.Schedule{high, low} {
			cfg, err := closedLoad("classes", env.Seed+uint64(i)*1000, sched, p.think, p.retry, p.timeout, length,
				[]loadgen.Weighted{{Name: names[i], Weight: 1}})
			if err != nil {
				return nil, err
			}
			loads = append(loads, cfg)
		}
		run := proxied{newBackend: queueBackend(qcfg), maxConcurrency: 1024, policy: classPolicy(p, v.diff),
			phase: phase{name: v.name, length: length, loads: loads, grace: 2 * time.Second,
				users: func(t time.Duration) float64 { return low.At(t) + high.At(t) }}}
		if v.res, err = run.run(ctx, env); err != nil {
			return nil, err
		}
	}

	s := newSummary(env)
	res := &figure.Result{Bundle: report.NewBundle(s)}
	ts := report.NewTable("variant", "class", "time_s", "users", "offered", "ok", "rejected", "timeouts", "errors",
		"mean_rt_ms", "p90_rt_ms", "rate_rps")
	fig := &report.Figure{PanelHeight: 3}
	for _, v := range vars {
		panel := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.05, LegendLeft: true,
			VLines: []report.RefLine{{Value: highStart.Seconds()}, {Value: highEnd.Seconds()}}}
		for cl, name := range names {
			k := inGroup(uint8(cl))
			bins := binRecords(v.res.recs, time.Second, length, 0, k)
			sched := []func(time.Duration) float64{high.At, low.At}[cl]
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
					return nil, err
				}
			}
			c := countSent(v.res.recs, highStart, highEnd, k)
			s.Set("reject_"+name+v.suffix, c.rejectFraction())
			s.Set("p90_ms_"+name+v.suffix, monitor.Percentile(okLatencies(v.res.recs, highStart, highEnd, k), 0.9))
			x, y := binColumns(bins, (*bin).rejectedShare)
			panel.Series = append(panel.Series, report.Series{Label: name + " priority", X: x, Y: y})
		}
		s.Set("reject_diff"+v.suffix, s.Metric("reject_low"+v.suffix)-s.Metric("reject_high"+v.suffix))
		panel.Title = fmt.Sprintf("%s: rejected %.1f%% (low) / %.1f%% (high) while both active", v.label,
			100*s.Metric("reject_low"+v.suffix), 100*s.Metric("reject_high"+v.suffix))
		fig.Panels = append(fig.Panels, panel)
	}
	s.Set("target_ms", msOf(p.target))
	s.Set("time_scale", scale)
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
		fmt.Sprintf("Time compression %g: the simulator's 20 ms stage with a 1 s target (the paper's slow e-mail service had a 10 s target), 20 ms think time, 5 s retry wait and the 100–200 s window of 300 s are scaled by %g.", scale, scale),
	}
	return res, nil
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
