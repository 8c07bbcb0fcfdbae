// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
)

// voigt-sweep is Voigt & Gunningberg's Fig. 4 (throughput and mean
// response time against the offered rate, with and without the
// controls), Table 1 (the offered rate at which the connection policer
// sets in, for 0, 10 and 20 % dynamic requests) and Fig. 6 (Poisson
// against constant arrivals), live. The backend is the CGI testbed
// pinned to one CPU, burning the simulator's per-request CPU demands; the
// proxy and the load generator run on the other CPU.

// voigtPoint is one offered rate of a staircase: tput is the rate of OK
// replies completed in its window (voigtWindow.replyRate), rt the mean RT
// of the OK replies to the requests sent in it.
type voigtPoint struct {
	rate                         float64
	tput, rt                     float64
	polDrop, ruleDrop, failed    float64
	cgiRate, cpu, policer, queue float64
}

// runSpan is a window [from, to) of a run's intended send times.
type runSpan struct {
	run      *cpuRun
	from, to time.Duration
}

// voigtPoints measures every step of a staircase run.
func voigtPoints(r *cpuRun, sc staircase) []voigtPoint {
	var out []voigtPoint
	for i, rate := range sc.rates {
		from, to := sc.window(i)
		out = append(out, voigtPointOf(rate, []runSpan{{r, from, to}}))
	}
	return out
}

// voigtPointOf measures the offered rate over the spans together:
// throughput and drops pooled over them, the rates at each span's end and
// the CPU and queue averaged over them, weighted by their lengths.
func voigtPointOf(rate float64, spans []runSpan) voigtPoint {
	p := voigtPoint{rate: rate}
	var w voigtWindow
	var polOff, polRej, ruleRej, other, secs float64
	controlled := len(spans) > 0 && spans[0].run.controlled
	for _, sp := range spans {
		r, from, to := sp.run, sp.from, sp.to
		x := windowOf(r.recs, from, to, nil)
		w.secs, w.offered, w.ok, w.rtSum, w.replied = w.secs+x.secs, w.offered+x.offered, w.ok+x.ok, w.rtSum+x.rtSum, w.replied+x.replied
		off := delta(r.samples, from, to, func(s *voigtSample) float64 { return s.polOffered })
		rej := delta(r.samples, from, to, func(s *voigtSample) float64 { return s.polRejected })
		rr := delta(r.samples, from, to, func(s *voigtSample) float64 { return s.cgiRejected + s.largeRejected })
		if !controlled {
			off, rej, rr = 0, 0, 0
		}
		polOff, polRej, ruleRej = polOff+off, polRej+rej, ruleRej+rr
		// Failures other than the controls' refusals: timeouts, the
		// pool's 503s (full queue, queue timeout), other errors.
		other += math.Max(0, float64(x.timeouts+x.errors+x.rejected)-rej-rr)
		k := x.secs
		p.cgiRate += k * valueAt(r.samples, to, func(s *voigtSample) float64 { return s.cgiRate })
		p.policer += k * valueAt(r.samples, to, func(s *voigtSample) float64 { return s.polRate })
		p.cpu += k * meanOver(r.samples, from, to, func(s *voigtSample) float64 { return s.cpu })
		p.queue += k * meanOver(r.samples, from, to, func(s *voigtSample) float64 { return s.queue })
		secs += k
	}
	p.tput, p.rt = w.replyRate(), w.meanRT()
	p.polDrop, p.ruleDrop = ratio(polRej, polOff), ratio(ruleRej, float64(w.offered))
	if !controlled {
		p.polDrop, p.ruleDrop = math.NaN(), math.NaN()
	}
	p.failed = ratio(other, float64(w.offered))
	p.cgiRate, p.policer, p.cpu, p.queue = ratio(p.cgiRate, secs), ratio(p.policer, secs), ratio(p.cpu, secs), ratio(p.queue, secs)
	return p
}

// voigtTopHold and voigtTopHoldQuick are the lengths of the runs at the
// sweep's highest rate, measured over their second half: about the time
// the policer's PD needs to bring its rate from 1000/s to the capacity
// and drain the queue it let in (the live voigt-step of 2026-11-27: rate
// at its minimum after 9 periods, the mean RT back to normal 14 s after
// the step; voigt-sweep's run of 10:37: 16 s).
const (
	voigtTopHold      = 26 * time.Second
	voigtTopHoldQuick = 20 * time.Second
)

