package scenario

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/dist"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/report"
	"github.com/sluicehq/sluice/sim"
)

// seda-spike reproduces Welsh & Culler's Fig. 10 (and the controller trace
// of Fig. 7; docs/algorithms.md §5): a flash crowd from 3 to 1000
// closed-loop users against one bottleneck stage, with SEDA's AIMD
// controller on the stage's p90 and without admission control. A rejected
// user waits 5 s before retrying.

// sedaStageParams are the parameters shared by the SEDA scenarios.
type sedaStageParams struct {
	serviceTime time.Duration
	service     string
	think       time.Duration
	retryWait   dist.Dist
	target      time.Duration
	burst       int
	initialRate float64
}

// sedaDefaults are the per-scenario defaults of the shared stage
// parameters.
type sedaDefaults struct {
	serviceTime, target time.Duration
	serviceDoc          string
	retryWait, retryDoc string // default "det:5s" with a standard doc
}

func declareSEDAStage(ps *Params, c *sedaStageParams, d sedaDefaults) {
	if d.retryWait == "" {
		d.retryWait, d.retryDoc = "det:5s", "wait of a rejected user before retrying (paper: 5 s)"
	}
	ps.Duration(&c.serviceTime, "service_time", d.serviceTime, time.Microsecond, time.Hour, d.serviceDoc)
	ps.Choice(&c.service, "service", "exp", serviceKinds, "service-time distribution of the stage")
	ps.Duration(&c.think, "think", 20*time.Millisecond, 0, time.Hour, "mean of the users' exponential think time (paper: 20 ms)")
	ps.DurationDist(&c.retryWait, "retry_wait", d.retryWait, d.retryDoc)
	ps.Duration(&c.target, "target", d.target, time.Millisecond, time.Hour, "90th-percentile response-time target of the controller")
	ps.Int(&c.burst, "burst", 5, 1, 1000000, "token-bucket size of the stage's gate (the paper does not give it; sluice's default)")
	ps.Float(&c.initialRate, "initial_rate", 50, 0.05, 5000,
		"the controller's initial token rate in req/s. The paper does not give it; 50 req/s is the capacity of the default 20 ms stage, "+
			"which an operator sizing the stage knows (the degradation controller ignores it: it starts with admission control off). Under the light base load the additive increase raises it by about 1.6 req/s per run. The "+
			"controller's own default is rate_max = 5000 (start open); with track_demand its first cut starts from the admitted rate, "+
			"and that start gives a spike p90 of 1.35–1.82 s for seeds 1–5 (8.4–9.3 s with track_demand false)")
}

type sedaSpikeParams struct {
	stage      sedaStageParams
	baseUsers  int
	spikeUsers int
	spikeStart time.Duration
	spikeLen   time.Duration
	after      time.Duration
}

func sedaSpike() Scenario {
	return Scenario{
		Name:        "seda-spike",
		Description: "SEDA AIMD on p90 under a flash crowd of 3 → 1000 users, with and without admission control (paper Figs. 7, 10)",
		Setup: func(ps *Params) RunFunc {
			var c sedaSpikeParams
			declareSEDAStage(ps, &c.stage, sedaDefaults{serviceTime: 20 * time.Millisecond, target: time.Second,
				serviceDoc: "mean service time of the bottleneck stage (one server, FIFO queue): 20 ms is 50 req/s"})
			ps.Int(&c.baseUsers, "base_users", 3, 0, 1000000, "users before and after the spike (paper: 3)")
			ps.Int(&c.spikeUsers, "spike_users", 1000, 1, 1000000, "users during the spike (paper: 1000)")
			ps.Duration(&c.spikeStart, "spike_start", 60*time.Second, 0, 100000*time.Second, "time the spike starts")
			ps.Duration(&c.spikeLen, "spike_length", 300*time.Second, time.Second, 100000*time.Second, "length of the spike")
			ps.Duration(&c.after, "after", 60*time.Second, 0, 100000*time.Second, "time simulated after the spike")
			return func(env Env) (*Result, error) { return runSEDASpike(env, c) }
		},
	}
}

// sedaVariant is one run of a SEDA scenario.
type sedaVariant struct {
	name, suffix, label string
	run                 *sedaRun
}

// sedaRun is the outcome of one stage run.
type sedaRun struct {
	report []*sim.Recorder // per user class, 1 s rows
	loop   *triggered
	done   samples // admitted requests: finish time, response time
	class  []int   // class of each entry of done
	users  []*sim.Users
	rates  []step // controller steps
}

// sedaConfig returns the real controller's configuration for a stage.
func sedaConfig(c sedaStageParams) control.SEDAConfig {
	cfg := control.DefaultSEDAConfig()
	cfg.Target = c.target
	cfg.InitialRate = c.initialRate
	return cfg
}

