// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/policy"
)

// yaksha-load-sweep is Kamra, Misra & Nahum's Figs. 7–8, live: Poisson
// arrivals at 0.5× to 5× the capacity of a processor-sharing server (the
// queue testbed, the paper's plant model), through the proxy's Yaksha
// stage and through the proxy without control.

// yakshaTimeScale compresses the Yaksha experiments: the simulator's 20 ms
// mean demand (50 req/s) becomes 5 ms (200 req/s), Tref 150 ms becomes
// 37.5 ms, and the controller's clock runs 4× faster with them: period
// 250 ms, pole −0.4/s (a 2.5 s time constant), self-tuning window 2.5 s.
// The client timeout (10 s) becomes 2.5 s.
const yakshaTimeScale = 0.25

// yakshaLive are the compressed Yaksha parameters.
type yakshaLive struct {
	demand, tref, period, tuneWindow, timeout time.Duration
	pole                                      float64
}

// yakshaLiveParams are the Yaksha figures' parameters, declared once in
// package figure (the simulator's defaults, with the controller's default
// pole and tuning window), compressed by yakshaTimeScale: times scaled, the
// pole (1/s) raised in proportion.
func yakshaLiveParams() yakshaLive {
	c, s := figure.DefaultYaksha(), yakshaTimeScale
	return yakshaLive{demand: scaled(c.ServiceTime, s), tref: scaled(c.Tref, s), period: scaled(c.Period, s),
		tuneWindow: scaled(c.TuneWindow, s), timeout: scaled(c.Timeout, s), pole: c.Pole / s}
}

// yakshaPolicy is the single-stage Yaksha policy; lambda0 > 0 gives the
// static design for that nominal rate, 0 the self-tuning one.
func yakshaPolicy(p yakshaLive, lambda0 float64) policy.Config {
	c := control.DefaultYakshaConfig()
	c.Tref, c.Period, c.Pole, c.TuneWindow, c.SelfTuning = p.tref, p.period, p.pole, p.tuneWindow, lambda0 <= 0
	if lambda0 > 0 {
		c.Lambda0 = lambda0
	}
	return mainPolicy(&c)
}

// sweepPoint is one load point of one variant.
type sweepPoint struct {
	load                                   float64
	throughput, goodput, mean, dropped     float64
	offered, ok, rejected, timeouts, fails int
}

// measurePoint summarises the records of [from, to).
func measurePoint(load float64, recs []record, from, to, timeout time.Duration) sweepPoint {
	win := (to - from).Seconds()
	lat := okLatencies(recs, from, to, nil)
	c := countSent(recs, from, to, nil)
	return sweepPoint{load: load, throughput: float64(len(lat)) / win,
		goodput: float64(goodWithin(recs, from, to, timeout, nil)) / win, mean: report.Mean(lat),
		dropped: c.rejectFraction(), offered: c.offered, ok: c.ok, rejected: c.rejected, timeouts: c.timeouts, fails: c.errors}
}

// openLoad is an open-loop Poisson load of one URL following rate.
func openLoad(name string, seed uint64, rate dist.Schedule, timeout, length time.Duration) (loadgen.Config, error) {
	w, err := loadgen.NewURLs(name, "url", []loadgen.Weighted{{Name: "/page", Weight: 1}})
	if err != nil {
		return loadgen.Config{}, err
	}
	return loadgen.Config{Mode: loadgen.ModeOpen, Duration: length, Seed: seed, Timeout: timeout, Workload: w,
		Arrivals: dist.Poisson{Rate: rate}}, nil
}

// runYakshaSweep is the experiment in four steps: plan the loads and
// the staircase, run the controlled staircase and one uncontrolled run
// per load point, analyse them into the summary's metrics, and render the
// tables, plots, checks and setup.
func runYakshaSweep(ctx context.Context, env *Env) (*figure.Result, error) {
	pl, err := planYakshaSweep(env)
	if err != nil {
		return nil, err
	}
	if err := pl.runAll(ctx, env); err != nil {
		return nil, err
	}
	return finish(env, func(s *report.Summary) { analyseYakshaSweep(s, pl) },
		func(r *figure.Result) error { return renderYakshaSweep(r, pl) })
}

