// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/sim"
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

// kihlStep declares the parameters of kihl-step and returns its run.
func kihlStep(ps *Params) RunFunc {
	var c figure.KihlParams
	figure.DeclareKihl(ps, &c, 60*time.Second)
	return func(env Env) (*figure.Result, error) { return runKihl(env, c, false) }
}

// kihlDistribution declares the parameters of kihl-distribution and returns its run.
func kihlDistribution(ps *Params) RunFunc {
	var c figure.KihlParams
	figure.DeclareKihl(ps, &c, 1000*time.Second)
	return func(env Env) (*figure.Result, error) { return runKihl(env, c, true) }
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

// queueName names the queue of a service distribution.
func queueName(service string) string {
	if service == "det" {
		return "M/D/1"
	}
	return "M/M/1"
}

func runKihl(env Env, c figure.KihlParams, cdf bool) (*figure.Result, error) {
	vars := []*kihlVariant{{name: "main", label: fmt.Sprintf("%s, K=%g, Ti=%gs", queueName(c.Service), c.K, c.Ti.Seconds()),
		ti: c.Ti, service: c.Service}}
	if c.CompareTi > 0 {
		vars = append(vars, &kihlVariant{name: "compare_ti", suffix: "_compare_ti",
			label: fmt.Sprintf("%s, K=%g, Ti=%gs", queueName(c.Service), c.K, c.CompareTi.Seconds()), ti: c.CompareTi, service: c.Service})
	}
	if c.CompareService {
		other := map[string]string{"exp": "det", "det": "exp"}[c.Service]
		suffix := map[string]string{"exp": "_mm1", "det": "_md1"}[other]
		vars = append(vars, &kihlVariant{name: suffix[1:], suffix: suffix,
			label: fmt.Sprintf("%s, K=%g, Ti=%gs", queueName(other), c.K, c.Ti.Seconds()), ti: c.Ti, service: other})
	}
	for _, v := range vars {
		var err error
		if c.Model == "fluid" {
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
	var plotted []figure.KihlVariant
	for _, v := range vars {
		var completed, rtSum float64
		periods := make([]figure.KihlPeriod, len(v.steps))
		for i, st := range v.steps {
			w, d := st.in(), st.Decision
			if err := ts.Append(v.name, st.end().Seconds(), w.Arrivals, w.Admitted, w.Rejected, w.Completed,
				ms(w.MeanRT), ms(w.P90RT), w.Utilization, w.Queue, d.New, st.Extra); err != nil {
				return nil, err
			}
			periods[i] = figure.KihlPeriod{Start: st.start(), End: st.end(), Offered: w.Arrivals, Admitted: w.Admitted,
				Rejected: w.Rejected, Completed: w.Completed, Utilization: w.Utilization}
			if st.start() >= c.MeasureFrom && w.Samples > 0 {
				completed += w.Samples
				rtSum += w.MeanRT * w.Samples
			}
		}
		cv2 := 1.0 // exponential service, or the fluid model's Poisson σ(k)
		if v.service == "det" {
			cv2 = 0
		}
		util := figure.KihlMetrics(s, v.suffix, periods, c, c.Duration, !cdf, cv2)
		plotted = append(plotted, figure.KihlVariant{Label: v.label, Suffix: v.suffix, Periods: periods, Util: util})
		s.Set("mean_rt_ms"+v.suffix, ms(ratio(rtSum, completed)))
	}
	for _, v := range plotted {
		if !cdf {
			figure.KihlSettling(s, v.Suffix, v.Periods, c, c.Duration)
			figure.KihlAfterSettling(s, v.Suffix, v.Periods, c.Duration)
		}
	}
	s.Set("rho_ref", c.RhoRef)
	s.Set("time_scale", 1)
	if !cdf {
		if err := figure.KihlModelSettling(s, c); err != nil {
			return nil, err
		}
	}
	res.Checks = figure.KihlChecks(s, c, 1, cdf)
	res.AddTable("timeseries.csv", ts)
	res.Key = []string{"utilization_mean", "utilization_std", "settling_time_s", "p_util_within_0_1"}
	if c.CompareTi > 0 {
		res.Key = append(res.Key, "utilization_std_compare_ti")
	}

	res.AddFigure("utilization.png", figure.KihlUtilizationFigure(s, plotted, c))

	rate := report.Panel{Title: "admission rate set by the controller", XLabel: "time (s)", YLabel: "token rate u/h (req/s)",
		HLines: []report.RefLine{{Value: c.RhoRef / c.ServiceTime.Seconds(), Label: fmt.Sprintf("ρ_ref·μ = %.1f req/s", c.RhoRef/c.ServiceTime.Seconds())}}}
	for _, v := range vars {
		x, y := make([]float64, len(v.steps)), make([]float64, len(v.steps))
		for i, st := range v.steps {
			x[i], y[i] = st.end().Seconds(), st.Decision.New
		}
		rate.Series = append(rate.Series, report.Series{Label: v.label, X: x, Y: y})
	}
	res.AddFigure("rate.png", &report.Figure{Panels: []report.Panel{rate}})

	if cdf {
		res.AddFigure("utilization_cdf.png", figure.KihlCDFFigure(plotted, c))
		res.Key = []string{"p_util_within_0_1", "utilization_mean", "utilization_std", "p_util_within_0_1_compare_ti"}
	}
	return res, nil
}

// kihlConfig is the real controller's configuration for one variant.
func kihlConfig(c figure.KihlParams, ti time.Duration) control.KihlConfig {
	cfg := control.DefaultKihlConfig()
	cfg.Period, cfg.RhoRef, cfg.K, cfg.Ti, cfg.InitialIntegral = c.H, c.RhoRef, c.K, ti, c.Initial
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
func kihlDES(seed uint64, c figure.KihlParams, ti time.Duration, service string) ([]step, error) {
	cfg := kihlConfig(c, ti)
	svc, err := serviceDist(service, c.ServiceTime.Seconds())
	if err != nil {
		return nil, err
	}
	e := sim.New(seed)
	if c.SpeedCV > 0 {
		svc = slowed{Dist: svc, speed: newSpeedNoise(e, c, e.Now)}
	}
	server, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: 1})
	if err != nil {
		return nil, err
	}
	busy, err := sim.NewBusy(e, server.Busy, "server")
	if err != nil {
		return nil, err
	}
	loop, err := newStaged(e, stage.Options{Name: "cgi", Controller: &cfg, Burst: c.Burst, Utilization: busy,
		Queue: func() float64 { return float64(server.InSystem()) }}, &sim.Visit{Engine: e, Station: server}, nil)
	if err != nil {
		return nil, err
	}
	loop.extra = kihlIntegral
	rate, err := dist.ConstantSchedule(c.Rate)
	if err != nil {
		return nil, err
	}
	src, err := sim.NewOpen(e, sim.OpenConfig{Name: "clients", Arrivals: dist.Poisson{Rate: rate},
		Types: []sim.RequestType{{Name: "cgi", Demand: svc}}, Target: loop.entry})
	if err != nil {
		return nil, err
	}
	src.Start()
	e.Run(c.Duration)
	return loop.steps, nil
}

// kihlFluid runs the paper's discrete-time fluid model with the real
// controller: each period the controller's u = rate·h is fed to the model.
func kihlFluid(seed uint64, c figure.KihlParams, ti time.Duration, service string) ([]step, error) {
	cfg := kihlConfig(c, ti)
	ctrl, err := control.NewKihl(cfg)
	if err != nil {
		return nil, err
	}
	h := c.H.Seconds()
	arr, err := dist.NewPoissonCount(c.Rate * h)
	if err != nil {
		return nil, err
	}
	var dep dist.Dist
	if service == "det" {
		dep, err = dist.NewDeterministic(h / c.ServiceTime.Seconds())
	} else {
		dep, err = dist.NewPoissonCount(h / c.ServiceTime.Seconds())
	}
	if err != nil {
		return nil, err
	}
	e := sim.New(seed)
	k := 0 // the period the fluid model steps
	if c.SpeedCV > 0 {
		// σ(k) = μh / (1 + ε(k)): the period serves fewer (more) requests.
		dep = scaledCount{Dist: dep, speed: newSpeedNoise(e, c, func() time.Duration { return time.Duration(k) * c.H })}
	}
	f, err := sim.NewFluid(sim.FluidConfig{Arrivals: arr, Departures: dep}, e.Stream("fluid"))
	if err != nil {
		return nil, err
	}
	var steps []step
	n := int(c.Duration / c.H)
	for ; k < n; k++ {
		u := ctrl.Current().New * h
		rho := f.Step(u)
		st := f.Last()
		m := sluice.Measurements{Elapsed: c.H, Arrivals: st.Alpha, Admitted: math.Round(st.UBar),
			Rejected: math.Round(st.Alpha - st.UBar), Completed: math.Round(math.Min(st.X+st.UBar, st.Sigma)),
			MeanRT: math.NaN(), P90RT: math.NaN(), Utilization: rho, Queue: st.XNext}
		d := ctrl.Update(sim.DefaultBase.Add(time.Duration(k+1)*c.H), m)
		steps = append(steps, step{Decision: d, Extra: ctrl.Integral()})
	}
	return steps, nil
}

// speedNoise is the server's speed in the simulator's Kihl runs with
// speed_cv > 0: in period k = ⌊t/h⌋ service takes 1 + ε(k) times as
// long, ε(k) = φ·ε(k−1) + √(1−φ²)·cv·N(0, 1), stationary from ε(0) =
// cv·N(0, 1), floored at 0.05 − 1. It stands for the live CPU, whose cost
// for identical work wanders by cv ≈ 0.12 with φ ≈ 0.55 per period
// (lab/NOTEBOOK.md, "Why the Kihl figures missed").
type speedNoise struct {
	now     func() time.Duration // the model's time
	h       time.Duration
	cv, phi float64
	rng     *rand.Rand
	k       int
	eps     float64
}

func newSpeedNoise(e *sim.Engine, c figure.KihlParams, now func() time.Duration) *speedNoise {
	rng := e.Stream("speed")
	return &speedNoise{now: now, h: c.H, cv: c.SpeedCV, phi: c.SpeedAC1, rng: rng, eps: c.SpeedCV * rng.NormFloat64()}
}

// factor returns 1 + ε of the current period.
func (n *speedNoise) factor() float64 {
	for k := int(n.now() / n.h); n.k < k; n.k++ {
		n.eps = n.phi*n.eps + math.Sqrt(1-n.phi*n.phi)*n.cv*n.rng.NormFloat64()
	}
	return math.Max(1+n.eps, 0.05)
}

// slowed is a service-time distribution scaled by the server's speed
// when a request is drawn (at its arrival; its queueing is short
// against a period).
type slowed struct {
	dist.Dist
	speed *speedNoise
}

func (d slowed) Sample(r *rand.Rand) float64 { return d.Dist.Sample(r) * d.speed.factor() }

func (d slowed) String() string {
	return fmt.Sprintf("%s × speed(cv %g, φ %g)", d.Dist, d.speed.cv, d.speed.phi)
}

// scaledCount is the fluid model's departures per period divided by the
// server's speed factor: the step draws σ(k) at the start of period k.
type scaledCount struct {
	dist.Dist
	speed *speedNoise
}

func (d scaledCount) Sample(r *rand.Rand) float64 { return d.Dist.Sample(r) / d.speed.factor() }

func (d scaledCount) String() string {
	return fmt.Sprintf("%s ÷ speed(cv %g, φ %g)", d.Dist, d.speed.cv, d.speed.phi)
}
