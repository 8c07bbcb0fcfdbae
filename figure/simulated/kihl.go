package simulated

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/dist"
	"github.com/sluicehq/sluice/figure"
	"github.com/sluicehq/sluice/report"
	"github.com/sluicehq/sluice/settle"
	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/stage"
)

// The Kihl scenarios reproduce Andersson, Kihl, Robertsson & Wittenmark
// (docs/algorithms.md §4): a PI controller of server utilization feeding a
// token bucket in front of a single FIFO server with Poisson arrivals at
// 100 req/s (≈ 2.25× capacity), from an empty system. Fig. 9 is the step
// response (kihl-step), Fig. 8 the distribution function of the
// per-period utilization over 1000 s (kihl-distribution). Both runs show,
// like the paper, the configured parameters, the "bad" integral time
// Ti = 0.1 s and the other service-time distribution (M/D/1 beside M/M/1).

// kihlParams are the parameters shared by both Kihl scenarios.
type kihlParams struct {
	duration     time.Duration
	rate         float64
	serviceTime  time.Duration
	service      string
	model        string
	h            time.Duration
	rhoRef       float64
	k            float64
	ti           time.Duration
	compareTi    time.Duration
	compareSvc   bool
	burst        int
	initial      float64
	measureFrom  time.Duration
	settleBand   float64
	settleWindow time.Duration
}

func declareKihl(ps *Params, c *kihlParams, duration time.Duration) {
	ps.Duration(&c.duration, "duration", duration, time.Second, 100000*time.Second,
		"length of the run, from an empty system")
	ps.Float(&c.rate, "arrival_rate", 100, 0.001, 1e6,
		"Poisson arrival rate in req/s (paper: 100 req/s, about 2.25× capacity)")
	ps.Duration(&c.serviceTime, "service_time", 22500*time.Microsecond, time.Microsecond, time.Hour,
		"mean service time 1/μ (paper: 22.5 ms, σ ≈ 44 requests per period)")
	ps.Choice(&c.service, "service", "exp", []string{"exp", "det"},
		"service-time distribution: exp gives M/M/1, det gives M/D/1")
	ps.Choice(&c.model, "model", "des", []string{"des", "fluid"},
		"des: discrete-event simulation of the queue and the real token bucket; fluid: the paper's discrete-time fluid model "+
			"x(k+1) = max(0, x + ū − σ) with Poisson α(k) and σ(k) (Poisson for exp, constant μh for det)")
	ps.Duration(&c.h, "period", time.Second, time.Millisecond, time.Hour, "control period h (paper: 1 s)")
	ps.Float(&c.rhoRef, "rho_ref", 0.8, 0.01, 1, "utilization reference ρ_ref (paper: 0.8)")
	ps.Float(&c.k, "k", 20, 1e-6, 1e6, "PI gain K in admissions per period per unit of utilization (paper's good and bad settings: 20)")
	ps.Duration(&c.ti, "ti", 2800*time.Millisecond, time.Millisecond, time.Hour, "integral time Ti (paper: good 2.8 s, bad 0.1 s)")
	ps.Duration(&c.compareTi, "compare_ti", 100*time.Millisecond, 0, time.Hour,
		"integral time of the comparison run drawn beside the main one (paper's bad setting 0.1 s); 0 disables it")
	ps.Bool(&c.compareSvc, "compare_service", true,
		"also run the main parameters with the other service distribution (M/D/1 beside M/M/1), as the paper's Figs. 8 and 9 do")
	ps.Int(&c.burst, "burst", 5, 1, 1000000,
		"token-bucket size; the paper feeds u admissions per period to a token bucket without giving its size; 5 is sluice's default "+
			"(small, so admissions per period stay close to u)")
	ps.Float(&c.initial, "initial_integral", 0, 0, 1e6,
		"integrator state I(0) in admissions per period at t = 0; 0 (the controller's default) is a controller that has only seen an idle "+
			"server, whose anti-windup keeps I at 0, so the run shows the full step response")
	ps.Duration(&c.measureFrom, "measure_from", 10*time.Second, 0, 100000*time.Second,
		"start of the window over which utilization_mean, utilization_std and p_util_within_0_1 are computed (Fig. 9 read from 10 s to 60 s)")
	ps.Float(&c.settleBand, "settle_band", 0.1, 0.001, 1,
		"settling band around ρ_ref for settling_time_s")
	ps.Duration(&c.settleWindow, "settle_window", 5*time.Second, 0, time.Hour,
		"settling_time_s (kihl-step) is the end of the first period from which the centred moving average of ρ over this window "+
			"(2·⌊window/2h⌋+1 periods) stays within settle_band of ρ_ref until the end of the run; per-period utilization "+
			"of an M/M/1 queue has a standard deviation of about 0.12 at ρ = 0.8 and h = 1 s, which the window filters")
}

