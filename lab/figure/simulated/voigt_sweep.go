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

// voigt-sweep reproduces Voigt & Gunningberg's Fig. 4 (throughput and mean
// response time against the offered rate, with and without the controls),
// Table 1 (the offered rate at which TCP SYN policing sets in, for 0, 10
// and 20 % dynamic requests) and Fig. 6 (constant against Poisson
// arrivals); docs/algorithms.md §1.

type voigtSweepParams struct {
	model          voigtModel
	rates          []float64
	dynamic        float64
	fractions      []float64
	arrivals       string
	comparePoisson bool
	duration       time.Duration
	warmup         time.Duration
	threshold      float64
	resolution     float64
}

// voigtSweep declares the parameters of voigt-sweep and returns its run.
func voigtSweep(ps *Params) RunFunc {
	var c voigtSweepParams
	declareVoigtModel(ps, &c.model)
	ps.Floats(&c.rates, "rates", []float64{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}, 1, 1e6, "offered rates of the sweep in req/s")
	ps.Float(&c.dynamic, "dynamic", 0.2, 0, 1, "fraction of the small-file requests that are dynamic (CGI) in the sweep (paper: 20 %)")
	ps.Floats(&c.fractions, "onset_fractions", []float64{0, 0.1, 0.2}, 0, 1, "dynamic fractions for which the onset of SYN policing is searched (paper's Table 1: 0, 10, 20 %)")
	ps.Choice(&c.arrivals, "arrivals", "constant", []string{"constant", "poisson"}, "arrival process of the sweep (paper: sclient, constant rate)")
	ps.Bool(&c.comparePoisson, "compare_poisson", true, "also run the controlled sweep with Poisson arrivals (Fig. 6)")
	ps.Duration(&c.duration, "duration", 60*time.Second, time.Second, 100000*time.Second, "length of each run")
	ps.Duration(&c.warmup, "warmup", 20*time.Second, 0, 100000*time.Second,
		"start of the measurement window of each run (the CPU rule climbs from its initial rate in the first seconds)")
	ps.Float(&c.threshold, "onset_threshold", 0.01, 1e-6, 1,
		"SYN policing has set in at an offered rate when the policer discards at least this fraction of the connections in the window")
	ps.Float(&c.resolution, "onset_resolution", 5, 0.01, 1000, "the onset is bisected between the lowest and highest swept rate to this many req/s")
	return func(env Env) (*figure.Result, error) { return runVoigtSweep(env, c) }
}

// voigtPoint is one offered rate of the sweep.
type voigtPoint struct {
	rate                     float64
	run                      *voigtRun
	tput, rt, offered        float64
	polDrop, ruleDrop, fails float64
	cgiRate, cpu, link       float64
}

func voigtSweepPoint(seed uint64, c voigtSweepParams, files *voigtFiles, rate, dynamic float64, arrivals string, controlled bool) (*voigtPoint, error) {
	sched, err := dist.ConstantSchedule(rate)
	if err != nil {
		return nil, err
	}
	fl, err := surgeFlow(c.model, files, sched, arrivals, dynamic)
	if err != nil {
		return nil, err
	}
	run, err := voigtSim(seed, c.model, []voigtFlow{fl}, controlled, c.duration)
	if err != nil {
		return nil, err
	}
	w := run.window(0, c.warmup, c.duration)
	p := &voigtPoint{rate: rate, run: run, tput: w.throughput(), rt: w.meanRT(), offered: w.offered}
	polOff, polRej := ruleCounts(run.policer, c.warmup, c.duration)
	p.polDrop = ratio(polRej, polOff)
	_, cgiRej := ruleCounts(run.cgi, c.warmup, c.duration)
	_, bwRej := ruleCounts(run.bw, c.warmup, c.duration)
	finished := w.good + w.late + w.timedOut + w.rejected
	p.ruleDrop = ratio(cgiRej+bwRej, finished)
	p.fails = ratio(w.late+w.timedOut+w.rejected-polRej-cgiRej-bwRej, finished)
	if !controlled {
		p.polDrop, p.ruleDrop = math.NaN(), math.NaN()
	}
	p.cgiRate = rateAt(run.cgi, c.duration)
	var cpu, link []float64
	for _, r := range run.monCPU.rows {
		if r.start >= c.warmup {
			cpu = append(cpu, r.util)
		}
	}
	for _, r := range run.monLink.rows {
		if r.start >= c.warmup {
			link = append(link, r.util)
		}
	}
	p.cpu, p.link = report.Mean(cpu), report.Mean(link)
	return p, nil
}