// yakshaSweepPlan is the sweep's load: the controlled staircase over
// loads (each step measured over its second half) and an uncontrolled
// run per point of uncLoads on a fresh server; the runs fill ctlRes,
// ctlPts and uncPts.
type yakshaSweepPlan struct {
	p               yakshaLive
	loads, uncLoads []float64
	step            time.Duration // per load of the staircase
	uncLen, uncFrom time.Duration // each uncontrolled run, measured from uncFrom
	length          time.Duration // of the staircase
	capacity, ideal float64       // req/s
	qcfg            testbed.QueueConfig
	rate            dist.Schedule
	ctlRes          *phaseResult
	ctlPts, uncPts  []sweepPoint
}

func planYakshaSweep(env *Env) (*yakshaSweepPlan, error) {
	p := yakshaLiveParams()
	pl := &yakshaSweepPlan{p: p,
		loads: pick(env, []float64{0.5, 1, 1.5, 2, 3, 4, 5}, []float64{1, 2, 3}),
		// A step up makes the response time jump and the drop
		// probability overshoot for 2–3 s before it settles; each step is
		// measured over its second half.
		step:     pick(env, 12*time.Second, 8*time.Second),
		uncLen:   pick(env, 6*time.Second, 4*time.Second),
		uncFrom:  pick(env, 2*time.Second, 1500*time.Millisecond),
		capacity: 1 / p.demand.Seconds(),
	}
	pl.uncLoads = pick(env, pl.loads, []float64{1, 3})
	pl.ideal = pl.capacity * (1 - p.demand.Seconds()/p.tref.Seconds())
	pl.qcfg = testbed.DefaultQueueConfig()
	pl.qcfg.Workers, pl.qcfg.Discipline, pl.qcfg.Service, pl.qcfg.Seed = 1, testbed.DisciplinePS, "exp:"+p.demand.String(), env.Seed
	var pairs []float64
	for i, l := range pl.loads {
		pairs = append(pairs, (time.Duration(i) * pl.step).Seconds(), l*pl.capacity)
	}
	var err error
	if pl.rate, err = stepSchedule(pairs...); err != nil {
		return nil, err
	}
	pl.length = time.Duration(len(pl.loads)) * pl.step
	return pl, nil
}

// runAll runs the controlled staircase (one run whose offered load climbs
// the steps, each measured over its second half, after the controller
// with its 2.5 s time constant has adapted) and the uncontrolled points,
// each on a fresh server (an uncontrolled overload leaves a backlog the
// next point would inherit).
func (pl *yakshaSweepPlan) runAll(ctx context.Context, env *Env) error {
	p := pl.p
	load, err := openLoad("sweep", env.Seed, pl.rate, p.timeout, pl.length)
	if err != nil {
		return err
	}
	ctl := proxied{newBackend: queueBackend(pl.qcfg), maxConcurrency: 4096, policy: yakshaPolicy(p, 0),
		phase: phase{name: "yaksha staircase", length: pl.length, loads: []loadgen.Config{load}, sampleEvery: p.period / 2}}
	if pl.ctlRes, err = ctl.run(ctx, env); err != nil {
		return err
	}
	for i, l := range pl.loads {
		start := time.Duration(i) * pl.step
		pl.ctlPts = append(pl.ctlPts, measurePoint(l, pl.ctlRes.recs, start+pl.step/2, start+pl.step, p.timeout))
	}
	for _, l := range pl.uncLoads {
		r, err := dist.ConstantSchedule(l * pl.capacity)
		if err != nil {
			return err
		}
		load, err := openLoad("sweep", env.Seed, r, p.timeout, pl.uncLen)
		if err != nil {
			return err
		}
		unc := proxied{newBackend: queueBackend(pl.qcfg), maxConcurrency: 4096, policy: nonePolicy(),
			phase: phase{name: fmt.Sprintf("uncontrolled %g×", l), length: pl.uncLen, loads: []loadgen.Config{load},
				grace: 500 * time.Millisecond}}
		ures, err := unc.run(ctx, env)
		if err != nil {
			return err
		}
		pl.uncPts = append(pl.uncPts, measurePoint(l, ures.recs, pl.uncFrom, pl.uncLen, p.timeout))
	}
	return nil
}