func kihlStep() Scenario {
	return Scenario{
		Name: "kihl-step",
		Setup: func(ps *Params) RunFunc {
			var c kihlParams
			declareKihl(ps, &c, 60*time.Second)
			return func(env Env) (*figure.Result, error) { return runKihl(env, c, false) }
		},
	}
}

func kihlDistribution() Scenario {
	return Scenario{
		Name: "kihl-distribution",
		Setup: func(ps *Params) RunFunc {
			var c kihlParams
			declareKihl(ps, &c, 1000*time.Second)
			return func(env Env) (*figure.Result, error) { return runKihl(env, c, true) }
		},
	}
}

// kihlVariant is one run of the Kihl loop.
type kihlVariant struct {
	name    string // variant name in the time series
	suffix  string // metric suffix ("" for the main run)
	label   string // legend label
	ti      time.Duration
	service string
	steps   []step
}

func (c kihlParams) queueName(service string) string {
	if service == "det" {
		return "M/D/1"
	}
	return "M/M/1"
}

func runKihl(env Env, c kihlParams, cdf bool) (*figure.Result, error) {
	vars := []*kihlVariant{{name: "main", label: fmt.Sprintf("%s, K=%g, Ti=%gs", c.queueName(c.service), c.k, c.ti.Seconds()),
		ti: c.ti, service: c.service}}
	if c.compareTi > 0 {
		vars = append(vars, &kihlVariant{name: "compare_ti", suffix: "_compare_ti",
			label: fmt.Sprintf("%s, K=%g, Ti=%gs", c.queueName(c.service), c.k, c.compareTi.Seconds()), ti: c.compareTi, service: c.service})
	}
	if c.compareSvc {
		other := map[string]string{"exp": "det", "det": "exp"}[c.service]
		suffix := map[string]string{"exp": "_mm1", "det": "_md1"}[other]
		vars = append(vars, &kihlVariant{name: suffix[1:], suffix: suffix,
			label: fmt.Sprintf("%s, K=%g, Ti=%gs", c.queueName(other), c.k, c.ti.Seconds()), ti: c.ti, service: other})
	}
	for _, v := range vars {
		var err error
		if c.model == "fluid" {
			v.steps, err = kihlFluid(env.Seed, c, v.ti, v.service)
		} else {
			v.steps, err = kihlDES(env.Seed, c, v.ti, v.service)
		}
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.name, err)
		}
	}

	res := newResult(env)
	s := res.Summary
	ts := report.NewTable("variant", "time_s", "offered", "admitted", "rejected", "completed",
		"mean_rt_ms", "p90_rt_ms", "utilization", "queue", "rate_rps", "integral")
	for _, v := range vars {
		var util []float64
		var offered, admitted, rejected, completed, rtSum float64
		for _, st := range v.steps {
			w, d := st.in(), st.Decision
			if err := ts.Append(v.name, st.end().Seconds(), w.Arrivals, w.Admitted, w.Rejected, w.Completed,
				ms(w.MeanRT), ms(w.P90RT), w.Utilization, w.Queue, d.New, st.Extra); err != nil {
				return nil, err
			}
			if st.start() >= c.measureFrom {
				util = append(util, w.Utilization)
				offered += w.Arrivals
				admitted += w.Admitted
				rejected += w.Rejected
				if w.Samples > 0 {
					completed += w.Samples
					rtSum += w.MeanRT * w.Samples
				}
			}
		}
		mean, std := meanStd(util)
		within := 0
		for _, u := range util {
			if math.Abs(u-c.rhoRef) <= 0.1+1e-12 {
				within++
			}
		}
		window := (c.duration - c.measureFrom).Seconds()
		s.Set("utilization_mean"+v.suffix, mean)
		s.Set("utilization_std"+v.suffix, std)
		s.Set("p_util_within_0_1"+v.suffix, ratio(float64(within), float64(len(util))))
		if !cdf {
			s.Set("settling_time_s"+v.suffix, settle.Time(stepPoints(v.steps, func(m sluice.Measurements) (float64, float64) { return m.Utilization, 1 }),
				c.rhoRef, c.settleBand, settle.HalfWindow(c.settleWindow, c.h)))
		}
		s.Set("admitted_rps"+v.suffix, admitted/window)
		s.Set("reject_fraction"+v.suffix, ratio(rejected, offered))
		s.Set("mean_rt_ms"+v.suffix, ms(ratio(rtSum, completed)))
	}
	s.Set("rho_ref", c.rhoRef)
	res.AddTable("timeseries.csv", ts)
	res.Key = []string{"utilization_mean", "utilization_std", "settling_time_s", "p_util_within_0_1"}
	if c.compareTi > 0 {
		res.Key = append(res.Key, "utilization_std_compare_ti")
	}

	// Fig. 9: utilization per period, one panel per variant.
	step := &report.Figure{PanelHeight: 2.6}
	for _, v := range vars {
		x, y := make([]float64, len(v.steps)), make([]float64, len(v.steps))
		for i, st := range v.steps {
			x[i], y[i] = st.end().Seconds(), st.in().Utilization
		}
		step.Panels = append(step.Panels, report.Panel{
			Title: v.label, XLabel: "time (s)", YLabel: "utilization ρ (fraction busy)",
			Series: []report.Series{{Label: "ρ(k), per period", X: x, Y: y}},
			HLines: []report.RefLine{{Value: c.rhoRef, Label: fmt.Sprintf("ρ_ref = %g", c.rhoRef)}},
			YMin:   0, YMax: 1.05, LegendBottom: true,
		})
	}
	res.AddFigure("utilization.png", step)

	rate := report.Panel{Title: "admission rate set by the controller", XLabel: "time (s)", YLabel: "token rate u/h (req/s)",
		HLines: []report.RefLine{{Value: c.rhoRef / c.serviceTime.Seconds(), Label: fmt.Sprintf("ρ_ref·μ = %.1f req/s", c.rhoRef/c.serviceTime.Seconds())}}}
	for _, v := range vars {
		x, y := make([]float64, len(v.steps)), make([]float64, len(v.steps))
		for i, st := range v.steps {
			x[i], y[i] = st.end().Seconds(), st.Decision.New
		}
		rate.Series = append(rate.Series, report.Series{Label: v.label, X: x, Y: y})
	}
	res.AddFigure("rate.png", &report.Figure{Panels: []report.Panel{rate}})

	if cdf {
		p := report.Panel{Title: fmt.Sprintf("distribution function of per-period utilization (from %gs)", c.measureFrom.Seconds()),
			XLabel: "utilization ρ (fraction busy)", YLabel: "P(ρ(k) ≤ x)", XMin: 0, XMax: 1.02, YMin: 0, YMax: 1.02, LegendLeft: true,
			VLines: []report.RefLine{{Value: c.rhoRef, Label: fmt.Sprintf("ρ_ref = %g", c.rhoRef)}}}
		for _, v := range vars {
			var u []float64
			for _, st := range v.steps {
				if st.start() >= c.measureFrom {
					u = append(u, st.in().Utilization)
				}
			}
			p.Series = append(p.Series, report.CDFSeries(v.label, u))
		}
		res.AddFigure("cdf.png", &report.Figure{PanelHeight: 5, Panels: []report.Panel{p}})
		res.Key = []string{"p_util_within_0_1", "utilization_mean", "utilization_std", "p_util_within_0_1_compare_ti"}
	}
	return res, nil
}

