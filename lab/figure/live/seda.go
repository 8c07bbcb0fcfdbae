// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
)

// seda-spike is Welsh & Culler's Fig. 10 (and the controller trace of
// Fig. 7), live: a flash crowd of 3 → 1000 closed-loop users against one
// bottleneck (the queue testbed: one FIFO server), through the proxy with
// a SEDA stage on the p90, and through the proxy without admission
// control.

// sedaTimeScale compresses the SEDA experiments: the simulator's 20 ms
// stage (50 req/s) becomes 5 ms (200 req/s), the 1 s target 250 ms, the
// 20 ms think time 5 ms and the 5 s wait after a rejection 1.25 s. The
// controller's timeout shrinks with them; nreq stays 100, which at the
// 4× higher rate is the same time between runs.
const sedaTimeScale = 0.25

// sedaLive are the compressed parameters shared by the SEDA experiments.
type sedaLive struct {
	service time.Duration // mean of the exponential service time
	target  time.Duration // p90 target
	think   time.Duration // mean of the exponential think time
	retry   time.Duration // wait of a rejected user
	timeout time.Duration // client timeout
	// initialRate is the controller's starting rate in req/s: the
	// capacity of the stage at full quality, as in the simulator (which an
	// operator sizing the stage knows; the degradation controller ignores
	// it, it starts with admission control off).
	initialRate float64
	// adjI, rateMin and rateMax are the controller's other rates (req/s):
	// its additive step adj_i and its bounds, the simulator's (the paper's
	// 2, 0.05 and 5000) raised in proportion like the initial rate. Left
	// at the paper's values, a live run's rate climbed back from a cut 4×
	// slower in the figure's time than the simulator's (seda-degradation,
	// 2026-11-27: 48.6 → 335 req/s over 43 s, 6.7 req/s per second where
	// the simulator's 1.6 req/s per paper-second is 25.6).
	adjI, rateMin, rateMax float64
}

// sedaLiveParams are a SEDA figure's stage parameters, declared once in
// package figure (the simulator's defaults d), compressed by sedaTimeScale:
// service, target, think time and the mean retry wait scaled, the initial
// rate raised in proportion (for the 20 ms stage, its capacity).
func sedaLiveParams(d figure.SEDADefaults) sedaLive {
	c, s, ctl := figure.DefaultSEDAStage(d), sedaTimeScale, control.DefaultSEDAConfig()
	return sedaLive{
		service:     scaled(c.ServiceTime, s),
		initialRate: c.InitialRate / s,
		adjI:        ctl.AdjI / s,
		rateMin:     ctl.RateMin / s,
		rateMax:     ctl.RateMax / s,
		target:      scaled(c.Target, s),
		think:       scaled(c.Think, s),
		retry:       scaled(time.Duration(c.RetryWait.Mean()*float64(time.Second)), s),
		timeout:     30 * time.Second,
	}
}

// sedaConfig is the SEDA controller of the live experiments: the p90
// target, the timeout (1 s of paper time) and the rates (initial, adj_i,
// rate_min, rate_max), compressed as the simulator's stage is.
func sedaConfig(p sedaLive) *control.SEDAConfig {
	c := control.DefaultSEDAConfig()
	c.Target, c.Timeout, c.InitialRate = p.target, scaled(time.Second, sedaTimeScale), p.initialRate
	c.AdjI, c.RateMin, c.RateMax = p.adjI, p.rateMin, p.rateMax
	return &c
}

// sedaPolicy is the single-stage policy with the SEDA controller.
func sedaPolicy(p sedaLive) policy.Config { return mainPolicy(sedaConfig(p)) }

// nonePolicy is the single-stage policy without admission control.
func nonePolicy() policy.Config {
	c := control.DefaultNoneConfig()
	return mainPolicy(&c)
}