// The full form runs the highest rate twice, once starting with constant
// arrivals and once with Poisson ones, and splits each run's measured
// half into voigtTopSegments segments that alternate between the two
// (the first continuing the run's own), each measured after
// voigtTopSkip. Constant and Poisson arrivals (Fig. 6) are then compared
// under the same controller state: where the PD's rate freezes after
// its transient (the paper's guard keeps it while the queue stays below
// q_ref and unchanged) differs from run to run by about the 10 % the
// comparison allows (lab/NOTEBOOK.md, "voigt-sweep: Poisson against
// constant arrivals").
const (
	voigtTopSegments = 4
	voigtTopSkip     = 500 * time.Millisecond
)

// voigtSweepDynamic is the dynamic fraction of the sweep's load (Fig. 4).
const voigtSweepDynamic = 0.2

// voigtOnsetThreshold is the fraction of connections reset that marks the
// onset of policing in the simulator's definition.
const voigtOnsetThreshold = 0.01

// voigtPaperOnset are the paper's onsets of policing (Table 1) by dynamic
// fraction, req/s.
var voigtPaperOnset = map[float64]float64{0: 610, 0.1: 640, 0.2: 675}

// runVoigtSweep is the experiment in four steps: plan the staircases and
// ramps for the calibrated backend, run each in turn, analyse them into
// the summary's metrics, and render tables, plots, checks and setup.
func runVoigtSweep(ctx context.Context, env *Env) (*figure.Result, error) {
	b, restore, err := startCPUBackend(ctx, env)
	if err != nil {
		return nil, err
	}
	defer restore()
	defer b.close() //nolint:errcheck // the backend child at the end
	pl, err := planVoigtSweep(env, b)
	if err != nil {
		return nil, err
	}
	for _, r := range pl.runs {
		if err := r.run(ctx, env, b); err != nil {
			return nil, err
		}
	}
	res := figure.NewResult(env.Name, figure.Live, env.Seed)
	an, err := analyseVoigtSweep(res.Summary, pl, b)
	if err != nil {
		return nil, err
	}
	if err := renderVoigtSweep(res, pl, b, an); err != nil {
		return nil, err
	}
	res.Setup = append(res.Setup, policerKernelNote(env))
	return res, nil
}

// voigtSweepPlan is what the sweep runs: the controlled and uncontrolled
// staircases of Fig. 4, the Poisson staircase of Fig. 6 (full form only)
// and one rate ramp per dynamic fraction for Table 1's onsets.
type voigtSweepPlan struct {
	rates      []float64
	holds      []time.Duration
	uncHold    time.Duration
	fractions  []float64
	rampLen    int
	rampStep   float64
	sc, scU    staircase // the staircases; the controlled one stops below the highest rate
	scTop      staircase // the runs at the highest rate
	schedC     dist.Schedule
	ctl, unc   *cpuRun
	tops       []*cpuRun // the highest rate, runs of their own: constant arrivals first, then (full form) Poisson first
	ramps      []*cpuRun
	rampScheds []dist.Schedule
	rampStarts []float64
	rampEnd    time.Duration
	runs       []*cpuRun // every run, in order
}