// kihlConfig is the real controller's configuration for one variant.
func kihlConfig(c kihlParams, ti time.Duration) control.KihlConfig {
	cfg := control.DefaultKihlConfig()
	cfg.Period, cfg.RhoRef, cfg.K, cfg.Ti, cfg.InitialIntegral = c.h, c.rhoRef, c.k, ti, c.initial
	return cfg
}

// kihlIntegral reads the Kihl controller's integrator after a step.
func kihlIntegral(c sluice.Controller) float64 {
	if k, ok := c.(*control.Kihl); ok {
		return k.Integral()
	}
	return math.NaN()
}

// kihlDES runs the discrete-event model: Poisson arrivals → the proxy's
// stage (a kihl stage: its token bucket, its recorder, the server's busy
// fraction as its utilization sensor) → FIFO single server; the stage
// steps every h as the proxy's runner does.
func kihlDES(seed uint64, c kihlParams, ti time.Duration, service string) ([]step, error) {
	cfg := kihlConfig(c, ti)
	svc, err := serviceDist(service, c.serviceTime.Seconds())
	if err != nil {
		return nil, err
	}
	e := sim.New(seed)
	server, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: 1})
	if err != nil {
		return nil, err
	}
	busy, err := sim.NewBusy(e, server.Busy, "server")
	if err != nil {
		return nil, err
	}
	loop, err := newStaged(e, stage.Options{Name: "cgi", Controller: &cfg, Burst: c.burst, Utilization: busy,
		Queue: func() float64 { return float64(server.InSystem()) }}, &sim.Visit{Engine: e, Station: server}, nil)
	if err != nil {
		return nil, err
	}
	loop.extra = kihlIntegral
	rate, err := dist.ConstantSchedule(c.rate)
	if err != nil {
		return nil, err
	}
	src, err := sim.NewOpen(e, sim.OpenConfig{Name: "clients", Arrivals: dist.Poisson{Rate: rate},
		Types: []sim.RequestType{{Name: "cgi", Demand: svc}}, Target: loop.entry})
	if err != nil {
		return nil, err
	}
	src.Start()
	e.Run(c.duration)
	return loop.steps, nil
}