// runSEDASpike is the experiment in four steps: plan the crowd (the
// figure's 3 → 1000 users, on a shorter timeline than the simulator's)
// and the two variants, run them on fresh backends, analyse the runs into
// the summary's metrics, and render the tables, plots, checks and setup.
func runSEDASpike(ctx context.Context, env *Env) (*figure.Result, error) {
	pl, err := planSEDASpike(env)
	if err != nil {
		return nil, err
	}
	for _, v := range pl.vars {
		load, err := closedLoad("spike", env.Seed, pl.users, pl.p.think, pl.p.retry, pl.p.timeout, pl.length, nil)
		if err != nil {
			return nil, err
		}
		run := proxied{newBackend: queueBackend(pl.qcfg), maxConcurrency: 2048, policy: spikePolicy(v.controller, pl.p),
			phase: phase{name: v.name, length: pl.length, loads: []loadgen.Config{load}, users: pl.users.At}}
		if v.res, err = run.run(ctx, env); err != nil {
			return nil, err
		}
	}
	return finish(env, func(s *report.Summary) { analyseSEDASpike(s, pl) },
		func(r *figure.Result) error { return renderSEDASpike(r, pl) })
}

// sedaSpikePlan is the spike's plan: the compressed stage, the crowd and
// its window [from, to), the backend and the variants (no control, SEDA).
type sedaSpikePlan struct {
	p                sedaLive
	crowd            figure.SEDASpikeLoad
	users            dist.Schedule
	from, to, length time.Duration
	qcfg             testbed.QueueConfig
	capacity         float64
	vars             []*sedaSpikeVariant
}

// sedaSpikeVariant is one run of the spike.
type sedaSpikeVariant struct {
	name, suffix, label, controller string
	res                             *phaseResult
}

func planSEDASpike(env *Env) (*sedaSpikePlan, error) {
	p := sedaLiveParams(figure.SEDASpikeStage)
	crowd := figure.DefaultSEDASpikeLoad()
	crowd.SpikeStart, crowd.SpikeLen, crowd.After = pick(env, 10*time.Second, 3*time.Second), pick(env, 40*time.Second, 12*time.Second),
		pick(env, 10*time.Second, 3*time.Second)
	users, err := crowd.Schedule()
	if err != nil {
		return nil, err
	}
	pl := &sedaSpikePlan{p: p, crowd: crowd, users: users, from: crowd.SpikeStart, to: crowd.SpikeStart + crowd.SpikeLen,
		length: crowd.End(), capacity: 1 / p.service.Seconds()}
	pl.qcfg = testbed.DefaultQueueConfig()
	pl.qcfg.Workers, pl.qcfg.Discipline, pl.qcfg.Service, pl.qcfg.Seed = 1, testbed.DisciplineFIFO, "exp:"+p.service.String(), env.Seed
	pl.vars = []*sedaSpikeVariant{
		{name: "uncontrolled", suffix: "_uncontrolled", label: "no admission control", controller: "none"},
		{name: "controlled", label: fmt.Sprintf("SEDA, p90 target %v", p.target), controller: "seda"},
	}
	return pl, nil
}

// analyseSEDASpike sets the summary's metrics over the spike: p90, mean,
// reject fraction, goodput (and within the target), timeouts and errors
// for each variant; the steady part's p90 when the spike is long enough.
func analyseSEDASpike(s *report.Summary, pl *sedaSpikePlan) {
	from, to, p := pl.from, pl.to, pl.p
	for _, v := range pl.vars {
		recs := v.res.recs
		lat := okLatencies(recs, from, to, nil)
		c := countSent(recs, from, to, nil)
		win := (to - from).Seconds()
		s.Set("p90_ms_spike"+v.suffix, monitor.Percentile(lat, 0.9))
		s.Set("mean_rt_ms_spike"+v.suffix, report.Mean(lat))
		s.Set("reject_fraction_spike"+v.suffix, c.rejectFraction())
		s.Set("goodput_rps_spike"+v.suffix, float64(len(lat))/win)
		s.Set("goodput_within_target_rps_spike"+v.suffix, float64(goodWithin(recs, from, to, p.target, nil))/win)
		s.Set("timeouts_spike"+v.suffix, float64(c.timeouts))
		s.Set("errors_spike"+v.suffix, float64(c.errors))
		if steady := scaled(60*time.Second, sedaTimeScale); pl.crowd.SpikeLen > 2*steady {
			s.Set("p90_ms_spike_after_60s"+v.suffix, monitor.Percentile(okLatencies(recs, from+steady, to, nil), 0.9))
		}
	}
	s.Set("target_ms", msOf(p.target))
	s.Set("capacity_rps", pl.capacity)
	s.Set("time_scale", sedaTimeScale)
}