// userGroup describes one group of closed-loop users of a SEDA run.
type userGroup struct {
	name  string
	class int
	count dist.Schedule
}

// runSEDAStage runs closed-loop user groups through a controller-gated
// single-server FIFO stage. classOf maps a request to the controller's
// class; quality, when set, scales each request's service demand at the
// moment it starts service (degradation).
func runSEDAStage(seed uint64, c sedaStageParams, ctrl sluice.Controller, ctrlClasses int, groups []userGroup,
	classOf func(r *sim.Request) int, degrade bool, until time.Duration) (*sedaRun, error) {
	svc, err := serviceDist(c.service, c.serviceTime.Seconds())
	if err != nil {
		return nil, err
	}
	think, err := dist.NewExponential(c.think.Seconds())
	if err != nil {
		return nil, err
	}
	retry := c.retryWait
	e := sim.New(seed)
	server, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: 1})
	if err != nil {
		return nil, err
	}
	run := &sedaRun{}
	var next sim.Handler = &sim.Visit{Engine: e, Station: server}
	loop, err := newTriggered(e, ctrl, ctrlClasses, c.burst, nil)
	if err != nil {
		return nil, err
	}
	if degrade {
		// The application reads the quality level when it starts serving
		// a request and does proportionally less work.
		next = &sim.Hold{Engine: e, Queue: server, Next: &sim.Delay{Engine: e,
			Fn: func(_ time.Time, r *sim.Request) (time.Duration, bool) {
				return sim.Seconds(r.Demand * loop.gates.Quality()), true
			}}}
	}
	loop.next = next
	loop.classOf = classOf
	nClasses := 0
	for _, g := range groups {
		nClasses = max(nClasses, g.class+1)
	}
	for range nClasses {
		rec, err := sim.NewRecorder(e, sim.RecorderConfig{Busy: server.Busy, Queue: func() float64 { return float64(server.InSystem()) }})
		if err != nil {
			return nil, err
		}
		if err := rec.Start(time.Second, nil); err != nil {
			return nil, err
		}
		run.report = append(run.report, rec)
	}
	loop.report = run.report
	loop.onDone = func(r *sim.Request, entered time.Duration) {
		if r.Outcome == sim.Completed {
			run.done.add(r.Finished, r.Finished-entered)
			run.class = append(run.class, r.Class)
		}
	}
	run.loop = loop
	for i, g := range groups {
		u, err := sim.NewUsers(e, sim.UsersConfig{Name: g.name, Count: g.count, Think: think, RetryWait: retry,
			Types: []sim.RequestType{{Name: "request", Demand: svc}}, Class: g.class, ClientBase: i * 1000000, Target: loop})
		if err != nil {
			return nil, err
		}
		u.Start()
		run.users = append(run.users, u)
	}
	e.Run(until)
	if loop.err != nil {
		return nil, loop.err
	}
	run.rates = loop.steps
	return run, nil
}