// kihlFluid runs the paper's discrete-time fluid model with the real
// controller: each period the controller's u = rate·h is fed to the model.
func kihlFluid(seed uint64, c kihlParams, ti time.Duration, service string) ([]step, error) {
	cfg := kihlConfig(c, ti)
	ctrl, err := control.NewKihl(cfg)
	if err != nil {
		return nil, err
	}
	h := c.h.Seconds()
	arr, err := dist.NewPoissonCount(c.rate * h)
	if err != nil {
		return nil, err
	}
	var dep dist.Dist
	if service == "det" {
		dep, err = dist.NewDeterministic(h / c.serviceTime.Seconds())
	} else {
		dep, err = dist.NewPoissonCount(h / c.serviceTime.Seconds())
	}
	if err != nil {
		return nil, err
	}
	e := sim.New(seed)
	f, err := sim.NewFluid(sim.FluidConfig{Arrivals: arr, Departures: dep}, e.Stream("fluid"))
	if err != nil {
		return nil, err
	}
	var steps []step
	n := int(c.duration / c.h)
	for k := 0; k < n; k++ {
		u := ctrl.Current().New * h
		rho := f.Step(u)
		st := f.Last()
		m := sluice.Measurements{Elapsed: c.h, Arrivals: st.Alpha, Admitted: math.Round(st.UBar),
			Rejected: math.Round(st.Alpha - st.UBar), Completed: math.Round(math.Min(st.X+st.UBar, st.Sigma)),
			MeanRT: math.NaN(), P90RT: math.NaN(), Utilization: rho, Queue: st.XNext}
		d := ctrl.Update(sim.DefaultBase.Add(time.Duration(k+1)*c.h), m)
		steps = append(steps, step{Decision: d, Extra: ctrl.Integral()})
	}
	return steps, nil
}
