// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/settle"
	"github.com/sluicehq/sluice/lab/testbed"
)

// yaksha-workload-shift is Kamra, Misra & Nahum's Figs. 10–16, live:
// closed-loop TPC-W-style users arrive in three waves, each walking its
// own navigation (browsing, shopping, ordering) over five page types with
// different demands on one processor-sharing server, so both the load and
// the request mix shift. The self-tuning controller faces the same users
// as a static one designed for the first wave and one designed for three
// times that load.

// shiftPages are the page types and their mean demands on the PS server
// in the paper's time (the simulator scenario's values).
var shiftPages = []struct {
	name   string
	demand time.Duration
}{
	{"home", 8 * time.Millisecond}, {"search", 15 * time.Millisecond}, {"product", 10 * time.Millisecond},
	{"cart", 20 * time.Millisecond}, {"buy", 45 * time.Millisecond},
}

// shiftNav are the three waves' transition matrices between the pages
// above (rows: from, columns: to), the simulator scenario's; every
// session starts at home.
var shiftNav = []struct {
	name string
	p    [][]float64
}{
	{"browsing", [][]float64{
		{0.10, 0.50, 0.40, 0.00, 0.00},
		{0.10, 0.30, 0.60, 0.00, 0.00},
		{0.20, 0.40, 0.35, 0.05, 0.00},
		{0.30, 0.20, 0.40, 0.05, 0.05},
		{1.00, 0.00, 0.00, 0.00, 0.00},
	}},
	{"shopping", [][]float64{
		{0.05, 0.45, 0.50, 0.00, 0.00},
		{0.05, 0.25, 0.70, 0.00, 0.00},
		{0.10, 0.25, 0.30, 0.35, 0.00},
		{0.10, 0.10, 0.40, 0.20, 0.20},
		{1.00, 0.00, 0.00, 0.00, 0.00},
	}},
	{"ordering", [][]float64{
		{0.05, 0.30, 0.65, 0.00, 0.00},
		{0.05, 0.15, 0.80, 0.00, 0.00},
		{0.05, 0.10, 0.25, 0.60, 0.00},
		{0.05, 0.05, 0.20, 0.20, 0.50},
		{0.80, 0.00, 0.20, 0.00, 0.00},
	}},
}

// navYAML writes a navigation as a load-generator Markov file.
func navYAML(p [][]float64) string {
	var b strings.Builder
	b.WriteString("states:\n")
	for _, pg := range shiftPages {
		fmt.Fprintf(&b, "  %s: /%s\n", pg.name, pg.name)
	}
	b.WriteString("start: home\ntransitions:\n")
	for i, row := range p {
		var parts []string
		for j, w := range row {
			if w > 0 {
				parts = append(parts, fmt.Sprintf("%s: %g", shiftPages[j].name, w))
			}
		}
		fmt.Fprintf(&b, "  %s: {%s}\n", shiftPages[i].name, strings.Join(parts, ", "))
	}
	return b.String()
}

// pageDemands is a processor-sharing queue testbed whose mean demand
// depends on the page: the largest page demand is the queue's service
// time, and each request asks for demand(page)/largest of it through the
// testbed's quality header (every ratio is above the testbed's 0.1
// floor). The proxy is in front of this handler, so no client can set
// the header.
type pageDemands struct {
	testbed.Backend
	quality map[string]string
}

func (p *pageDemands) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if q, ok := p.quality[r.URL.Path]; ok {
		r.Header.Set(testbed.QualityHeader, q)
	}
	p.Backend.ServeHTTP(w, r)
}