func runSEDASpike(env Env, c sedaSpikeParams) (*Result, error) {
	end := c.spikeStart + c.spikeLen + c.after
	users, err := dist.NewSchedule(dist.Segment{Start: 0, Rate: float64(c.baseUsers)},
		dist.Segment{Start: c.spikeStart, Rate: float64(c.spikeUsers)},
		dist.Segment{Start: c.spikeStart + c.spikeLen, Rate: float64(c.baseUsers)})
	if err != nil {
		return nil, err
	}
	groups := []userGroup{{name: "users", count: users}}
	vars := []*sedaVariant{{name: "controlled", label: fmt.Sprintf("SEDA AIMD, p90 target %v", c.stage.target)},
		{name: "uncontrolled", suffix: "_uncontrolled", label: "no admission control"}}
	for _, v := range vars {
		var ctrl sluice.Controller
		if v.name == "controlled" {
			ctrl, err = control.NewSEDA(sedaConfig(c.stage))
		} else {
			none := control.DefaultNoneConfig()
			ctrl, err = none.New()
		}
		if err != nil {
			return nil, err
		}
		v.run, err = runSEDAStage(env.Seed, c.stage, ctrl, 1, groups, nil, false, end)
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.name, err)
		}
	}
	res := newResult(env)
	s := res.Summary
	from, to := c.spikeStart, c.spikeStart+c.spikeLen
	ts := report.NewTable("variant", "time_s", "users", "offered", "admitted", "rejected", "completed",
		"mean_rt_ms", "p90_rt_ms", "utilization", "queue", "rate_rps")
	for _, v := range vars {
		rows := v.run.report[0].Rows()
		k := 0
		rate := v.run.loop.ctrl.Current().New
		for _, w := range rows {
			// The rate in force at the row's end: the last controller step
			// at or before it.
			for k < len(v.run.rates) && v.run.rates[k].Row.End <= w.End {
				rate = v.run.rates[k].Decision.New
				k++
			}
			if v.name == "uncontrolled" {
				rate = 0
			}
			if err := ts.Append(v.name, rowTime(w), int(users.At(w.Start)), w.Offered, w.Admitted, w.Rejected, w.Completed,
				ms(w.MeanRT), ms(w.P90RT), w.Utilization, w.Queue, rate); err != nil {
				return nil, err
			}
		}
		var offered, rejected float64
		for _, w := range rows {
			if w.Start >= from && w.End <= to {
				offered += float64(w.Offered)
				rejected += float64(w.Rejected)
			}
		}
		rts := v.run.done.between(from, to)
		s.Set("p90_ms_spike"+v.suffix, ms(monitor.Percentile(rts, 0.9)))
		s.Set("mean_rt_ms_spike"+v.suffix, ms(report.Mean(rts)))
		s.Set("reject_fraction_spike"+v.suffix, ratio(rejected, offered))
		s.Set("goodput_rps_spike"+v.suffix, float64(len(rts))/(to-from).Seconds())
		// The steady part of the spike: after its first minute.
		if c.spikeLen > 2*time.Minute {
			steady := v.run.done.between(from+time.Minute, to)
			s.Set("p90_ms_spike_after_60s"+v.suffix, ms(monitor.Percentile(steady, 0.9)))
		}
	}
	s.Set("target_ms", ms(c.stage.target.Seconds()))
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", controllerTable(vars[0].run.rates))
	res.Key = []string{"p90_ms_spike", "reject_fraction_spike", "p90_ms_spike_uncontrolled"}

	// Fig. 10: p90 per second and the fraction rejected.
	p90 := report.Panel{Title: fmt.Sprintf("massive load spike: %d → %d users at t = %gs", c.baseUsers, c.spikeUsers, c.spikeStart.Seconds()),
		XLabel: "time (s)", YLabel: "p90 RT (ms)", LogY: true, LegendLeft: true,
		HLines: []report.RefLine{{Value: ms(c.stage.target.Seconds()), Label: fmt.Sprintf("target %v", c.stage.target)}},
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	rej := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.05, LegendLeft: true,
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	for _, v := range vars {
		rows := v.run.report[0].Rows()
		x, y, r := make([]float64, len(rows)), make([]float64, len(rows)), make([]float64, len(rows))
		for i, w := range rows {
			x[i], y[i], r[i] = rowTime(w), ms(w.P90RT), ratio(float64(w.Rejected), float64(w.Offered))
		}
		p90.Series = append(p90.Series, report.Series{Label: v.label, X: x, Y: y})
		if v.name == "controlled" {
			rej.Series = append(rej.Series, report.Series{Label: "rejected / offered, " + v.label, X: x, Y: r})
		}
	}
	res.AddFigure("spike.png", &report.Figure{PanelHeight: 3.4, Panels: []report.Panel{p90, rej}})
	res.AddFigure("controller.png", controllerFigure(vars[0].run.rates, c.stage.target, "SEDA controller trace (Fig. 7)"))
	return res, nil
}

// controllerTable lists every controller run: when, class, samples, the
// p90 it saw, and the resulting rate (and quality).
func controllerTable(steps []step) *report.Table {
	t := report.NewTable("time_s", "class", "samples", "p90_rt_ms", "rate_rps", "quality", "gate_off", "acted")
	for _, st := range steps {
		d := st.Decision
		_ = t.Append(rowTime(st.Row), d.Class, st.Row.Completed, ms(st.Row.P90RT), d.New, d.Quality, d.GateOff, d.Acted)
	}
	return t
}

// controllerFigure draws the p90 each run saw and the token rate it set.
func controllerFigure(steps []step, target time.Duration, title string) *report.Figure {
	var x, p, r []float64
	for _, st := range steps {
		x = append(x, rowTime(st.Row))
		p = append(p, ms(st.Row.P90RT))
		r = append(r, st.Decision.New)
	}
	return &report.Figure{PanelHeight: 3, Panels: []report.Panel{
		{Title: title, XLabel: "time (s)", YLabel: "p90 per run (ms)", LogY: true, LegendLeft: true,
			Series: []report.Series{{Label: "p90 of the samples of each run", X: x, Y: p}},
			HLines: []report.RefLine{{Value: ms(target.Seconds()), Label: fmt.Sprintf("target %v", target)}}},
		{XLabel: "time (s)", YLabel: "token rate (req/s)", LogY: true, LegendLeft: true,
			Series: []report.Series{{Label: "admission rate", X: x, Y: r}}},
	}}
}