// voigtOnset bisects the lowest offered rate at which the policer discards
// at least threshold of the connections, between the sweep's extremes. It
// returns NaN if even the highest rate is not policed, and the lowest rate
// if that one already is.
func voigtOnset(seed uint64, c voigtSweepParams, files *voigtFiles, dynamic float64) (float64, error) {
	policed := func(rate float64) (bool, error) {
		p, err := voigtSweepPoint(seed, c, files, rate, dynamic, c.arrivals, true)
		if err != nil {
			return false, err
		}
		return p.polDrop >= c.threshold, nil
	}
	lo, hi := slicesMin(c.rates), slicesMax(c.rates)
	if ok, err := policed(hi); err != nil || !ok {
		return math.NaN(), err
	}
	if ok, err := policed(lo); err != nil || ok {
		return lo, err
	}
	for hi-lo > c.resolution {
		mid := (lo + hi) / 2
		ok, err := policed(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return (lo + hi) / 2, nil
}

func slicesMin(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		m = math.Min(m, x)
	}
	return m
}

func slicesMax(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

// runVoigtSweep reproduces Fig. 4 (and Fig. 6) and Table 1: it runs the
// sweep and the onsets, analyses them into the summary's metrics and
// sweep.csv, and renders the plots.
func runVoigtSweep(env Env, c voigtSweepParams) (*figure.Result, error) {
	files, res, err := voigtStart(env, c.model, c.warmup, c.duration)
	if err != nil {
		return nil, err
	}
	r, err := runVoigtSweepPoints(env.Seed, c, files)
	if err != nil {
		return nil, err
	}
	if err := analyseVoigtSweep(res, c, files, r); err != nil {
		return nil, err
	}
	renderVoigtSweep(res, c, r)
	return res, nil
}

// voigtSweepRun is what the sweep measures: a controlled, an uncontrolled
// and (if compared) a Poisson-controlled point per offered rate, and the
// onset of SYN policing (req/s) per dynamic fraction of Table 1.
type voigtSweepRun struct {
	ctl, unc, poi []*voigtPoint
	onsets        []float64
}

// runVoigtSweepPoints runs every point of the sweep and every onset
// search, each on its own engine.
func runVoigtSweepPoints(seed uint64, c voigtSweepParams, files *voigtFiles) (*voigtSweepRun, error) {
	r := &voigtSweepRun{onsets: make([]float64, len(c.fractions))}
	for _, rate := range c.rates {
		pc, err := voigtSweepPoint(seed, c, files, rate, c.dynamic, c.arrivals, true)
		if err != nil {
			return nil, err
		}
		pu, err := voigtSweepPoint(seed, c, files, rate, c.dynamic, c.arrivals, false)
		if err != nil {
			return nil, err
		}
		r.ctl, r.unc = append(r.ctl, pc), append(r.unc, pu)
		if c.comparePoisson {
			pp, err := voigtSweepPoint(seed, c, files, rate, c.dynamic, "poisson", true)
			if err != nil {
				return nil, err
			}
			r.poi = append(r.poi, pp)
		}
	}
	for i, f := range c.fractions {
		var err error
		if r.onsets[i], err = voigtOnset(seed, c, files, f); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// analyseVoigtSweep sets the sweep's metrics (per rate, the maxima, the
// plateau ratio = throughput at the highest rate / the best, the onsets
// and whether they rise with the dynamic fraction) and writes sweep.csv,
// timeseries.csv (the controlled run at the highest rate), the key and
// the checks.
func analyseVoigtSweep(res *figure.Result, c voigtSweepParams, files *voigtFiles, r *voigtSweepRun) error {
	s := res.Summary
	ctl, unc, poi, onsets := r.ctl, r.unc, r.poi, r.onsets
	// Table 1: onset of SYN policing per dynamic fraction.
	for i, f := range c.fractions {
		s.Set("policing_onset_rps_"+figure.PctTag(f), onsets[i])
	}
	increasing := 1.0
	for i := 1; i < len(onsets); i++ {
		if !(c.fractions[i] > c.fractions[i-1] && onsets[i] > onsets[i-1]) {
			increasing = 0
		}
	}
	s.Set("policing_onset_increasing", increasing)

	sweep := report.NewTable("offered_rps", "throughput_rps", "mean_rt_ms", "policer_drop_fraction", "rule_drop_fraction",
		"failed_fraction", "cgi_rate_rps", "cpu_utilization", "link_utilization",
		"throughput_rps_uncontrolled", "mean_rt_ms_uncontrolled", "failed_fraction_uncontrolled", "cpu_utilization_uncontrolled",
		"throughput_rps_poisson", "mean_rt_ms_poisson")
	maxT, maxU, maxRT, maxRTU := 0.0, 0.0, 0.0, 0.0
	for i, pc := range ctl {
		pu := unc[i]
		tp, rp := math.NaN(), math.NaN()
		if c.comparePoisson {
			tp, rp = poi[i].tput, ms(poi[i].rt)
		}
		if err := sweep.Append(pc.rate, pc.tput, ms(pc.rt), pc.polDrop, pc.ruleDrop, pc.fails, pc.cgiRate, pc.cpu, pc.link,
			pu.tput, ms(pu.rt), pu.fails, pu.cpu, tp, rp); err != nil {
			return err
		}
		tag := fmtNum(pc.rate)
		s.Set("throughput_rps_at_"+tag, pc.tput)
		s.Set("mean_rt_ms_at_"+tag, ms(pc.rt))
		s.Set("policer_drop_fraction_at_"+tag, pc.polDrop)
		s.Set("throughput_rps_at_"+tag+"_uncontrolled", pu.tput)
		s.Set("mean_rt_ms_at_"+tag+"_uncontrolled", ms(pu.rt))
		if c.comparePoisson {
			s.Set("throughput_rps_at_"+tag+"_poisson", poi[i].tput)
		}
		maxT, maxU = math.Max(maxT, pc.tput), math.Max(maxU, pu.tput)
		maxRT = math.Max(maxRT, ms(pc.rt))
		if !math.IsNaN(pu.rt) {
			maxRTU = math.Max(maxRTU, ms(pu.rt))
		}
	}
	last := len(ctl) - 1
	s.Set("throughput_rps_max", maxT)
	s.Set("throughput_rps_max_uncontrolled", maxU)
	s.Set("mean_rt_ms_max", maxRT)
	s.Set("mean_rt_ms_max_uncontrolled", maxRTU)
	// Plateau without collapse: throughput at the highest rate against the
	// best; the uncontrolled server's collapse: the same ratio.
	s.Set("plateau_ratio", ratio(ctl[last].tput, maxT))
	s.Set("plateau_ratio_uncontrolled", ratio(unc[last].tput, maxU))
	s.Set("mean_rt_ms_at_max_rate", ms(ctl[last].rt))
	s.Set("mean_rt_ms_at_max_rate_uncontrolled", ms(unc[last].rt))
	s.Set("mean_reply_kb", files.meanSize()/1e3)
	_, pLarge := files.class(c.model.largeKB*1e3, true)
	s.Set("large_request_fraction", pLarge)
	res.AddTable("sweep.csv", sweep)

	// The time series of the controlled run at the highest rate: one row
	// per control period.
	top := ctl[last].run
	ts := voigtTimeseries(top, 0)
	res.AddTable("timeseries.csv", ts)
	res.Key = []string{"policing_onset_rps_0pct", "policing_onset_rps_10pct", "policing_onset_rps_20pct",
		"throughput_rps_max", "plateau_ratio", "plateau_ratio_uncontrolled", "mean_rt_ms_max"}
	res.Checks = figure.VoigtSweepChecks(s, fmtNum(ctl[last].rate))

	return nil
}

// renderVoigtSweep draws sweep.png (Fig. 4 left and right, Fig. 6, and
// where requests are refused) and onset.png (Table 1 against the
// paper's onsets).
func renderVoigtSweep(res *figure.Result, c voigtSweepParams, r *voigtSweepRun) {
	ctl, unc, poi, onsets := r.ctl, r.unc, r.poi, r.onsets
	// Fig. 4 (and Fig. 6): throughput and mean RT against the offered rate.
	x := make([]float64, len(ctl))
	col := func(pts []*voigtPoint, f func(p *voigtPoint) float64) []float64 {
		out := make([]float64, len(pts))
		for i, p := range pts {
			x[i] = p.rate
			out[i] = f(p)
		}
		return out
	}
	tput := report.Panel{Title: fmt.Sprintf("throughput vs offered rate, %g %% dynamic (Fig. 4 left, Fig. 6)", 100*c.dynamic),
		XLabel: "offered rate (req/s)", YLabel: "throughput (replies/s within timeout)", LegendLeft: true, YMin: 0, YMax: 1.1 * slicesMax(c.rates),
		Series: []report.Series{
			{Label: "controlled (" + c.arrivals + ")", X: x, Y: col(ctl, func(p *voigtPoint) float64 { return p.tput }), Kind: report.LinePoints},
			{Label: "no controls (" + c.arrivals + ")", X: x, Y: col(unc, func(p *voigtPoint) float64 { return p.tput }), Kind: report.LinePoints},
		}}
	if c.comparePoisson {
		tput.Series = append(tput.Series, report.Series{Label: "controlled (poisson)", X: x,
			Y: col(poi, func(p *voigtPoint) float64 { return p.tput }), Kind: report.LinePoints, Dashed: true})
	}
	for i, f := range c.fractions {
		if f == c.dynamic && !math.IsNaN(onsets[i]) {
			tput.VLines = append(tput.VLines, report.RefLine{Value: onsets[i], Label: fmt.Sprintf("SYN policing sets in: %.0f req/s", onsets[i])})
		}
	}
	rt := report.Panel{Title: "mean response time vs offered rate (Fig. 4 right)", XLabel: "offered rate (req/s)", YLabel: "mean RT (ms)",
		LogY: true, LegendLeft: true, YMin: 1, YMax: 1e5,
		Series: []report.Series{
			{Label: "controlled", X: x, Y: col(ctl, func(p *voigtPoint) float64 { return ms(p.rt) }), Kind: report.LinePoints},
			{Label: "no controls", X: x, Y: col(unc, func(p *voigtPoint) float64 { return ms(p.rt) }), Kind: report.LinePoints},
		},
		HLines: []report.RefLine{{Value: ms(c.model.timeout.Seconds()), Label: fmt.Sprintf("client timeout %v", c.model.timeout)}}}
	drops := report.Panel{Title: "where requests are refused (controlled)", XLabel: "offered rate (req/s)", YLabel: "fraction of offered",
		YMin: 0, YMax: 1, LegendLeft: true,
		Series: []report.Series{
			{Label: "SYN policer", X: x, Y: col(ctl, func(p *voigtPoint) float64 { return p.polDrop }), Kind: report.LinePoints},
			{Label: "resource rules (CGI, /islarge/)", X: x, Y: col(ctl, func(p *voigtPoint) float64 { return p.ruleDrop }), Kind: report.LinePoints},
			{Label: "timed out or dropped by the listen queue", X: x, Y: col(ctl, func(p *voigtPoint) float64 { return p.fails }), Kind: report.LinePoints},
		}}
	res.AddFigure("sweep.png", &report.Figure{PanelHeight: 3.4, Panels: []report.Panel{tput, rt, drops}})
	onsetP := report.Panel{
		Title:  "offered rate at which SYN policing sets in (Table 1)",
		XLabel: "dynamic requests (% of small-file requests)", YLabel: "onset of SYN policing (req/s)", YMin: 0, YMax: 1.4 * slicesMax(c.rates),
		Series: []report.Series{{Label: "this model", X: scale(c.fractions, 100), Y: onsets, Kind: report.Bars}},
	}
	paper := map[float64]float64{0: 610, 0.1: 640, 0.2: 675}
	var py []float64
	for _, f := range c.fractions {
		if v, ok := paper[f]; ok {
			py = append(py, v)
		}
	}
	if len(py) == len(c.fractions) {
		onsetP.Series = append(onsetP.Series, report.Series{Label: "paper (their server)", X: scale(c.fractions, 100), Y: py, Kind: report.Bars})
	}
	res.AddFigure("onset.png", &report.Figure{PanelHeight: 3, Panels: []report.Panel{onsetP}})
}

func scale(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = k * x
	}
	return out
}

// voigtTimeseries lists one run per control period: the surge flow's
// offered and good replies, the server's gauges and the three rates.
func voigtTimeseries(run *voigtRun, flow int) *report.Table {
	t := report.NewTable("time_s", "offered", "good", "late", "timed_out", "rejected", "mean_rt_ms",
		"cpu_utilization", "listen_queue", "link_utilization", "out_queue", "policer_rate", "cgi_rate", "bw_rate")
	cpu, link := run.monCPU.rows, run.monLink.rows
	for k := range min(len(cpu), len(link)) {
		end := cpu[k].end
		b := run.bins[flow][min(k, len(run.bins[flow])-1)]
		_ = t.Append(end.Seconds(), b.offered, b.good, b.late, b.timedOut, b.rejected, ms(ratio(b.rtSum, float64(b.good))),
			cpu[k].util, cpu[k].queue, link[k].util, link[k].queue,
			rateAt(run.policer, end), rateAt(run.cgi, end), rateAt(run.bw, end))
	}
	return t
}