// newPageDemands builds the backend with demands scaled by scale.
func newPageDemands(seed uint64, scale float64) func() (testbed.Backend, error) {
	return func() (testbed.Backend, error) {
		var largest time.Duration
		for _, pg := range shiftPages {
			largest = max(largest, pg.demand)
		}
		cfg := testbed.DefaultQueueConfig()
		cfg.Workers, cfg.Discipline, cfg.Seed = 1, testbed.DisciplinePS, seed
		cfg.Service = "exp:" + scaled(largest, scale).String()
		q, err := testbed.NewQueue(cfg)
		if err != nil {
			return nil, err
		}
		pd := &pageDemands{Backend: q, quality: map[string]string{}}
		for _, pg := range shiftPages {
			pd.quality["/"+pg.name] = strconv.FormatFloat(float64(pg.demand)/float64(largest), 'f', 6, 64)
		}
		return pd, nil
	}
}

// runYakshaShift is the experiment in four steps: plan the waves and the
// three controllers (self-tuning, static for the first wave, static for
// high_factor × it), run each against the same users, analyse the runs
// with the figure's rules (figure.YakshaShiftMetrics), and render the
// tables, plots, checks and setup.
func runYakshaShift(ctx context.Context, env *Env) (*figure.Result, error) {
	pl, err := planYakshaShift(env)
	if err != nil {
		return nil, err
	}
	for _, v := range pl.vars {
		if err := pl.run(ctx, env, v); err != nil {
			return nil, err
		}
	}
	res := figure.NewResult(env.Name, figure.Live, env.Seed)
	if err := analyseYakshaShift(res, pl); err != nil {
		return nil, err
	}
	renderYakshaShift(res, pl)
	return res, nil
}

// shiftPlan is the workload shift's plan: the parameters (the figure's
// shift parameters compressed by the time scale), the think time, the
// static designs' nominal rate and the three controllers.
type shiftPlan struct {
	p         yakshaLive
	c         figure.YakshaShiftParams // compressed
	scale     float64
	users     float64
	length    time.Duration
	think     dist.Dist
	lambdaLow float64
	vars      []*shiftVariant
}

// shiftVariant is one controller facing the three waves.
type shiftVariant struct {
	name, suffix, label string
	lambda0             float64
	res                 *phaseResult
	bins                []bin
	iae                 float64
	settle              []float64
}

func planYakshaShift(env *Env) (*shiftPlan, error) {
	pl := &shiftPlan{p: yakshaLiveParams(), c: figure.DefaultYakshaShift(), scale: yakshaTimeScale}
	c := &pl.c
	for _, d := range []*time.Duration{&c.Wave, &c.Think, &c.ThinkCap, &c.SettleWindow} {
		*d = scaled(*d, pl.scale)
	}
	c.Wave = pick(env, c.Wave, 6*time.Second)
	pl.users, pl.length = float64(c.Users), 3*c.Wave
	exp, err := dist.NewExponential(c.Think.Seconds())
	if err != nil {
		return nil, err
	}
	if pl.think, err = dist.NewCapped(exp, c.ThinkCap.Seconds()); err != nil {
		return nil, err
	}
	// The static designs' nominal rate: the first wave's users offer
	// N/(E[Z] + Tref) requests per second when the response time is Tref.
	pl.lambdaLow = pl.users / (pl.think.Mean() + pl.p.tref.Seconds())
	pl.vars = []*shiftVariant{
		{name: "self", suffix: "_self", label: "self-tuning"},
		{name: "static_low", suffix: "_static_low", label: fmt.Sprintf("static, λ0 = %.0f req/s (wave 1)", pl.lambdaLow), lambda0: pl.lambdaLow},
		{name: "static_high", suffix: "_static_high", label: fmt.Sprintf("static, λ0 = %.0f req/s (%g× wave 1)", c.HighFactor*pl.lambdaLow, c.HighFactor),
			lambda0: c.HighFactor * pl.lambdaLow},
	}
	return pl, nil
}