// planVoigtSweep lays out the runs for backend b (whose calibrated demands
// set where each onset ramp starts).
func planVoigtSweep(env *Env, b *cpuBackend) (*voigtSweepPlan, error) {
	pl := &voigtSweepPlan{
		rates: pick(env, []float64{200, 300, 400, 500, 600, 700, 800, 1000}, []float64{300, 600, 1000}),
		holds: pick(env, []time.Duration{6 * time.Second, 6 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second},
			[]time.Duration{10 * time.Second, 3 * time.Second, 6 * time.Second}),
		uncHold:   3 * time.Second,
		fractions: pick(env, []float64{0, 0.1, 0.2}, []float64{0, 0.2}),
		rampLen:   pick(env, 20, 12),
		rampStep:  pick(env, 15.0, 30.0),
	}
	// The controlled staircase stops below the highest rate: its point
	// is measured in runs of its own (below).
	last := len(pl.rates) - 1
	pl.sc, pl.scU = newStaircase(pl.rates[:last], pl.holds...), newStaircase(pl.rates, pl.uncHold)
	var err error
	if pl.schedC, err = pl.sc.schedule(); err != nil {
		return nil, err
	}
	schedU, err := pl.scU.schedule()
	if err != nil {
		return nil, err
	}
	pl.ctl = &cpuRun{name: "controlled", controlled: true, dynamic: voigtSweepDynamic, rate: pl.schedC, length: pl.sc.end, seed: env.Seed}
	pl.unc = &cpuRun{name: "uncontrolled", dynamic: voigtSweepDynamic, rate: schedU, length: pl.scU.end, seed: env.Seed}
	pl.runs = []*cpuRun{pl.ctl, pl.unc}
	// The highest rate as runs of their own, as the paper's and the
	// simulator's every point: the policer starts at its initial 1000/s
	// instead of inheriting a staircase's rate (lab/NOTEBOOK.md,
	// "voigt-sweep: what the simulator rules out").
	top := pl.rates[last]
	pl.scTop = newStaircase([]float64{top}, pick(env, voigtTopHold, voigtTopHoldQuick))
	schedT, err := pl.scTop.schedule()
	if err != nil {
		return nil, err
	}
	pl.tops = []*cpuRun{{name: "top", controlled: true, dynamic: voigtSweepDynamic, rate: schedT, length: pl.scTop.end, seed: env.Seed}}
	if !env.Quick {
		pl.tops[0].switches = topSwitches(pl.scTop)
		pl.tops = append(pl.tops, &cpuRun{name: "top poisson", controlled: true, dynamic: voigtSweepDynamic, rate: schedT, poisson: true,
			switches: topSwitches(pl.scTop), length: pl.scTop.end, seed: env.Seed + 1})
	}
	pl.runs = append(pl.runs, pl.tops...)
	// The onset runs: each rate ramp starts where the backend's CPU is at
	// 90 % with the CPU rule at its minimum of 10 CGI/s, so that the rule
	// is at its minimum when policing sets in, as in the paper's long runs
	// (it falls by at most 2 req/s per period, too slowly for a ramp).
	for _, f := range pl.fractions {
		entries, err := voigtFileSet(f)
		if err != nil {
			return nil, err
		}
		pd, _, _ := fileMix(entries)
		start := rampStart(pd, b.static, b.dynamic)
		var rr []float64
		for k := range pl.rampLen {
			rr = append(rr, start+float64(k)*pl.rampStep)
		}
		ramp := newStaircase(rr, time.Second)
		sched, err := ramp.schedule()
		if err != nil {
			return nil, err
		}
		r := &cpuRun{name: fmt.Sprintf("onset %g%%", 100*f), controlled: true, dynamic: f, rate: sched, length: ramp.end, seed: env.Seed}
		pl.rampStarts, pl.rampScheds, pl.ramps, pl.rampEnd = append(pl.rampStarts, start), append(pl.rampScheds, sched), append(pl.ramps, r), ramp.end
		pl.runs = append(pl.runs, r)
	}
	return pl, nil
}

// topSwitches are the offsets at which the runs at the highest rate
// switch between constant and Poisson arrivals: the boundaries of the
// measured half's voigtTopSegments segments, the first segment going on
// with the run's own arrivals.
func topSwitches(sc staircase) []time.Duration {
	from, to := sc.window(0)
	seg := (to - from) / voigtTopSegments
	var out []time.Duration
	for k := 1; k < voigtTopSegments; k++ {
		out = append(out, from+time.Duration(k)*seg)
	}
	return out
}

// topSpans are the parts of the runs at the highest rate that measure
// Poisson (or constant) arrivals: each segment of the measured half
// whose arrivals are of that kind, from voigtTopSkip after its start (a
// run without switches: its whole measured half).
func topSpans(runs []*cpuRun, sc staircase, poisson bool) []runSpan {
	from, to := sc.window(0)
	var out []runSpan
	for _, r := range runs {
		if len(r.switches) == 0 {
			if r.poisson == poisson {
				out = append(out, runSpan{r, from, to})
			}
			continue
		}
		bounds := append(append([]time.Duration{from}, r.switches...), to)
		for k := 0; k+1 < len(bounds); k++ {
			if r.poissonAt(bounds[k]) == poisson {
				out = append(out, runSpan{r, bounds[k] + voigtTopSkip, bounds[k+1]})
			}
		}
	}
	return out
}

// voigtSweepAnalysis is what analyseVoigtSweep derived: the per-step
// points of each staircase and the onsets of each ramp.
type voigtSweepAnalysis struct {
	pc, pu, pp           []voigtPoint
	onsets, discards     []float64
	onsetAt, discardAt   []time.Duration
	pDyn, pLarge, meanKB float64
}

