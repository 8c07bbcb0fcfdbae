// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/sim"
)

// voigt-bandwidth reproduces Voigt & Gunningberg's Table 2
// (docs/algorithms.md §1): beside the SURGE-like workload at 300 req/s, a
// second host requests one large static file under /islarge/ at a
// constant rate, making the outgoing link the bottleneck. With the
// bandwidth rule (a PD controller on the outgoing queue, q_ref 35 of 100)
// the small files keep a low response time and the two workloads together
// complete more requests than without controls.

type voigtBandwidthParams struct {
	model      voigtModel
	surgeRate  float64
	dynamic    float64
	largeRates []float64
	largeKB    float64
	duration   time.Duration
	warmup     time.Duration
}

// voigtBandwidth declares the parameters of voigt-bandwidth and returns its run.
func voigtBandwidth(ps *Params) RunFunc {
	var c voigtBandwidthParams
	declareVoigtModel(ps, &c.model)
	ps.Float(&c.surgeRate, "surge_rate", 300, 1, 1e6, "offered rate of the SURGE-like workload in req/s, constant (paper: 300)")
	ps.Float(&c.dynamic, "dynamic", 0.2, 0, 1, "fraction of the small-file requests that are dynamic (paper: 20 %)")
	ps.Floats(&c.largeRates, "large_rates", []float64{80, 120}, 0.01, 1e6,
		"offered rates of the large-file flow in req/s, constant. The paper used 50 and 80 req/s, and its link already dropped "+
			"packets at 50; a processor-sharing link has no packet drops and with the defaults saturates only above about "+
			"73 req/s of 142 KB (12.5 MB/s minus the SURGE workload's 2.2 MB/s), so both defaults saturate it")
	ps.Float(&c.largeKB, "large_file_kb", 142, 0.001, 1e9, "size of the large file in KB (paper: 142 KB)")
	ps.Duration(&c.duration, "duration", 60*time.Second, time.Second, 100000*time.Second, "length of each run")
	ps.Duration(&c.warmup, "warmup", 20*time.Second, 0, 100000*time.Second, "start of the measurement window")
	return func(env Env) (*figure.Result, error) { return runVoigtBandwidth(env, c) }
}

// voigtBWPoint is one run: the surge flow (0) and the large flow (1).
type voigtBWPoint struct {
	largeRate    float64
	controlled   bool
	run          *voigtRun
	surge, large voigtWindow
	linkUtil     float64
	largeDrop    float64
}

func (p *voigtBWPoint) total() float64 { return p.surge.throughput() + p.large.throughput() }

func runVoigtBandwidthPoint(seed uint64, c voigtBandwidthParams, files *voigtFiles, largeRate float64, controlled bool) (*voigtBWPoint, error) {
	sched, err := dist.ConstantSchedule(c.surgeRate)
	if err != nil {
		return nil, err
	}
	surge, err := surgeFlow(c.model, files, sched, "constant", c.dynamic)
	if err != nil {
		return nil, err
	}
	flows := []voigtFlow{surge}
	if largeRate > 0 {
		lsched, err := dist.ConstantSchedule(largeRate)
		if err != nil {
			return nil, err
		}
		cs, err := serviceDist(c.model.cpuDist, c.model.cpuStatic.Seconds())
		if err != nil {
			return nil, err
		}
		size, err := dist.NewDeterministic(c.largeKB * 1e3)
		if err != nil {
			return nil, err
		}
		types := make([]sim.RequestType, voigtLarge+1)
		types[voigtLarge] = sim.RequestType{Name: "large", Demand: cs, Size: size}
		mix := make([]float64, voigtLarge+1)
		mix[voigtLarge] = 1
		flows = append(flows, voigtFlow{name: "large", rate: lsched, arrivals: "constant", types: types, mix: mix})
	}
	run, err := voigtSim(seed, c.model, flows, controlled, c.duration)
	if err != nil {
		return nil, err
	}
	p := &voigtBWPoint{largeRate: largeRate, controlled: controlled, run: run, surge: run.window(0, c.warmup, c.duration)}
	if largeRate > 0 {
		p.large = run.window(1, c.warmup, c.duration)
	}
	var util []float64
	for _, r := range run.monLink.rows {
		if r.start >= c.warmup {
			util = append(util, r.util)
		}
	}
	p.linkUtil = report.Mean(util)
	off, rej := ruleCounts(run.bw, c.warmup, c.duration)
	p.largeDrop = ratio(rej, off)
	return p, nil
}