// run runs one controller against the three waves of users.
func (pl *shiftPlan) run(ctx context.Context, env *Env, v *shiftVariant) error {
	p, users, wave, length, think := pl.p, pl.users, pl.c.Wave, pl.length, pl.think
	var loads []loadgen.Config
	for k, nav := range shiftNav {
		m, err := loadgen.ParseMarkov(nav.name, []byte(navYAML(nav.p)))
		if err != nil {
			return err
		}
		count, err := stepSchedule(0, 0, (time.Duration(k) * wave).Seconds(), users)
		if k == 0 {
			count, err = stepSchedule(0, users)
		}
		if err != nil {
			return err
		}
		loads = append(loads, loadgen.Config{Mode: loadgen.ModeClosed, Duration: length, Seed: env.Seed + uint64(k)*1000,
			Timeout: p.timeout, Workload: m, Users: count, Think: think})
	}
	run := proxied{newBackend: newPageDemands(env.Seed, pl.scale), maxConcurrency: 4096, policy: yakshaPolicy(p, v.lambda0),
		phase: phase{name: v.name, length: length, loads: loads, sampleEvery: p.period / 2, grace: time.Second,
			users: func(t time.Duration) float64 { return users * math.Min(float64(t/wave)+1, 3) }}}
	var err error
	if v.res, err = run.run(ctx, env); err != nil {
		return err
	}
	v.bins = binRecords(v.res.recs, p.period, length, 0, nil)
	return nil
}

// analyseYakshaShift writes the per-period table and sets the summary's
// metrics: each controller's settling per wave, settle_s_max and IAE
// (figure.YakshaShiftMetrics on its bins), and the late mean RT of each
// wave from the answers the clients saw.
func analyseYakshaShift(res *figure.Result, pl *shiftPlan) error {
	s, p, vars, users, wave, scale := res.Summary, pl.p, pl.vars, pl.users, pl.c.Wave, pl.scale
	lambdaLow, highFactor := pl.lambdaLow, pl.c.HighFactor
	per := p.period.Seconds()
	ts := report.NewTable("variant", "time_s", "users", "offered_rps", "ok_rps", "rejected_rps", "mean_rt_ms", "p90_rt_ms", "drop_probability")
	for _, v := range vars {
		for _, b := range v.bins {
			t := time.Duration(b.t * float64(time.Second))
			pd := settingAt(v.res.states, t+p.period, func(st *stateSample) float64 { return st.setting })
			if err := ts.Append(v.name, b.t, users*math.Min(float64(t/wave)+1, 3), float64(b.offered)/per, float64(b.ok)/per,
				float64(b.rejected)/per, b.mean, b.p90, pd); err != nil {
				return err
			}
		}
		v.settle = figure.YakshaShiftMetrics(s, v.suffix, binPoints(v.bins, p.period), pl.c, p.tref, p.period)
		v.iae = s.Metric("iae" + v.suffix)
		for k := range 3 {
			from, to := time.Duration(k)*wave, time.Duration(k+1)*wave
			lat := okLatencies(v.res.recs, from+wave/2, to, nil)
			s.Set(fmt.Sprintf("mean_rt_ms_wave%d_late%s", k+1, v.suffix), report.Mean(lat))
		}
	}
	s.Set("settle_s_max", s.Metric("settle_s_max_self"))
	s.Set("lambda0_static_low_rps", lambdaLow)
	s.Set("lambda0_static_high_rps", highFactor*lambdaLow)
	s.Set("tref_ms", msOf(p.tref))
	s.Set("time_scale", scale)
	res.AddTable("timeseries.csv", ts)
	return nil
}