// analyseVoigtSweep sets the summary's metrics: the onsets of policing
// (queue and discard definitions) per dynamic fraction, throughput, mean
// RT, drops and CPU per offered rate with and without controls (and with
// Poisson arrivals), the plateau and the peaks, the workload's mix and
// the backend's calibration.
func analyseVoigtSweep(s *report.Summary, pl *voigtSweepPlan, b *cpuBackend) (*voigtSweepAnalysis, error) {
	an := &voigtSweepAnalysis{pc: voigtPoints(pl.ctl, pl.sc), pu: voigtPoints(pl.unc, pl.scU)}
	// The highest rate's point: the constant-arrival parts of its runs.
	top := pl.scTop.rates[0]
	tag := fmtRate(top)
	an.pc = append(an.pc, voigtPointOf(top, topSpans(pl.tops, pl.scTop, false)))
	s.Set("policer_rate_at_"+tag, an.pc[len(an.pc)-1].policer)
	if len(pl.tops) > 1 {
		an.pp = []voigtPoint{voigtPointOf(top, topSpans(pl.tops, pl.scTop, true))}
		// Each run's constant and Poisson parts on their own: how far
		// apart the runs are (where each one's PD froze) against how far
		// apart the arrivals are within them.
		var cs []float64
		for i, r := range pl.tops {
			c := voigtPointOf(top, topSpans([]*cpuRun{r}, pl.scTop, false)).tput
			p := voigtPointOf(top, topSpans([]*cpuRun{r}, pl.scTop, true)).tput
			s.Set(fmt.Sprintf("throughput_rps_at_%s_run%d", tag, i+1), c)
			s.Set(fmt.Sprintf("throughput_rps_at_%s_poisson_run%d", tag, i+1), p)
			cs = append(cs, c)
		}
		s.Set("throughput_rps_at_"+tag+"_run_spread", ratio(math.Abs(cs[0]-cs[1]), (cs[0]+cs[1])/2))
		s.Set("throughput_rps_at_"+tag+"_poisson_difference", ratio(an.pp[0].tput-an.pc[len(an.pc)-1].tput, an.pc[len(an.pc)-1].tput))
	}
	// Table 1: the onset of policing per dynamic fraction.
	for i, f := range pl.fractions {
		on, at := queueOnset(pl.ramps[i].samples, pl.rampScheds[i].At, 100)
		dis, dat := onsetRate(pl.ramps[i].samples, pl.rampScheds[i].At, 0, pl.rampEnd, time.Second, voigtOnsetThreshold)
		an.onsets, an.onsetAt = append(an.onsets, on), append(an.onsetAt, at)
		an.discards, an.discardAt = append(an.discards, dis), append(an.discardAt, dat)
		s.Set("policing_onset_rps_"+figure.PctTag(f), on)
		s.Set("policing_discard_onset_rps_"+figure.PctTag(f), dis)
		s.Set("onset_ramp_start_rps_"+figure.PctTag(f), pl.rampStarts[i])
	}
	s.Set("policing_onset_increasing", b2f(increasing(an.onsets)))
	s.Set("policing_discard_onset_increasing", b2f(increasing(an.discards)))
	maxT, maxU, maxRT, maxRTU := 0.0, 0.0, 0.0, 0.0
	for i := range an.pc {
		c, u := an.pc[i], an.pu[i]
		tag := fmtRate(c.rate)
		s.Set("throughput_rps_at_"+tag, c.tput)
		s.Set("mean_rt_ms_at_"+tag, c.rt)
		s.Set("policer_drop_fraction_at_"+tag, c.polDrop)
		s.Set("cpu_utilization_at_"+tag, c.cpu)
		s.Set("throughput_rps_at_"+tag+"_uncontrolled", u.tput)
		s.Set("mean_rt_ms_at_"+tag+"_uncontrolled", u.rt)
		s.Set("cpu_utilization_at_"+tag+"_uncontrolled", u.cpu)
		maxT, maxU = math.Max(maxT, c.tput), math.Max(maxU, u.tput)
		if !math.IsNaN(c.rt) {
			maxRT = math.Max(maxRT, c.rt)
		}
		if !math.IsNaN(u.rt) {
			maxRTU = math.Max(maxRTU, u.rt)
		}
	}
	for _, p := range an.pp {
		s.Set("throughput_rps_at_"+fmtRate(p.rate)+"_poisson", p.tput)
		s.Set("mean_rt_ms_at_"+fmtRate(p.rate)+"_poisson", p.rt)
	}
	last := len(an.pc) - 1
	s.Set("throughput_rps_max", maxT)
	s.Set("throughput_rps_max_uncontrolled", maxU)
	s.Set("mean_rt_ms_max", maxRT)
	s.Set("mean_rt_ms_max_uncontrolled", maxRTU)
	s.Set("plateau_ratio", ratio(an.pc[last].tput, maxT))
	s.Set("plateau_ratio_uncontrolled", ratio(an.pu[last].tput, maxU))
	s.Set("mean_rt_ms_at_max_rate", an.pc[last].rt)
	s.Set("mean_rt_ms_at_max_rate_uncontrolled", an.pu[last].rt)
	entries, err := voigtFileSet(voigtSweepDynamic)
	if err != nil {
		return nil, err
	}
	var meanBytes float64
	an.pDyn, an.pLarge, meanBytes = fileMix(entries)
	an.meanKB = meanBytes / 1e3
	s.Set("mean_reply_kb", an.meanKB)
	s.Set("large_request_fraction", an.pLarge)
	s.Set("dynamic_request_fraction", an.pDyn)
	s.Set("time_scale", 1)
	b.report(s)
	reportForeign(s, pl.runs)
	// The backend's capacity implied by the demands: all requests, and
	// the static ones with the CPU rule at its minimum of 10 CGI/s.
	meanCPU := (1-an.pDyn)*b.static.Seconds() + an.pDyn*b.dynamic.Seconds()
	s.Set("capacity_rps_uncontrolled_estimate", 1/meanCPU)
	s.Set("onset_rps_20pct_estimate", (1-10*b.dynamic.Seconds())/((1-an.pDyn)*b.static.Seconds()))
	return an, nil
}