// renderSEDASpike writes the per-second and controller tables, the
// checks, the setup and the plots of Figs. 10 and 7.
func renderSEDASpike(res *figure.Result, pl *sedaSpikePlan) error {
	p, vars, users, from, to, length, capacity := pl.p, pl.vars, pl.users, pl.from, pl.to, pl.length, pl.capacity
	baseUsers, spikeUsers := float64(pl.crowd.BaseUsers), float64(pl.crowd.SpikeUsers)
	ts := report.NewTable("variant", "time_s", "users", "offered", "ok", "rejected", "timeouts", "errors",
		"mean_rt_ms", "p90_rt_ms", "rate_rps")
	for _, v := range vars {
		for _, b := range binRecords(v.res.recs, time.Second, length, p.target, nil) {
			rate := settingAt(v.res.states, time.Duration((b.t+1)*float64(time.Second)), func(s *stateSample) float64 { return s.setting })
			if v.controller == "none" {
				rate = 0
			}
			if err := ts.Append(v.name, b.t, users.At(time.Duration(b.t*float64(time.Second))), b.offered, b.ok, b.rejected,
				b.timeouts, b.errors, b.mean, b.p90, rate); err != nil {
				return err
			}
		}
	}
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", controllerTable(vars[1].res))
	res.Checks = figure.SEDASpikeChecks(res.Summary)
	res.Key = []string{"p90_ms_spike", "reject_fraction_spike", "p90_ms_spike_uncontrolled", "goodput_within_target_rps_spike",
		"goodput_within_target_rps_spike_uncontrolled"}
	res.Setup = []string{
		fmt.Sprintf("Backend: the queue testbed, one FIFO server with exponential service of mean %v (capacity %.0f req/s), in process on 127.0.0.1.", p.service, capacity),
		fmt.Sprintf("Load: closed-loop users with exponential think time of mean %v; a rejected user waits %v and retries; %g users, %g from t = %gs to %gs, then %g; client timeout %v.",
			p.think, p.retry, baseUsers, spikeUsers, from.Seconds(), to.Seconds(), baseUsers, p.timeout),
		fmt.Sprintf("Controlled: the proxy's seda stage, p90 target %v, controller timeout %v, nreq 100, initial rate %.0f req/s (the stage's capacity, as in the simulator), adj_i %g, the controller's other defaults (track_demand on). Uncontrolled: the same proxy with controller none.",
			p.target, scaled(time.Second, sedaTimeScale), p.initialRate, p.adjI),
		fmt.Sprintf("Time compression %g: the paper's (and simulator's) 20 ms stage, 1 s target, 20 ms think time and 5 s retry wait are all scaled by %g, and the controller's rates (adj_i, rate_min, rate_max) raised by 1/%g. Latencies are measured by the load generator from the intended send time to the last byte.",
			sedaTimeScale, sedaTimeScale, sedaTimeScale),
	}

	// Fig. 10: p90 per second and the share rejected.
	p90 := report.Panel{Title: fmt.Sprintf("massive load spike: %g → %g users at t = %gs (Fig. 10)", baseUsers, spikeUsers, from.Seconds()),
		XLabel: "time (s)", YLabel: "p90 response time (ms)", LogY: true, LegendLeft: true,
		HLines: []report.RefLine{{Value: msOf(p.target), Label: fmt.Sprintf("target %v", p.target)}},
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	rej := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.05, LegendLeft: true,
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	for _, v := range vars {
		bins := binRecords(v.res.recs, time.Second, length, 0, nil)
		x, y := binColumns(bins, func(b *bin) float64 { return b.p90 })
		p90.Series = append(p90.Series, report.Series{Label: v.label, X: x, Y: y})
		if v.controller != "none" {
			x, r := binColumns(bins, (*bin).rejectedShare)
			rej.Series = append(rej.Series, report.Series{Label: "rejected / answered, " + v.label, X: x, Y: r})
		}
	}
	res.AddFigure("spike.png", &report.Figure{PanelHeight: 3.4, Panels: []report.Panel{p90, rej}})
	res.AddFigure("controller.png", controllerFigure(vars[1].res, p.target, "SEDA controller trace at the proxy (Fig. 7)"))
	return nil
}

// controllerTable lists the proxy's main stage as sampled: time, setting,
// and the p90 of the last period.
func controllerTable(r *phaseResult) *report.Table {
	t := report.NewTable("time_s", "setting", "quality", "gate_off")
	for _, s := range r.states {
		_ = t.Append(s.t.Seconds(), s.setting, s.quality, s.gateOff)
	}
	return t
}

// controllerFigure draws the p90 of every control period the proxy
// measured and the token rate it set.
func controllerFigure(r *phaseResult, target time.Duration, title string) *report.Figure {
	var px, py []float64
	for _, p := range r.periods {
		if p.class == 0 && p.Samples > 0 {
			px = append(px, p.end.Seconds())
			py = append(py, p.P90MS)
		}
	}
	var rx, ry []float64
	for _, s := range r.states {
		rx = append(rx, s.t.Seconds())
		ry = append(ry, s.setting)
	}
	return &report.Figure{PanelHeight: 3, Panels: []report.Panel{
		{Title: title, XLabel: "time (s)", YLabel: "p90 per control period (ms)", LogY: true, LegendLeft: true,
			Series: []report.Series{{Label: "p90 measured by the proxy", X: px, Y: py}},
			HLines: []report.RefLine{{Value: msOf(target), Label: fmt.Sprintf("target %v", target)}}},
		{XLabel: "time (s)", YLabel: "token rate (req/s)", LogY: true, LegendLeft: true,
			Series: []report.Series{{Label: "admission rate", X: rx, Y: ry}}},
	}}
}

// spikePolicy is the policy of one seda-spike variant: "seda" or "none".
func spikePolicy(controller string, p sedaLive) policy.Config {
	if controller == "none" {
		return nonePolicy()
	}
	return sedaPolicy(p)
}

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

// seda-degradation is Welsh & Culler's Figs. 12–13, live: one bottleneck
// whose work per request scales with the quality level the proxy sends in
// X-Sluice-Quality (the queue testbed multiplies each demand by it, floor
// 0.1), under a 3 → 1000 user spike: no control, degradation alone, and
// degradation that re-enables admission control at the lowest quality.

// degradePolicy is the single-stage SEDA policy with degradation;
// admission re-enables the token bucket at the lowest quality.
func degradePolicy(p sedaLive, admission bool) policy.Config {
	c := sedaConfig(p)
	c.Degrade.Enabled, c.Degrade.Admission = true, admission
	pol := mainPolicy(c)
	no := false
	pol.Stages[0].Differentiate = &no
	pol.Degrade.Header = "X-Sluice-Quality"
	return pol
}

// runSEDADegradation is the experiment in four steps: plan the spike
// (the figure's 3 → 1000 users, on a shorter timeline than the
// simulator's) and the three variants, run them on fresh backends,
// analyse them into the summary's metrics, and render the tables, plots,
// checks and setup.
func runSEDADegradation(ctx context.Context, env *Env) (*figure.Result, error) {
	pl, err := planSEDADegradation(env)
	if err != nil {
		return nil, err
	}
	p := pl.p
	for _, v := range pl.vars {
		load, err := closedLoad("degradation", env.Seed, v.users, p.think, p.retry, p.timeout, v.length, nil)
		if err != nil {
			return nil, err
		}
		// One upstream connection for the one server: the backlog waits in
		// the proxy's pool queue (the papers' listen queue), and the quality
		// is read when a request leaves it for the server, as a SEDA stage
		// reads it when it starts to process an event.
		run := proxied{newBackend: queueBackend(pl.qcfg), maxConcurrency: 1, policy: v.policy,
			phase: phase{name: v.name, length: v.length, loads: []loadgen.Config{load}, users: v.users.At, grace: time.Second}}
		if v.res, err = run.run(ctx, env); err != nil {
			return nil, err
		}
	}
	return finish(env, func(s *report.Summary) { analyseSEDADegradation(s, pl) },
		func(r *figure.Result) error { return renderSEDADegradation(r, pl) })
}

// degradePlan is the degradation experiment's plan: the compressed stage,
// the crowd (its spike starts at from), the spike's first paper-minute
// (steady, left out of the _after_60s metrics) and the variants.
type degradePlan struct {
	p                   sedaLive
	crowd               figure.SEDASpikeLoad
	from, steady        time.Duration
	spikeDeg, spikeNone time.Duration
	qcfg                testbed.QueueConfig
	vars                []*degradeVariant
}

// degradeVariant is one run: its policy, the end of its spike (to) and
// of its run, its users.
type degradeVariant struct {
	name, suffix, label string
	policy              policy.Config
	to, length          time.Duration
	users               dist.Schedule
	res                 *phaseResult
}

func planSEDADegradation(env *Env) (*degradePlan, error) {
	p := sedaLiveParams(figure.SEDADegradationStage)
	pl := &degradePlan{p: p, crowd: figure.DefaultSEDASpikeLoad(),
		// The spike lasts 60 s (15 s quick) with degradation; without
		// control 20 s (8 s quick) suffice to show the response time
		// growing without bound. That shorter window only lowers the
		// uncontrolled p90 (it grows for as long as the spike lasts), so
		// comparisons with it are conservative.
		spikeDeg: pick(env, 60*time.Second, 15*time.Second), spikeNone: pick(env, 20*time.Second, 8*time.Second),
		steady: scaled(60*time.Second, sedaTimeScale), // the spike's first paper-minute is its onset
	}
	pl.crowd.SpikeStart, pl.crowd.After = pick(env, 5*time.Second, 2*time.Second), pick(env, 3*time.Second, time.Second)
	pl.from = pl.crowd.SpikeStart
	pl.qcfg = testbed.DefaultQueueConfig()
	pl.qcfg.Workers, pl.qcfg.Discipline, pl.qcfg.Service, pl.qcfg.Seed = 1, testbed.DisciplineFIFO, "exp:"+p.service.String(), env.Seed
	pl.vars = []*degradeVariant{
		{name: "none", suffix: "_none", label: "no control", policy: nonePolicy(), to: pl.from + pl.spikeNone},
		{name: "degrade", suffix: "_degrade_only", label: "degradation alone", policy: degradePolicy(p, false), to: pl.from + pl.spikeDeg},
		{name: "degrade_admission", label: "degradation + admission control", policy: degradePolicy(p, true), to: pl.from + pl.spikeDeg},
	}
	for _, v := range pl.vars {
		crowd := pl.crowd
		crowd.SpikeLen = v.to - pl.from
		v.length = crowd.End()
		var err error
		if v.users, err = crowd.Schedule(); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// analyseSEDADegradation sets the summary's metrics over each variant's
// spike: p90, mean, reject fraction, mean quality, goodput (and within the
// target), and the p90 after the onset when the spike is long enough.
func analyseSEDADegradation(s *report.Summary, pl *degradePlan) {
	p, from, steady := pl.p, pl.from, pl.steady
	for _, v := range pl.vars {
		to := v.to
		var qSum, qN float64
		for _, st := range v.res.states {
			if st.t >= from && st.t < to {
				qSum += st.quality
				qN++
			}
		}
		if v.name == "none" {
			qSum, qN = 1, 1
		}
		lat := okLatencies(v.res.recs, from, to, nil)
		c := countSent(v.res.recs, from, to, nil)
		s.Set("p90_ms"+v.suffix, monitor.Percentile(lat, 0.9))
		s.Set("mean_rt_ms"+v.suffix, report.Mean(lat))
		s.Set("reject_fraction"+v.suffix, c.rejectFraction())
		s.Set("quality_mean"+v.suffix, ratio(qSum, qN))
		s.Set("goodput_rps"+v.suffix, float64(len(lat))/(to-from).Seconds())
		s.Set("goodput_within_target_rps"+v.suffix, float64(goodWithin(v.res.recs, from, to, p.target, nil))/(to-from).Seconds())
		if to-from > 2*steady {
			s.Set("p90_ms_after_60s"+v.suffix, monitor.Percentile(okLatencies(v.res.recs, from+steady, to, nil), 0.9))
		}
	}
	s.Set("target_ms", msOf(p.target))
	s.Set("time_scale", sedaTimeScale)
}

// renderSEDADegradation writes the per-second and controller tables, the
// plots of Figs. 12–13, the checks and the setup.
func renderSEDADegradation(res *figure.Result, pl *degradePlan) error {
	p, vars, from, steady, spikeDeg, spikeNone := pl.p, pl.vars, pl.from, pl.steady, pl.spikeDeg, pl.spikeNone
	baseUsers, spikeUsers := float64(pl.crowd.BaseUsers), float64(pl.crowd.SpikeUsers)
	ts := report.NewTable("variant", "time_s", "users", "offered", "ok", "rejected", "timeouts", "errors",
		"mean_rt_ms", "p90_rt_ms", "quality", "gate_on", "rate_rps")
	p90 := report.Panel{Title: fmt.Sprintf("p90 under a %g → %g user spike (Figs. 12–13)", baseUsers, spikeUsers),
		XLabel: "time (s)", YLabel: "p90 response time (ms)", LogY: true, LegendLeft: true,
		HLines: []report.RefLine{{Value: msOf(p.target), Label: fmt.Sprintf("target %v", p.target)}},
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: vars[1].to.Seconds()}}}
	qual := report.Panel{XLabel: "time (s)", YLabel: "quality level", YMin: 0, YMax: 1.05, LegendBottom: true,
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: vars[1].to.Seconds()}}}
	rej := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.05, LegendLeft: true,
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: vars[1].to.Seconds()}}}
	for _, v := range vars {
		bins := binRecords(v.res.recs, time.Second, v.length, 0, nil)
		for _, b := range bins {
			at := time.Duration((b.t + 1) * float64(time.Second))
			q, gateOn, rate := 1.0, false, 0.0
			if v.name != "none" {
				q = settingAt(v.res.states, at, func(st *stateSample) float64 { return st.quality })
				gateOn = settingAt(v.res.states, at, func(st *stateSample) float64 { return b2f(!st.gateOff) }) == 1
				if gateOn {
					rate = settingAt(v.res.states, at, func(st *stateSample) float64 { return st.setting })
				}
			}
			if err := ts.Append(v.name, b.t, v.users.At(time.Duration(b.t*float64(time.Second))), b.offered, b.ok, b.rejected,
				b.timeouts, b.errors, b.mean, b.p90, q, gateOn, rate); err != nil {
				return err
			}
		}
		x, y := binColumns(bins, func(b *bin) float64 { return b.p90 })
		p90.Series = append(p90.Series, report.Series{Label: v.label, X: x, Y: y})
		if v.name != "none" {
			var qx, qy []float64
			for _, st := range v.res.states {
				qx, qy = append(qx, st.t.Seconds()), append(qy, st.quality)
			}
			qual.Series = append(qual.Series, report.Series{Label: v.label, X: qx, Y: qy})
			rx, ry := binColumns(bins, (*bin).rejectedShare)
			rej.Series = append(rej.Series, report.Series{Label: v.label, X: rx, Y: ry})
		}
	}
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", controllerTable(vars[2].res))
	res.AddFigure("degradation.png", &report.Figure{PanelHeight: 3, Panels: []report.Panel{p90, qual, rej}})
	res.Checks = figure.SEDADegradationChecks(res.Summary, steady)
	res.Key = []string{"p90_ms", "p90_ms_degrade_only", "p90_ms_none", "reject_fraction", "quality_mean"}
	res.Setup = []string{
		fmt.Sprintf("Backend: the queue testbed, one FIFO server; a request's work is exponential with mean %v at full quality, times its X-Sluice-Quality (floor 0.1, so %v at the lowest level). The proxy keeps one request at a time in the server (max_concurrency 1) and the backlog in its own queue, so that the quality is the one in force when a request starts service, as in the paper's stage.",
			p.service, scaled(p.service, 0.1)),
		fmt.Sprintf("Load: closed-loop users, exponential think time of mean %v, a rejected user waits %v; %g users, %g from t = %gs for %v with degradation (for %v without control: enough to show the response time growing without bound, and a shorter window only lowers the uncontrolled p90), then %g. Metrics cover the spike; the _after_60s ones leave out its first paper-minute (%v), the onset, when 1000 users arrive at once and the quality is still falling.",
			p.think, p.retry, baseUsers, spikeUsers, from.Seconds(), spikeDeg, spikeNone, baseUsers, steady),
		fmt.Sprintf("Proxy: one seda stage with p90 target %v and degrade {enabled: true, quality_min 0.1, quality_down 1.2, quality_up 0.02}; admission: false for degradation alone, true to switch the token bucket on at the lowest quality; controller none for no control.",
			p.target),
		fmt.Sprintf("Time compression %g: the simulator's 100 ms stage with a 5 s target (the paper's target), 20 ms think time and 5 s retry wait are scaled by %g; the controller's rates (adj_i, rate_min, rate_max) are raised by 1/%g.",
			sedaTimeScale, sedaTimeScale, sedaTimeScale),
	}
	return nil
}