// analyseYakshaSweep sets the summary's metrics per load point (with and
// without control), the largest relative error of the mean RT from Tref
// at loads ≥ 2×, and the run's constants.
func analyseYakshaSweep(s *report.Summary, pl *yakshaSweepPlan) {
	tref := msOf(pl.p.tref)
	maxErr := 0.0
	for _, v := range []struct {
		suffix string
		pts    []sweepPoint
	}{{"", pl.ctlPts}, {"_uncontrolled", pl.uncPts}} {
		for _, pt := range v.pts {
			tag := figure.LoadTag(pt.load)
			s.Set("throughput_rps_at_"+tag+v.suffix, pt.throughput)
			s.Set("goodput_rps_at_"+tag+v.suffix, pt.goodput)
			s.Set("mean_rt_ms_at_"+tag+v.suffix, pt.mean)
			if v.suffix == "" {
				s.Set("drop_fraction_at_"+tag, pt.dropped)
				s.Set("throughput_ratio_at_"+tag, pt.throughput/pl.ideal)
				if pt.load >= 2 {
					maxErr = math.Max(maxErr, math.Abs(pt.mean-tref)/tref)
					if math.IsNaN(pt.mean) {
						maxErr = math.NaN()
					}
				}
			}
		}
	}
	s.Set("mean_rt_max_rel_error_at_2x_plus", maxErr)
	s.Set("capacity_rps", pl.capacity)
	s.Set("ideal_throughput_rps", pl.ideal)
	s.Set("tref_ms", tref)
	s.Set("time_scale", yakshaTimeScale)
}