// renderVoigtSweep writes the analysis into res: the sweep, onset and
// time-series tables, the paper's expectations checked on this run, the
// headline metrics, the setup and the plots of Fig. 4, Fig. 6 and Table 1.
func renderVoigtSweep(res *figure.Result, pl *voigtSweepPlan, b *cpuBackend, an *voigtSweepAnalysis) error {
	s := res.Summary
	rates, holds, uncHold, fractions, rampLen, rampStep, rampStarts := pl.rates, pl.holds, pl.uncHold, pl.fractions, pl.rampLen, pl.rampStep, pl.rampStarts
	pc, pu, pp, onsets, ramps, rampScheds, ctl := an.pc, an.pu, an.pp, an.onsets, pl.ramps, pl.rampScheds, pl.ctl
	pLarge, pDyn, paperOnset, dynamic, onsetThreshold := an.pLarge, an.pDyn, voigtPaperOnset, voigtSweepDynamic, voigtOnsetThreshold
	last := len(pc) - 1
	onsetTab := report.NewTable("dynamic_fraction", "ramp_start_rps", "onset_rps", "onset_at_s", "discard_onset_rps", "discard_onset_at_s", "paper_onset_rps")
	for i, f := range fractions {
		if err := onsetTab.Append(f, rampStarts[i], onsets[i], an.onsetAt[i].Seconds(), an.discards[i], an.discardAt[i].Seconds(), paperOnset[f]); err != nil {
			return err
		}
	}
	sweep := report.NewTable("offered_rps", "throughput_rps", "mean_rt_ms", "policer_drop_fraction", "rule_drop_fraction",
		"failed_fraction", "cgi_rate_rps", "policer_rate_rps", "cpu_utilization", "listen_queue",
		"throughput_rps_uncontrolled", "mean_rt_ms_uncontrolled", "failed_fraction_uncontrolled", "cpu_utilization_uncontrolled",
		"listen_queue_uncontrolled")
	for i := range pc {
		c, u := pc[i], pu[i]
		if err := sweep.Append(c.rate, c.tput, c.rt, c.polDrop, c.ruleDrop, c.failed, c.cgiRate, c.policer, c.cpu, c.queue,
			u.tput, u.rt, u.failed, u.cpu, u.queue); err != nil {
			return err
		}
	}
	res.AddTable("sweep.csv", sweep)
	res.AddTable("onset.csv", onsetTab)
	res.AddTable("timeseries.csv", voigtSampleTable(pl.runs...))

	hi := fmtRate(rates[last])
	res.Checks = figure.VoigtSweepChecks(s, hi)
	res.Key = []string{"policing_onset_rps_0pct", "policing_onset_rps_10pct", "policing_onset_rps_20pct",
		"throughput_rps_max", "plateau_ratio", "plateau_ratio_uncontrolled", "mean_rt_ms_at_max_rate", "mean_rt_ms_at_max_rate_uncontrolled"}

	var fr []string
	for _, f := range fractions {
		fr = append(fr, fmt.Sprintf("%g %%", 100*f))
	}
	res.Setup = []string{
		b.where(),
		fmt.Sprintf("Service: real CPU work calibrated before the runs (%.2f ns per random number, %v of HTTP handling per request; %s): %v per static request (small or /islarge/) and %v per dynamic one (/cgi-bin/), the simulator's kernel + worker demands (0.3 + 1.4 ms, 0.3 + 4 ms). Replies are small (the CGI testbed returns a sum), so the outgoing link is not a bottleneck here and the bandwidth rule stays idle; the per-connection kernel work of the paper's server is done by the proxy on the other CPU, so the backend suffers no receive livelock.",
			b.ns, b.overhead.Round(time.Microsecond), cgiWorkNote(b.cpuTimeNs), b.static, b.dynamic),
		fmt.Sprintf("Load: the SURGE-like file set of the static testbed (%d files, file-set seed %d, sizes capped at 1 MiB, Zipf 1): %.1f %% of requests for /islarge/, %.1f %% dynamic at the 20 %% setting, sent open-loop at a constant rate (sclient-like), one new connection per request (HTTP/1.0-like), client timeout %v; a connection not established within %v is aborted, as sclient does (a SYN the policer dropped in the kernel is a refused request).",
			voigtFiles, voigtFileSeed, 100*pLarge, 100*pDyn, voigtTimeout, voigtConnectTimeout),
		fmt.Sprintf("Proxy: pool of %d backend connections (the paper's workers) with a wait queue of 1024 and a %v timeout (the listen queue). Controlled: voigt-cpu on /cgi-bin/ (util_ref 90, kp 0.2, min_rate 10, initial 10/s, bucket 5), voigt-queue on /islarge/ (outgoing queue, q_ref 35), and the connection policer (initial 1000/s, bucket 20, PD on the wait queue with q_ref 100, kp 1/16, kd 1/4, CPU guard 90 %%). Uncontrolled: the same proxy and pool without rules or policer. "+queueNote,
			voigtWorkers, voigtQueueTimeout),
		fmt.Sprintf("Sweep (Fig. 4), shortened to fit the time budget: instead of one 60 s run per rate, one staircase run per variant over %v req/s (controlled: up to %v), holding the rates for %v (the last hold for every later rate; uncontrolled: every step %v), each step measured over its second half; the controllers carry their state from step to step, and the CGI rule starts at 10/s as in the simulator. The highest rate's controlled point is measured in runs of its own (%v each, over their second half), as each of the paper's and the simulator's points: a staircase's last step inherits a policer rate the earlier steps' backlog drove down, and the PD's guard keeps it there while the queue stays empty. No time compression (time_scale 1, control period 1 s).",
			rates, pl.sc.rates[len(pl.sc.rates)-1], holds, uncHold, pl.scTop.end),
		fmt.Sprintf("Onset of policing (Table 1), for %v dynamic: one controlled run per fraction whose rate rises by %g req/s every second for %d s from %v req/s, the rate at which the backend's CPU is 90 %% busy with the CPU rule at its minimum of 10 CGI/s (computed from the demands and the file set), so that the rule is at its minimum when policing sets in, as in the paper's long runs (it can fall by only 2 req/s per period, too slowly for a ramp). The onset (policing_onset_rps_*) is the offered rate when the wait queue first exceeds the policer's reference q_ref = 100, from which on its PD lowers the policing rate. The simulator's definition, the first second in which the policer resets at least %g%% of the connections, is reported as policing_discard_onset_rps_*: on a ramp it lags by the several periods the PD needs to bring the rate from 1000/s down to the offered rate.",
			fr, rampStep, rampLen, rampStarts, 100*onsetThreshold),
	}
	if len(pl.tops) > 1 {
		sw := topSwitches(pl.scTop)
		res.Setup = append(res.Setup, fmt.Sprintf("Fig. 6: two runs at %v req/s, one starting with constant arrivals and one with Poisson arrivals (seed + 1); each run's measured half is split at %v into segments whose arrivals alternate between the two, the first going on with the run's own; each segment is measured from %v after its start. The constant point (Fig. 4) pools the constant segments of both runs, the Poisson point (Fig. 6) the Poisson ones: the two arrival processes meet the same controller states, and where each run's PD froze after its transient (run to run: throughput_rps_at_%v_run_spread) counts in both alike.",
			rates[last], sw, voigtTopSkip, fmtRate(rates[last])))
	}

	// Fig. 4 (and Fig. 6): throughput and mean RT against the offered rate.
	col := func(ps []voigtPoint, f func(p *voigtPoint) float64) (x, y []float64) {
		for i := range ps {
			x, y = append(x, ps[i].rate), append(y, f(&ps[i]))
		}
		return x, y
	}
	xt, yt := col(pc, func(p *voigtPoint) float64 { return p.tput })
	xu, yu := col(pu, func(p *voigtPoint) float64 { return p.tput })
	tput := report.Panel{Title: fmt.Sprintf("throughput vs offered rate, %g %% dynamic (Fig. 4 left, Fig. 6)", 100*dynamic),
		XLabel: "offered rate (req/s)", YLabel: "throughput (replies/s within timeout)", LegendLeft: true, YMin: 0, YMax: 1.1 * rates[last],
		Series: []report.Series{{Label: "controlled (constant)", X: xt, Y: yt, Kind: report.LinePoints},
			{Label: "no controls (constant)", X: xu, Y: yu, Kind: report.LinePoints}}}
	if len(pp) > 0 {
		xp, yp := col(pp, func(p *voigtPoint) float64 { return p.tput })
		tput.Series = append(tput.Series, report.Series{Label: "controlled (poisson)", X: xp, Y: yp, Kind: report.LinePoints, Dashed: true})
	}
	for i, f := range fractions {
		if f == dynamic && !math.IsNaN(onsets[i]) {
			tput.VLines = append(tput.VLines, report.RefLine{Value: onsets[i], Label: fmt.Sprintf("policing sets in: %.0f req/s", onsets[i])})
		}
	}
	xr, yr := col(pc, func(p *voigtPoint) float64 { return p.rt })
	xru, yru := col(pu, func(p *voigtPoint) float64 { return p.rt })
	rt := report.Panel{Title: "mean response time vs offered rate (Fig. 4 right)", XLabel: "offered rate (req/s)", YLabel: "mean RT (ms)",
		LogY: true, LegendLeft: true, YMin: 1, YMax: 1e4,
		Series: []report.Series{{Label: "controlled", X: xr, Y: yr, Kind: report.LinePoints},
			{Label: "no controls", X: xru, Y: yru, Kind: report.LinePoints}},
		HLines: []report.RefLine{{Value: msOf(voigtTimeout), Label: fmt.Sprintf("client timeout %v", voigtTimeout)}}}
	xd, yd := col(pc, func(p *voigtPoint) float64 { return p.polDrop })
	xe, ye := col(pc, func(p *voigtPoint) float64 { return p.ruleDrop })
	xf, yf := col(pc, func(p *voigtPoint) float64 { return p.failed })
	drops := report.Panel{Title: "where requests are refused (controlled)", XLabel: "offered rate (req/s)", YLabel: "fraction of offered",
		YMin: 0, YMax: 1, LegendLeft: true,
		Series: []report.Series{{Label: "connection policer", X: xd, Y: yd, Kind: report.LinePoints},
			{Label: "resource rules (CGI, /islarge/)", X: xe, Y: ye, Kind: report.LinePoints},
			{Label: "timed out or refused by the pool", X: xf, Y: yf, Kind: report.LinePoints}}}
	res.AddFigure("sweep.png", &report.Figure{PanelHeight: 3.4, Panels: []report.Panel{tput, rt, drops}})

	onsetP := report.Panel{Title: "offered rate at which policing sets in (Table 1)", XLabel: "dynamic requests (% of small-file requests)",
		YLabel: "onset of policing (req/s)", YMin: 0, YMax: 1300,
		Series: []report.Series{{Label: "this run", X: scaleAll(fractions, 100), Y: onsets, Kind: report.Bars}}}
	var py []float64
	for _, f := range fractions {
		py = append(py, paperOnset[f])
	}
	onsetP.Series = append(onsetP.Series, report.Series{Label: "paper (their server)", X: scaleAll(fractions, 100), Y: py, Kind: report.Bars})
	trace := report.Panel{Title: "the onset runs: connection policer rate while the offered rate rises", XLabel: "time (s)", YLabel: "rate (req/s)",
		YMin: 0, YMax: 1100, LegendBottom: true}
	for i, f := range fractions {
		var ox, oy []float64
		for _, sm := range ramps[i].samples {
			ox, oy = append(ox, sm.t.Seconds()), append(oy, rampScheds[i].At(sm.t))
		}
		trace.Series = append(trace.Series, report.Series{Label: fmt.Sprintf("offered rate, %g %% dynamic", 100*f), X: ox, Y: oy, Dashed: true})
	}
	for i, f := range fractions {
		var x, y []float64
		for _, sm := range ramps[i].samples {
			x, y = append(x, sm.t.Seconds()), append(y, sm.polRate)
		}
		trace.Series = append(trace.Series, report.Series{Label: fmt.Sprintf("policer rate, %g %% dynamic", 100*f), X: x, Y: y})
	}
	res.AddFigure("onset.png", &report.Figure{PanelHeight: 3, Panels: []report.Panel{onsetP, trace}})
	res.AddFigure("controller.png", cpuRunFigure(ctl, "controlled staircase: offered rate, policer and CGI rates, backend CPU", pl.schedC.At))
	for i, r := range pl.tops {
		what := "constant arrivals"
		if len(r.switches) > 0 {
			first := map[bool]string{false: "constant", true: "Poisson"}[r.poisson]
			what = fmt.Sprintf("%s arrivals first, alternating from %v", first, r.switches[0])
		}
		name := "controller_top.png"
		if i > 0 {
			name = fmt.Sprintf("controller_top%d.png", i+1)
		}
		res.AddFigure(name, cpuRunFigure(r, fmt.Sprintf("the run at %v req/s (%s): offered rate, policer and CGI rates, backend CPU", rates[last], what), r.rate.At))
	}
	return nil
}

