// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
)

// voigt-step reproduces Voigt & Gunningberg's Fig. 5 (docs/algorithms.md
// §1): the offered rate steps from 300 to 850 req/s at t = 50 s and back to
// 300 at t = 70 s; the connection policer's rate (initially 1000/s) falls
// within a few periods and recovers afterwards, while the CPU rule's rate
// changes by at most Kp·10 = 2 req/s per period.

type voigtStepParams struct {
	model    voigtModel
	rate     dist.Schedule
	arrivals string
	dynamic  float64
	duration time.Duration
	stepAt   time.Duration
	stepEnd  time.Duration
}

// voigtStep declares the parameters of voigt-step and returns its run.
func voigtStep(ps *Params) RunFunc {
	var c voigtStepParams
	declareVoigtModel(ps, &c.model)
	ps.Schedule(&c.rate, "rate", "0s:300,50s:850,70s:300", "offered rate over time in req/s (paper: 300, 850 from 50 s, 300 from 70 s)")
	ps.Choice(&c.arrivals, "arrivals", "constant", []string{"constant", "poisson"}, "arrival process (paper: sclient, constant rate)")
	ps.Float(&c.dynamic, "dynamic", 0.2, 0, 1, "fraction of the small-file requests that are dynamic (paper: 20 %)")
	ps.Duration(&c.duration, "duration", 120*time.Second, time.Second, 100000*time.Second, "length of the run")
	ps.Duration(&c.stepAt, "step_at", 50*time.Second, 0, 100000*time.Second, "start of the high load, for the metrics (paper: 50 s)")
	ps.Duration(&c.stepEnd, "step_end", 70*time.Second, 0, 100000*time.Second, "end of the high load, for the metrics (paper: 70 s)")
	return func(env Env) (*figure.Result, error) { return runVoigtStep(env, c) }
}

// voigtStepRun is the step's two runs on one flow: with the controls
// and without.
type voigtStepRun struct {
	fl       voigtFlow
	ctl, unc *voigtRun
}

// runVoigtStep reproduces Fig. 5: it runs the surge with and without the
// controls, analyses the policer's and the CPU rule's reaction and the
// response times, and renders the timeline.
func runVoigtStep(env Env, c voigtStepParams) (*figure.Result, error) {
	r, err := runVoigtStepFlows(env.Seed, c)
	if err != nil {
		return nil, err
	}
	res := newResult(env)
	analyseVoigtStep(res, c, r)
	renderVoigtStep(res, c, r)
	return res, nil
}

// voigtRecoveryAfter is when, after the high load, the recovery's
// metrics (policer_drop_fraction_after, mean_rt_ms_after) start.
const voigtRecoveryAfter = 10 * time.Second

// runVoigtStepFlows runs the surge flow through the model with the
// controls and without, each on its own engine with the same seed.
func runVoigtStepFlows(seed uint64, c voigtStepParams) (*voigtStepRun, error) {
	if !(c.stepAt < c.stepEnd && c.stepEnd < c.duration) {
		return nil, paramErrorf("want step_at %v < step_end %v < duration %v", c.stepAt, c.stepEnd, c.duration)
	}
	if c.duration < c.stepEnd+voigtRecoveryAfter {
		return nil, paramErrorf("duration %v must be at least step_end %v + %v: the recovery is measured from %v after the high load",
			c.duration, c.stepEnd, voigtRecoveryAfter, voigtRecoveryAfter)
	}
	files, err := newVoigtFiles(c.model)
	if err != nil {
		return nil, err
	}
	fl, err := surgeFlow(c.model, files, c.rate, c.arrivals, c.dynamic)
	if err != nil {
		return nil, err
	}
	ctl, err := voigtSim(seed, c.model, []voigtFlow{fl}, true, c.duration)
	if err != nil {
		return nil, err
	}
	unc, err := voigtSim(seed, c.model, []voigtFlow{fl}, false, c.duration)
	if err != nil {
		return nil, err
	}
	return &voigtStepRun{fl: fl, ctl: ctl, unc: unc}, nil
}