// renderYakshaSweep writes the sweep and per-period tables, the plots of
// Figs. 7–8 and the staircase's trace, the checks and the setup.
func renderYakshaSweep(res *figure.Result, pl *yakshaSweepPlan) error {
	p, loads, uncLoads, step, uncLen, uncFrom, length := pl.p, pl.loads, pl.uncLoads, pl.step, pl.uncLen, pl.uncFrom, pl.length
	capacity, ideal, cres, ctlPts, uncPts := pl.capacity, pl.ideal, pl.ctlRes, pl.ctlPts, pl.uncPts
	sweep := report.NewTable("variant", "load_x", "offered_rps", "throughput_rps", "goodput_rps", "mean_rt_ms", "drop_fraction",
		"throughput_ratio", "timeouts", "errors")
	for _, v := range []struct {
		name string
		pts  []sweepPoint
	}{{"controlled", ctlPts}, {"uncontrolled", uncPts}} {
		for _, pt := range v.pts {
			if err := sweep.Append(v.name, pt.load, pt.load*capacity, pt.throughput, pt.goodput, pt.mean, pt.dropped,
				pt.throughput/ideal, pt.timeouts, pt.fails); err != nil {
				return err
			}
		}
	}
	res.AddTable("sweep.csv", sweep)

	// Per-period trace of the controlled staircase.
	bins := binRecords(cres.recs, p.period, length, 0, nil)
	ts := report.NewTable("time_s", "offered_rps", "ok_rps", "rejected_rps", "mean_rt_ms", "p90_rt_ms", "drop_probability")
	per := p.period.Seconds()
	var tx, ty, tpd []float64
	for _, b := range bins {
		pd := settingAt(cres.states, time.Duration((b.t+per)*float64(time.Second)), func(st *stateSample) float64 { return st.setting })
		if err := ts.Append(b.t, float64(b.offered)/per, float64(b.ok)/per, float64(b.rejected)/per, b.mean, b.p90, pd); err != nil {
			return err
		}
		tx, ty, tpd = append(tx, b.t), append(ty, b.mean), append(tpd, pd)
	}
	res.AddTable("timeseries.csv", ts)

	col := func(pts []sweepPoint, f func(sweepPoint) float64) (x, y []float64) {
		for _, pt := range pts {
			x, y = append(x, pt.load), append(y, f(pt))
		}
		return x, y
	}
	cx, cthr := col(ctlPts, func(pt sweepPoint) float64 { return pt.throughput })
	ux, uthr := col(uncPts, func(pt sweepPoint) float64 { return pt.throughput })
	_, crt := col(ctlPts, func(pt sweepPoint) float64 { return pt.mean })
	_, urt := col(uncPts, func(pt sweepPoint) float64 { return pt.mean })
	thr := report.Panel{Title: "throughput vs offered load (Fig. 7)", XLabel: "offered load (× capacity)", YLabel: "throughput (req/s)",
		Series: []report.Series{
			{Label: "controlled (Yaksha)", X: cx, Y: cthr, Kind: report.LinePoints},
			{Label: fmt.Sprintf("uncontrolled: answered within the %v client timeout", p.timeout), X: ux, Y: uthr, Kind: report.LinePoints},
		},
		HLines: []report.RefLine{{Value: ideal, Label: fmt.Sprintf("ideal at Tref: %.1f req/s", ideal)}},
		YMin:   0, YMax: capacity * 1.3}
	rt := report.Panel{Title: "mean response time vs offered load (Fig. 8)", XLabel: "offered load (× capacity)", YLabel: "mean response time (ms)",
		LogY: true, LegendLeft: true,
		Series: []report.Series{
			{Label: "controlled (Yaksha)", X: cx, Y: crt, Kind: report.LinePoints},
			{Label: "uncontrolled", X: ux, Y: urt, Kind: report.LinePoints},
		},
		HLines: []report.RefLine{{Value: msOf(p.tref), Label: fmt.Sprintf("Tref = %v", p.tref)}}}
	res.AddFigure("load_sweep.png", &report.Figure{PanelHeight: 4, Panels: []report.Panel{thr, rt}})
	var vl []report.RefLine
	for i := 1; i < len(loads); i++ {
		vl = append(vl, report.RefLine{Value: (time.Duration(i) * step).Seconds()})
	}
	res.AddFigure("trace.png", &report.Figure{PanelHeight: 2.8, Panels: []report.Panel{
		{Title: "controlled staircase: offered load " + fmtLoads(loads) + " × capacity", XLabel: "time (s)", YLabel: "mean RT per period (ms)",
			Series: []report.Series{{Label: "mean RT", X: tx, Y: ty}}, VLines: vl,
			HLines: []report.RefLine{{Value: msOf(p.tref), Label: fmt.Sprintf("Tref = %v", p.tref)}}, YMin: 0, YMax: 4 * msOf(p.tref)},
		{XLabel: "time (s)", YLabel: "drop probability pd", Series: []report.Series{{Label: "pd", X: tx, Y: tpd}}, VLines: vl,
			YMin: 0, YMax: 1, LegendBottom: true},
	}})

	res.Checks = figure.YakshaSweepChecks(res.Summary)
	res.Key = []string{"mean_rt_ms_at_3x", "throughput_ratio_at_3x", "mean_rt_ms_at_3x_uncontrolled", "drop_fraction_at_3x"}
	res.Setup = []string{
		fmt.Sprintf("Backend: the queue testbed, one processor-sharing server with exponential demands of mean %v (capacity %.0f req/s): the paper's M/G/1-PS plant model.", p.demand, capacity),
		fmt.Sprintf("Load: open-loop Poisson arrivals at %s × capacity; client timeout %v (requests still unanswered then are given up by the client, but the server still does their work).", fmtLoads(loads), p.timeout),
		fmt.Sprintf("Controlled: the proxy's yaksha stage, Tref %v, period %v, pole %g/s, tune window %v, self-tuning with λ0 estimated from the measured throughput. The load climbs the staircase in one run, %v per step, and each point is measured over the second half of its step.",
			p.tref, p.period, p.pole, p.tuneWindow, step),
		fmt.Sprintf("Uncontrolled: the same proxy with controller none, one %v run per load point (%s ×) on a fresh server, measured from %v.", uncLen, fmtLoads(uncLoads), uncFrom),
		fmt.Sprintf("Time compression %g: the simulator's 20 ms demand, Tref 150 ms, period 1 s, pole −0.1/s, 10 s tune window and 10 s client timeout are scaled by %g. The ideal throughput at Tref is capacity × (1 − E[X]/Tref) = %.1f req/s.",
			yakshaTimeScale, yakshaTimeScale, ideal),
	}
	return nil
}

// fmtLoads lists load factors: "0.5, 1, 2, 3".
func fmtLoads(ls []float64) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, strconv.FormatFloat(l, 'g', -1, 64))
	}
	return strings.Join(parts, ", ")
}