// renderYakshaShift draws the response time and the drop probability of
// each controller, and writes the checks and the setup.
func renderYakshaShift(res *figure.Result, pl *shiftPlan) {
	s, p, vars, users, wave, scale := res.Summary, pl.p, pl.vars, pl.users, pl.c.Wave, pl.scale
	lambdaLow, highFactor, band, settleWindow := pl.lambdaLow, pl.c.HighFactor, pl.c.SettleBand, pl.c.SettleWindow
	fig := &report.Figure{PanelHeight: 2.6}
	pdp := report.Panel{Title: "drop probability (waves start at the dotted lines)", XLabel: "time (s)", YLabel: "drop probability pd",
		YMin: 0, YMax: 1, LegendBottom: true, VLines: []report.RefLine{{Value: wave.Seconds()}, {Value: 2 * wave.Seconds()}}}
	for _, v := range vars {
		x, y := binColumns(v.bins, func(b *bin) float64 { return b.mean })
		fig.Panels = append(fig.Panels, report.Panel{
			Title:  fmt.Sprintf("%s: IAE %.2f s·s, settle %s s", v.label, v.iae, settle.Format(v.settle)),
			XLabel: "time (s)", YLabel: "mean RT (ms)",
			Series: []report.Series{{Label: "mean RT per period", X: x, Y: y}},
			HLines: []report.RefLine{{Value: msOf(p.tref), Label: fmt.Sprintf("Tref = %v", p.tref)}},
			VLines: []report.RefLine{{Value: wave.Seconds()}, {Value: 2 * wave.Seconds()}},
			YMin:   0, YMax: 5 * msOf(p.tref)})
		var sx, sy []float64
		for _, st := range v.res.states {
			sx, sy = append(sx, st.t.Seconds()), append(sy, st.setting)
		}
		pdp.Series = append(pdp.Series, report.Series{Label: v.label, X: sx, Y: sy})
	}
	res.AddFigure("response_time.png", fig)
	res.AddFigure("controller.png", &report.Figure{PanelHeight: 3.2, Panels: []report.Panel{pdp}})

	res.Checks = figure.YakshaShiftChecks(s, scale)
	res.Key = []string{"settle_s_max", "iae_self", "iae_static_low", "iae_static_high"}
	res.Setup = []string{
		fmt.Sprintf("Backend: the queue testbed as one processor-sharing server whose exponential demand depends on the page: home %v, search %v, product %v, cart %v, buy %v (the simulator's demands × %g; the page's share of the largest demand is passed to the testbed in its quality header, behind the proxy).",
			scaled(shiftPages[0].demand, scale), scaled(shiftPages[1].demand, scale), scaled(shiftPages[2].demand, scale),
			scaled(shiftPages[3].demand, scale), scaled(shiftPages[4].demand, scale), scale),
		fmt.Sprintf("Load: three waves of %g closed-loop users at t = 0, %v and %v, walking the browsing, shopping and ordering navigations (the simulator's matrices); think time exponential with mean %v capped at %v; a dropped user thinks and moves on.",
			users, wave, 2*wave, scaled(700*time.Millisecond, scale), scaled(7*time.Second, scale)),
		fmt.Sprintf("Controllers (the proxy's yaksha stage, Tref %v, period %v, pole %g/s): self-tuning (λ0 estimated, tune window %v); static for λ0 = %.0f req/s, the first wave's rate at Tref, N/(E[Z] + Tref); static for %g× that.",
			p.tref, p.period, p.pole, p.tuneWindow, lambdaLow, highFactor),
		fmt.Sprintf("Settling: the time from a wave's start until the completion-weighted mean RT over a centred %v window, having left the ±%g band around Tref, is back inside (0 if it never left). IAE integrates |mean RT − Tref| per %v period, in s·s.",
			settleWindow, band, p.period),
		fmt.Sprintf("Time compression %g: the paper's 0.7 s think time (cap 7 s), 150 ms Tref, 1 s period, −0.1/s pole and 50 s waves are scaled by %g; the paper's 700/1400/2100 browsers are the simulator's 100 users per wave.", scale, scale),
	}
}

// binPoints turns bins of width h into a series of mean response times in
// seconds, weighted by their OK responses, for package settle.
func binPoints(bins []bin, h time.Duration) []settle.Point {
	ps := make([]settle.Point, len(bins))
	for i, b := range bins {
		start := time.Duration(b.t * float64(time.Second))
		ps[i] = settle.Point{Start: start, End: start + h, Value: b.mean / 1000, Weight: float64(b.ok)}
	}
	return ps
}