// analyseVoigtStep sets the step's metrics: the policer's rate before,
// 5 periods after and at its minimum, the periods until it is below half
// its initial rate, the CGI rate's largest fall per period, and per run
// the response times, throughput and the RT transient (seconds until the
// per-second mean RT is back within 10× its level before the step); then
// the time series, the key and the checks.
func analyseVoigtStep(res *figure.Result, c voigtStepParams, r *voigtStepRun) {
	fl, ctl, unc := r.fl, r.ctl, r.unc
	s := res.Summary
	h := c.model.period
	initial := rateAt(ctl.policer, 0)

	// The policer: its rate just before the step, after 5 periods, the
	// number of periods until it is below half its initial rate, its
	// minimum, and after the step.
	s.Set("policer_rate_initial", initial)
	s.Set("policer_rate_at_step", rateAt(ctl.policer, c.stepAt))
	s.Set("policer_rate_after_5_periods", rateAt(ctl.policer, c.stepAt+5*h))
	toHalf := math.NaN()
	minRate, minAt := math.Inf(1), math.NaN()
	for _, st := range ctl.policer.steps {
		end := st.end()
		if end <= c.stepAt {
			continue
		}
		if st.Decision.New < initial/2 && math.IsNaN(toHalf) {
			toHalf = float64((end - c.stepAt + h - 1) / h)
		}
		if st.Decision.New < minRate {
			minRate, minAt = st.Decision.New, end.Seconds()
		}
	}
	s.Set("periods_to_half_rate", toHalf)
	s.Set("policer_rate_min", minRate)
	s.Set("policer_rate_min_at_s", minAt)
	s.Set("policer_rate_end", rateAt(ctl.policer, c.duration))
	// Recovery: the policer discards (almost) nothing of the low load
	// from 10 s after the step's end.
	after := c.stepEnd + voigtRecoveryAfter
	polOff, polRej := ruleCounts(ctl.policer, after, c.duration)
	s.Set("policer_drop_fraction_after", ratio(polRej, polOff))
	polOff, polRej = ruleCounts(ctl.policer, c.stepAt, c.stepEnd)
	s.Set("policer_drop_fraction_step", ratio(polRej, polOff))
	s.Set("cgi_rate_at_step", rateAt(ctl.cgi, c.stepAt))
	s.Set("cgi_rate_at_step_end", rateAt(ctl.cgi, c.stepEnd))
	s.Set("cgi_rate_end", rateAt(ctl.cgi, c.duration))
	// The largest fall of the CGI rate from one period to the next while
	// the load is high.
	maxFall, prev := 0.0, rateAt(ctl.cgi, c.stepAt)
	for _, st := range ctl.cgi.steps {
		if end := st.end(); end > c.stepAt && end <= c.stepEnd {
			maxFall = math.Max(maxFall, prev-st.Decision.New)
			prev = st.Decision.New
		}
	}
	s.Set("cgi_rate_max_fall_per_period", maxFall)

	// Response times of the admitted requests.
	for _, v := range []struct {
		suffix string
		run    *voigtRun
	}{{"", ctl}, {"_uncontrolled", unc}} {
		w := v.run.window(0, c.stepAt, c.stepEnd)
		s.Set("mean_rt_ms_step"+v.suffix, ms(w.meanRT()))
		wq := v.run.window(0, c.stepEnd-(c.stepEnd-c.stepAt)/4, c.stepEnd)
		s.Set("mean_rt_ms_step_last_quarter"+v.suffix, ms(wq.meanRT()))
		s.Set("throughput_rps_step_last_quarter"+v.suffix, wq.throughput())
		s.Set("throughput_rps_step"+v.suffix, w.throughput())
		s.Set("failed_fraction_step"+v.suffix, ratio(w.late+w.timedOut, w.offered))
		maxRT := 0.0
		for k := range v.run.bins[0] {
			if b := v.run.bins[0][k]; b.good > 0 {
				maxRT = math.Max(maxRT, b.rtSum/float64(b.good))
			}
		}
		s.Set("mean_rt_ms_max"+v.suffix, ms(maxRT))
		wa := v.run.window(0, after, c.duration)
		s.Set("mean_rt_ms_after"+v.suffix, ms(wa.meanRT()))
		// The transient: seconds from the step until the per-second mean
		// RT of the good replies is back within 10× its level before the
		// step for the rest of the step (NaN if it never is).
		before := v.run.window(0, c.stepAt-10*time.Second, c.stepAt).meanRT()
		s.Set("mean_rt_ms_before"+v.suffix, ms(before))
		settle := math.NaN()
		for k := int(c.stepEnd/time.Second) - 1; k >= int(c.stepAt/time.Second); k-- {
			b := v.run.bins[0][k]
			if b.good == 0 || b.rtSum/float64(b.good) > 10*before {
				break
			}
			settle = float64(k) - c.stepAt.Seconds()
		}
		s.Set("rt_settle_s"+v.suffix, settle)
	}
	// How fast the policer closes the gap to what the server sustains:
	// periods from the step until its rate is below the midpoint of its
	// initial rate and the controlled throughput during the step
	// (figure.HalfwayToCapacity).
	mid := (initial + s.Metric("throughput_rps_step")) / 2
	toMid := math.NaN()
	for _, st := range ctl.policer.steps {
		if end := st.end(); end > c.stepAt && st.Decision.New < mid {
			toMid = float64((end - c.stepAt + h - 1) / h)
			break
		}
	}
	s.Set("periods_to_halfway_to_capacity", toMid)
	res.AddTable("timeseries.csv", voigtTimeseries(ctl, 0))
	res.AddTable("timeseries_uncontrolled.csv", voigtTimeseries(unc, 0))
	res.Key = []string{"policer_rate_after_5_periods", "periods_to_half_rate", "periods_to_halfway_to_capacity", "policer_rate_min",
		"throughput_rps_step", "mean_rt_ms_step", "mean_rt_ms_max", "rt_settle_s", "rt_settle_s_uncontrolled", "policer_rate_end", "policer_drop_fraction_after"}
	// The CPU rule should have climbed to the dynamic requests' offered
	// rate at the low load by the step.
	pDyn := fl.mix[voigtDynamic] / (fl.mix[voigtStatic] + fl.mix[voigtDynamic] + fl.mix[voigtLarge])
	res.Checks = figure.VoigtStepChecks(s, c.stepEnd-c.stepAt, c.rate.At(c.stepAt-time.Nanosecond)*pDyn, c.model.timeout)
}