// rampStart is the offered rate, rounded down to 10 req/s, at which the
// backend's CPU is 90 % busy when a fraction pd of the requests is dynamic
// and the CPU rule admits only its minimum of 10 of them per second:
// 0.9 = R·(1−pd)·static + 10·dynamic (no CGI term without dynamic
// requests).
func rampStart(pd float64, static, dynamic time.Duration) float64 {
	cgi := 0.0
	if pd > 0 {
		cgi = 10 * dynamic.Seconds()
	}
	return 10 * math.Floor((0.9-cgi)/((1-pd)*static.Seconds())/10)
}

// increasing reports whether xs is strictly increasing and has no NaN.
func increasing(xs []float64) bool {
	for i := range xs {
		if math.IsNaN(xs[i]) || (i > 0 && !(xs[i] > xs[i-1])) {
			return false
		}
	}
	return len(xs) > 0
}

// scaleAll multiplies every x by k.
func scaleAll(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = k * x
	}
	return out
}

// voigtSampleTable lists the samples of runs: the run, time, the rates
// of the policer and the rules, the wait queue and the backend's CPU.
func voigtSampleTable(runs ...*cpuRun) *report.Table {
	t := report.NewTable("run", "time_s", "offered_rps", "policer_rate", "policer_offered", "policer_rejected", "listen_queue",
		"cgi_rate", "cgi_offered", "cgi_rejected", "large_rate", "out_queue", "cpu_utilization")
	for _, r := range runs {
		for _, s := range r.samples {
			_ = t.Append(r.name, s.t.Seconds(), r.rate.At(s.t), s.polRate, s.polOffered, s.polRejected, s.queue,
				s.cgiRate, s.cgiOffered, s.cgiRejected, s.largeRate, s.outQueue, s.cpu)
		}
	}
	return t
}

