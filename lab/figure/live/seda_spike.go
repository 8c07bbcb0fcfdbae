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
