// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/settle"
	"github.com/sluicehq/sluice/lab/sim"
)

// yaksha-workload-shift reproduces Kamra, Misra & Nahum's Figs. 10–16
// (docs/algorithms.md §2): closed-loop TPC-W-style users arrive in three
// waves, each with its own navigation (browsing, shopping, ordering), so
// both the load and the request mix shift. Three controllers face the same
// users (the same seed): the self-tuning PI, a static PI designed for the
// first wave's load, and a static PI designed for three times that load.

// TPC-W-like page types and their CPU demands on the PS server, in
// seconds (means of exponential demands).
var shiftPages = []struct {
	name   string
	demand float64
}{
	{"home", 0.008}, {"search", 0.015}, {"product", 0.010}, {"cart", 0.020}, {"buy", 0.045},
}

// shiftNav are the three waves' navigations between the pages above:
// start distributions and transition matrices (rows: from, columns: to).
var shiftNav = []struct {
	name  string
	start []float64
	p     [][]float64
}{
	{"browsing", []float64{1, 0, 0, 0, 0}, [][]float64{
		{0.10, 0.50, 0.40, 0.00, 0.00},
		{0.10, 0.30, 0.60, 0.00, 0.00},
		{0.20, 0.40, 0.35, 0.05, 0.00},
		{0.30, 0.20, 0.40, 0.05, 0.05},
		{1.00, 0.00, 0.00, 0.00, 0.00},
	}},
	{"shopping", []float64{1, 0, 0, 0, 0}, [][]float64{
		{0.05, 0.45, 0.50, 0.00, 0.00},
		{0.05, 0.25, 0.70, 0.00, 0.00},
		{0.10, 0.25, 0.30, 0.35, 0.00},
		{0.10, 0.10, 0.40, 0.20, 0.20},
		{1.00, 0.00, 0.00, 0.00, 0.00},
	}},
	{"ordering", []float64{1, 0, 0, 0, 0}, [][]float64{
		{0.05, 0.30, 0.65, 0.00, 0.00},
		{0.05, 0.15, 0.80, 0.00, 0.00},
		{0.05, 0.10, 0.25, 0.60, 0.00},
		{0.05, 0.05, 0.20, 0.20, 0.50},
		{0.80, 0.00, 0.20, 0.00, 0.00},
	}},
}

type yakshaShiftParams struct {
	figure.YakshaParams
	figure.YakshaShiftParams
}

// yakshaWorkloadShift declares the parameters of yaksha-workload-shift and returns its run.
func yakshaWorkloadShift(ps *Params) RunFunc {
	var c yakshaShiftParams
	figure.DeclareYakshaShift(ps, &c.YakshaShiftParams)
	figure.DeclareYakshaTarget(ps, &c.YakshaParams)
	return func(env Env) (*figure.Result, error) { return runYakshaShift(env, c) }
}

// shiftVariant is one controller facing the three waves.
type shiftVariant struct {
	name, suffix, label string
	selfTuning          bool
	lambda0             float64
	steps               []step
	iae                 float64
	settle              []float64
}