// cpuRunFigure draws a controlled run: the offered rate and the
// policer's rate, the CGI rule's rate, the wait queue and the CPU.
func cpuRunFigure(r *cpuRun, title string, offered func(t time.Duration) float64) *report.Figure {
	var x, off, pol, cgi, q, cpu []float64
	for _, s := range r.samples {
		x = append(x, s.t.Seconds())
		off = append(off, offered(s.t))
		pol, cgi = append(pol, s.polRate), append(cgi, s.cgiRate)
		q, cpu = append(q, s.queue), append(cpu, 100*s.cpu)
	}
	return &report.Figure{PanelHeight: 2.6, Panels: []report.Panel{
		{Title: title, XLabel: "time (s)", YLabel: "rate (req/s)", YMin: 0, YMax: 1200, LegendLeft: true,
			Series: []report.Series{{Label: "connection policer rate", X: x, Y: pol}, {Label: "offered rate", X: x, Y: off, Dashed: true}}},
		{XLabel: "time (s)", YLabel: "CGI rate (req/s)", YMin: 0, LegendLeft: true,
			Series: []report.Series{{Label: "CPU rule: CGI acceptance rate", X: x, Y: cgi}}},
		{XLabel: "time (s)", YLabel: "queue (requests), CPU (%)", YMin: 0, LegendLeft: true,
			Series: []report.Series{{Label: "listen (wait) queue", X: x, Y: q}, {Label: "backend CPU busy (%)", X: x, Y: cpu, Dashed: true}},
			HLines: []report.RefLine{{Value: 100, Label: "q_ref 100"}, {Value: 90, Label: "util_ref 90 %"}}},
	}}
}