// renderVoigtStep draws step.png: Fig. 5's SYN policing and CGI rates
// over time with the offered rate, the mean RT per second and the listen
// queue.
func renderVoigtStep(res *figure.Result, c voigtStepParams, r *voigtStepRun) {
	ctl, unc := r.ctl, r.unc
	initial := rateAt(ctl.policer, 0)
	// Fig. 5: the SYN policing rate and the CGI rate over time, with the
	// offered rate; below, the mean RT per second and the listen queue.
	var x, pol, cgi, off, rtc, rtu, lq []float64
	for k := range int(c.duration / time.Second) {
		t := time.Duration(k+1) * time.Second
		x = append(x, t.Seconds())
		pol = append(pol, rateAt(ctl.policer, t))
		cgi = append(cgi, rateAt(ctl.cgi, t))
		off = append(off, c.rate.At(t-time.Second))
		b, u := ctl.bins[0][k], unc.bins[0][k]
		rtc = append(rtc, ms(ratio(b.rtSum, float64(b.good))))
		rtu = append(rtu, ms(ratio(u.rtSum, float64(u.good))))
	}
	for _, r := range ctl.monCPU.rows {
		lq = append(lq, r.queue)
	}
	vl := []report.RefLine{{Value: c.stepAt.Seconds()}, {Value: c.stepEnd.Seconds()}}
	rates := report.Panel{Title: "sudden high load (Fig. 5)", XLabel: "time (s)", YLabel: "rate (req/s)", YMin: 0, YMax: 1500, VLines: vl,
		LegendLeft: true,
		Series: []report.Series{
			{Label: "SYN policing rate", X: x, Y: pol},
			{Label: "offered rate", X: x, Y: off, Dashed: true},
		},
		HLines: []report.RefLine{{Value: initial / 2, Label: fmt.Sprintf("half the initial rate (%g/s)", initial/2)}}}
	cgiP := report.Panel{XLabel: "time (s)", YLabel: "CGI rate (req/s)", VLines: vl, YMin: 0, LegendBottom: true,
		Series: []report.Series{{Label: "CPU rule: CGI acceptance rate", X: x, Y: cgi}}}
	rt := report.Panel{XLabel: "time (s)", YLabel: "mean RT per second (ms)", LogY: true, VLines: vl, LegendLeft: true, YMin: 1, YMax: 1e5,
		Series: []report.Series{{Label: "controlled (admitted requests)", X: x, Y: rtc}, {Label: "no controls", X: x, Y: rtu}}}
	lqP := report.Panel{XLabel: "time (s)", YLabel: "listen queue (requests)", VLines: vl, YMin: 0, YMax: 1.4 * float64(c.model.listenQueue),
		Series: []report.Series{{Label: "listen queue at each period's end (controlled)", X: x[:min(len(x), len(lq))], Y: lq[:min(len(x), len(lq))]}},
		HLines: []report.RefLine{{Value: 100, Label: "q_ref 100"}}}
	res.AddFigure("step.png", &report.Figure{PanelHeight: 2.6, Panels: []report.Panel{rates, cgiP, rt, lqP}})
}
