package simulated

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/stage"
)

// tenants: four tenants of equal weight share auto's queue in front of
// the adaptive figure's backend (4 workers × exponential 10 ms, 400 req/s)
// at 3× overload; tenant "heavy" sends ten times as much as each of the
// light tenants a, b, c. With fair queueing (stage.Tenants) each light
// tenant keeps ≥ 0.95× its fair share of the goodput — max-min fair: its
// whole demand, which is below a quarter of the capacity — with its p99
// within the objective, and the heavy tenant gets what is left; the FIFO
// row is the control.

var tenantNames = []string{"heavy", "a", "b", "c"}

type tenantsParams struct {
	figure.AdaptiveParams
	overload float64
	warm     time.Duration
	length   time.Duration
}

func tenantsScenario(ps *Params) RunFunc {
	var c tenantsParams
	figure.DeclareAdaptive(ps, &c.AdaptiveParams)
	ps.Float(&c.overload, "overload", 3, 0, 1000, "offered load of all tenants, × capacity (the heavy tenant 10/13 of it)")
	ps.Duration(&c.warm, "warm", 10*time.Second, 0, time.Hour, "time before the measurement")
	ps.Duration(&c.length, "length", 20*time.Second, time.Second, time.Hour, "time measured")
	return func(env Env) (*figure.Result, error) { return runTenants(env, c) }
}

func runTenants(env Env, c tenantsParams) (*figure.Result, error) {
	res := newResult(env)
	capacity := float64(c.Workers) / c.ServiceTime.Seconds()
	light := c.overload * capacity / 13
	tab := report.NewTable("queue", "tenant", "offered_rps", "goodput_rps", "fair_share_rps", "p99_ms", "reject_fraction")
	for _, fair := range []bool{true, false} {
		queue := map[bool]string{true: "fair", false: "fifo"}[fair]
		out, err := runTenantsOne(env.Seed, c, fair, light)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", queue, err)
		}
		for i, name := range tenantNames {
			rate := light
			if i == 0 {
				rate = 10 * light
			}
			share := min(capacity/4, rate)
			if i == 0 {
				share = capacity - 3*min(capacity/4, light)
			}
			m := out[i]
			key := queue + "_" + name
			res.Summary.Set("goodput_rps_"+key, m.goodput)
			res.Summary.Set("p99_ms_"+key, m.p99)
			res.Summary.Set("fair_share_rps_"+key, share)
			if err := tab.Append(queue, name, rate, m.goodput, share, m.p99, m.reject); err != nil {
				return nil, err
			}
			if !fair {
				continue
			}
			if i == 0 {
				res.Checks = append(res.Checks, figure.AtLeast(res.Summary, "the heavy tenant gets what is left, not zero (≥ 0.5× the rest)", "goodput_rps_"+key, 0.5*share))
				continue
			}
			res.Key = append(res.Key, "goodput_rps_"+key)
			res.Checks = append(res.Checks,
				figure.AtLeast(res.Summary, fmt.Sprintf("light tenant %s keeps ≥ 0.95× its fair share", name), "goodput_rps_"+key, 0.95*share),
				figure.AtMost(res.Summary, fmt.Sprintf("light tenant %s: p99 ≤ the objective", name), "p99_ms_"+key, ms(c.SLO.Seconds())))
		}
	}
	res.AddTable("tenants.csv", tab)
	return res, nil
}

type tenantMetrics struct{ goodput, p99, reject float64 }

func runTenantsOne(seed uint64, c tenantsParams, fair bool, light float64) ([]tenantMetrics, error) {
	e := sim.New(seed)
	cfg := control.DefaultAutoConfig()
	cfg.SLO = c.SLO
	st, err := stage.New(stage.Options{Name: "auto", Controller: &cfg, MaxQueue: 4096, Tenants: stage.Tenants{Fair: fair}}, e.Time())
	if err != nil {
		return nil, err
	}
	svc, err := dist.NewExponential(c.ServiceTime.Seconds())
	if err != nil {
		return nil, err
	}
	backend, err := sim.NewFIFO(e, sim.FIFOConfig{Servers: c.Workers})
	if err != nil {
		return nil, err
	}
	drv, err := sim.NewStage(e, st, &sim.Visit{Engine: e, Station: backend}, nil)
	if err != nil {
		return nil, err
	}
	drv.TenantOf = func(r *sim.Request) string { return tenantNames[r.Client] }
	from, to := c.warm, c.warm+c.length
	type rec struct {
		rts               []float64
		good, off, reject int
	}
	recs := make([]rec, len(tenantNames))
	for i := range tenantNames {
		rate := light
		if i == 0 {
			rate = 10 * light
		}
		sched, err := dist.NewSchedule(dist.Segment{Rate: rate})
		if err != nil {
			return nil, err
		}
		src, err := sim.NewOpen(e, sim.OpenConfig{Name: "tenant-" + tenantNames[i], Arrivals: dist.Poisson{Rate: sched},
			Types: []sim.RequestType{{Demand: svc}}, Target: drv, Client: i,
			OnFinish: func(r *sim.Request) {
				if r.Sent < from || r.Sent >= to {
					return
				}
				q := &recs[r.Client]
				q.off++
				switch {
				case r.Outcome == sim.Rejected:
					q.reject++
				case r.Outcome == sim.Completed:
					rt := r.Finished - r.Sent
					q.rts = append(q.rts, rt.Seconds())
					if rt <= c.SLO {
						q.good++
					}
				}
			}})
		if err != nil {
			return nil, err
		}
		src.Start()
		e.Schedule(to, src.Stop)
	}
	e.Run(to + c.Timeout)
	out := make([]tenantMetrics, len(recs))
	for i, q := range recs {
		out[i] = tenantMetrics{goodput: float64(q.good) / c.length.Seconds(), p99: ms(monitor.Percentile(q.rts, 0.99)),
			reject: ratio(float64(q.reject), float64(q.off))}
	}
	return out, nil
}