func runVoigtBandwidth(env Env, c voigtBandwidthParams) (*figure.Result, error) {
	files, res, err := voigtStart(env, c.model, c.warmup, c.duration)
	if err != nil {
		return nil, err
	}
	s := res.Summary
	// The reference: the SURGE-like workload alone, with the controls.
	base, err := runVoigtBandwidthPoint(env.Seed, c, files, 0, true)
	if err != nil {
		return nil, err
	}
	unloaded := base.surge.smallRT()
	s.Set("small_rt_ms_unloaded", ms(unloaded))
	s.Set("surge_rt_ms_unloaded", ms(base.surge.meanRT()))
	s.Set("surge_throughput_rps_unloaded", base.surge.throughput())

	tab := report.NewTable("large_rate_rps", "variant", "large_throughput_rps", "large_rt_ms", "surge_throughput_rps", "surge_rt_ms",
		"small_rt_ms", "total_throughput_rps", "link_utilization", "large_rule_drop_fraction", "bw_rate_end")
	var points []*voigtBWPoint
	for _, lr := range c.largeRates {
		for _, controlled := range []bool{true, false} {
			p, err := runVoigtBandwidthPoint(env.Seed, c, files, lr, controlled)
			if err != nil {
				return nil, err
			}
			points = append(points, p)
			variant, suffix := "controls", ""
			if !controlled {
				variant, suffix, p.largeDrop = "no_controls", "_uncontrolled", math.NaN()
			}
			if err := tab.Append(lr, variant, p.large.throughput(), ms(p.large.meanRT()), p.surge.throughput(), ms(p.surge.meanRT()),
				ms(p.surge.smallRT()), p.total(), p.linkUtil, p.largeDrop, rateAt(p.run.bw, c.duration)); err != nil {
				return nil, err
			}
			tag := "_at_" + fmtNum(lr) + suffix
			s.Set("large_throughput_rps"+tag, p.large.throughput())
			s.Set("large_rt_ms"+tag, ms(p.large.meanRT()))
			s.Set("surge_throughput_rps"+tag, p.surge.throughput())
			s.Set("surge_rt_ms"+tag, ms(p.surge.meanRT()))
			s.Set("small_rt_ms"+tag, ms(p.surge.smallRT()))
			s.Set("total_throughput_rps"+tag, p.total())
			s.Set("link_utilization"+tag, p.linkUtil)
			if controlled {
				s.Set("small_rt_ratio_at_"+fmtNum(lr), p.surge.smallRT()/unloaded)
			}
		}
	}
	// Headline figures at the highest large-file rate.
	hi := len(points) - 2
	ctl, unc := points[hi], points[hi+1]
	s.Set("small_rt_ms", ms(ctl.surge.smallRT()))
	s.Set("small_rt_ratio", ctl.surge.smallRT()/unloaded)
	s.Set("small_rt_ms_uncontrolled", ms(unc.surge.smallRT()))
	s.Set("total_throughput_rps", ctl.total())
	s.Set("total_throughput_rps_uncontrolled", unc.total())
	s.Set("total_throughput_gain", ratio(ctl.total(), unc.total()))
	res.AddTable("table2.csv", tab)
	res.AddTable("timeseries.csv", voigtTimeseries(ctl.run, 0))
	res.Key = []string{"small_rt_ms_unloaded", "small_rt_ms", "small_rt_ratio", "small_rt_ms_uncontrolled",
		"total_throughput_rps", "total_throughput_rps_uncontrolled"}
	res.Checks = figure.VoigtBandwidthChecks(s, fmtNum(c.largeRates[len(c.largeRates)-1]))

	// Table 2 as bars, and the controlled run's link over time.
	var xs, tc, tu, rc, ru []float64
	for i := 0; i+1 < len(points); i += 2 {
		xs = append(xs, points[i].largeRate)
		tc, tu = append(tc, points[i].total()), append(tu, points[i+1].total())
		rc, ru = append(rc, ms(points[i].surge.smallRT())), append(ru, ms(points[i+1].surge.smallRT()))
	}
	tput := report.Panel{Title: fmt.Sprintf("outgoing bandwidth bottleneck: %g KB file beside %g req/s SURGE-like (Table 2)", c.largeKB, c.surgeRate),
		XLabel: "large-file request rate (req/s)", YLabel: "total throughput (replies/s)", YMin: 0, YMax: 1.3 * c.surgeRate,
		XMin: slicesMin(xs) - 30, XMax: slicesMax(xs) + 30, BarWidth: 20,
		Series: []report.Series{{Label: "controls", X: xs, Y: tc, Kind: report.Bars}, {Label: "no controls", X: xs, Y: tu, Kind: report.Bars}}}
	rt := report.Panel{XLabel: "large-file request rate (req/s)", YLabel: "small-file mean RT (ms)", LogY: true, LegendLeft: true,
		XMin: slicesMin(xs) - 30, XMax: slicesMax(xs) + 30, BarWidth: 20, YMin: 1, YMax: 1e5,
		Series: []report.Series{{Label: "controls", X: xs, Y: rc, Kind: report.Bars}, {Label: "no controls", X: xs, Y: ru, Kind: report.Bars}},
		HLines: []report.RefLine{{Value: ms(unloaded), Label: fmt.Sprintf("without the large flow: %.1f ms", ms(unloaded))},
			{Value: 10 * ms(unloaded), Label: "10× that"}}}
	var tx, q, bw, lu []float64
	for _, r := range ctl.run.monLink.rows {
		tx = append(tx, r.end.Seconds())
		q = append(q, r.queue)
		lu = append(lu, 100*r.util)
		bw = append(bw, rateAt(ctl.run.bw, r.end))
	}
	trace := report.Panel{Title: fmt.Sprintf("controlled run at %g req/s of large files", ctl.largeRate), XLabel: "time (s)",
		YLabel: "queue (of 100), link (%), rate (req/s)", YMin: 0, YMax: 160,
		Series: []report.Series{{Label: "outgoing queue (mean per period)", X: tx, Y: q},
			{Label: "link utilization (%)", X: tx, Y: lu, Dashed: true},
			{Label: "bandwidth rule: /islarge/ rate", X: tx, Y: bw}},
		HLines: []report.RefLine{{Value: 35, Label: "q_ref 35"}}}
	res.AddFigure("bandwidth.png", &report.Figure{PanelHeight: 3, Panels: []report.Panel{tput, rt, trace}})
	return res, nil
}
