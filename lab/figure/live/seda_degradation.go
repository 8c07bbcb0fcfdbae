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