func runYakshaShift(env Env, c yakshaShiftParams) (*figure.Result, error) {
	think, err := dist.NewExponential(c.Think.Seconds())
	if err != nil {
		return nil, err
	}
	thinkDist, err := dist.NewCapped(think, c.ThinkCap.Seconds())
	if err != nil {
		return nil, err
	}
	// The static designs' nominal rate: the first wave's users offer
	// N/(E[Z] + Tref) requests per second when the response time is Tref.
	lambdaLow := float64(c.Users) / (thinkDist.Mean() + c.Tref.Seconds())
	vars := []*shiftVariant{
		{name: "self", suffix: "_self", label: "self-tuning", selfTuning: true},
		{name: "static_low", suffix: "_static_low", label: fmt.Sprintf("static, λ0 = %.0f req/s (wave 1)", lambdaLow), lambda0: lambdaLow},
		{name: "static_high", suffix: "_static_high", label: fmt.Sprintf("static, λ0 = %.0f req/s (%g× wave 1)", c.HighFactor*lambdaLow, c.HighFactor),
			lambda0: c.HighFactor * lambdaLow},
	}
	for _, v := range vars {
		v.steps, err = shiftRun(env.Seed, c, thinkDist, v.selfTuning, v.lambda0)
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.name, err)
		}
	}

	res := newResult(env)
	s := res.Summary
	tref := c.Tref.Seconds()
	ts := report.NewTable("variant", "time_s", "users", "offered", "admitted", "rejected", "completed",
		"mean_rt_ms", "p90_rt_ms", "utilization", "drop_probability", "gain_a")
	for _, v := range vars {
		for _, st := range v.steps {
			w := st.in()
			users := c.Users * min(int(st.start()/c.Wave)+1, 3)
			if err := ts.Append(v.name, st.end().Seconds(), users, w.Arrivals, w.Admitted, w.Rejected, w.Completed,
				ms(w.MeanRT), ms(w.P90RT), w.Utilization, st.Decision.New, st.Extra); err != nil {
				return nil, err
			}
		}
		v.settle = figure.YakshaShiftMetrics(s, v.suffix, stepPoints(v.steps, meanRT), c.YakshaShiftParams, c.Tref, c.Period)
		v.iae = s.Metric("iae" + v.suffix)
		for k := range 3 {
			from, to := time.Duration(k)*c.Wave, time.Duration(k+1)*c.Wave
			var n, sum float64
			for _, x := range v.steps {
				if w := x.in(); x.start() >= from+c.Wave/2 && x.end() <= to && w.Samples > 0 {
					n += w.Samples
					sum += w.MeanRT * w.Samples
				}
			}
			s.Set(fmt.Sprintf("mean_rt_ms_wave%d_late%s", k+1, v.suffix), ms(ratio(sum, n)))
		}
	}
	// The headline name settle_s_max is the self-tuning one's.
	s.Set("settle_s_max", s.Metric("settle_s_max_self"))
	s.Set("lambda0_static_low_rps", lambdaLow)
	s.Set("tref_ms", ms(tref))
	s.Set("lambda0_static_high_rps", c.HighFactor*lambdaLow)
	res.AddTable("timeseries.csv", ts)
	res.Key = []string{"settle_s_max", "iae_self", "iae_static_low", "iae_static_high"}
	res.Checks = figure.YakshaShiftChecks(s, 1)

	fig := &report.Figure{PanelHeight: 2.6}
	for _, v := range vars {
		x, y := make([]float64, len(v.steps)), make([]float64, len(v.steps))
		for i, st := range v.steps {
			x[i], y[i] = st.end().Seconds(), ms(st.in().MeanRT)
		}
		fig.Panels = append(fig.Panels, report.Panel{
			Title:  fmt.Sprintf("%s: IAE %.0f s·s, settle %s s", v.label, v.iae, settle.Format(v.settle)),
			XLabel: "time (s)", YLabel: "mean RT (ms)",
			Series: []report.Series{{Label: "mean RT per period", X: x, Y: y}},
			HLines: []report.RefLine{{Value: ms(tref), Label: fmt.Sprintf("Tref = %v", c.Tref)}},
			VLines: []report.RefLine{{Value: c.Wave.Seconds()}, {Value: 2 * c.Wave.Seconds()}},
			YMin:   0, YMax: 5 * ms(tref)})
	}
	res.AddFigure("response_time.png", fig)
	pd := report.Panel{Title: "drop probability (waves start at the dotted lines)", XLabel: "time (s)", YLabel: "drop probability pd",
		YMin: 0, YMax: 1, LegendBottom: true,
		VLines: []report.RefLine{{Value: c.Wave.Seconds()}, {Value: 2 * c.Wave.Seconds()}}}
	ga := report.Panel{Title: "PI gain A = Kp + Ki·h/2", XLabel: "time (s)", YLabel: "gain A (1/s)", LegendBottom: true,
		VLines: []report.RefLine{{Value: c.Wave.Seconds()}, {Value: 2 * c.Wave.Seconds()}}}
	for _, v := range vars {
		x, y, a := make([]float64, len(v.steps)), make([]float64, len(v.steps)), make([]float64, len(v.steps))
		for i, st := range v.steps {
			x[i], y[i], a[i] = st.end().Seconds(), st.Decision.New, st.Extra
		}
		pd.Series = append(pd.Series, report.Series{Label: v.label, X: x, Y: y})
		ga.Series = append(ga.Series, report.Series{Label: v.label, X: x, Y: a})
	}
	res.AddFigure("controller.png", &report.Figure{PanelHeight: 3.2, Panels: []report.Panel{pd, ga}})
	return res, nil
}

// shiftRun runs one controller against the three waves.
func shiftRun(seed uint64, c yakshaShiftParams, think dist.Dist, selfTuning bool, lambda0 float64) ([]step, error) {
	e := sim.New(seed)
	server, err := sim.NewPS(e, sim.PSConfig{Capacity: 1})
	if err != nil {
		return nil, err
	}
	loop, err := yakshaStage(e, yakshaController(c.Tref, c.Period, selfTuning, lambda0, true), server)
	if err != nil {
		return nil, err
	}
	loop.extra = yakshaGainA
	types := make([]sim.RequestType, len(shiftPages))
	for i, p := range shiftPages {
		d, err := dist.NewExponential(p.demand)
		if err != nil {
			return nil, err
		}
		types[i] = sim.RequestType{Name: p.name, Demand: d}
	}
	for k, nav := range shiftNav {
		m, err := sim.NewMarkov(nav.start, nav.p)
		if err != nil {
			return nil, fmt.Errorf("navigation %s: %w", nav.name, err)
		}
		count, err := dist.NewSchedule(dist.Segment{Start: 0, Rate: 0}, dist.Segment{Start: time.Duration(k) * c.Wave, Rate: float64(c.Users)})
		if k == 0 {
			count, err = dist.ConstantSchedule(float64(c.Users))
		}
		if err != nil {
			return nil, err
		}
		g, err := sim.NewUsers(e, sim.UsersConfig{Name: "wave-" + nav.name, Count: count, Think: think, Types: types, Nav: m,
			ClientBase: k * c.Users, Target: loop.entry})
		if err != nil {
			return nil, err
		}
		g.Start()
	}
	e.Run(3 * c.Wave)
	return loop.steps, nil
}
