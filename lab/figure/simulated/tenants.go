// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/stage"
)

// tenants: four tenants of equal weight share auto's queue in front of
// the adaptive figure's backend (4 workers × exponential 10 ms, 400 req/s)
// at 3× overload; tenant "heavy" sends ten times as much as each of the
// light tenants a, b, c. With fair queueing (stage.Tenants) each light
// tenant keeps ≥ 0.95× its fair share of the goodput — max-min fair
// (figure.MaxMinShares) over the rates the tenants offered in the
// measured interval: a light tenant's whole demand, which is below a
// quarter of the capacity — with its p99 within the objective, and the
// heavy tenant gets what is left; the FIFO row is the control. The share
// is taken from the measured offered rate, not the nominal one: over 20 s
// a Poisson stream of 92.3 req/s offers 92.3 ± 2.1 req/s (seed 1's tenant
// b offered 87.05), so a check against the nominal rate fails on the
// draw whatever the queue does.

var tenantNames = figure.TenantNames

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
	rates := figure.TenantRates(capacity, c.overload)
	tab := figure.NewTenantTable()
	for _, fair := range []bool{true, false} {
		queue := map[bool]string{true: "fair", false: "fifo"}[fair]
		out, err := runTenantsOne(env.Seed, c, fair, rates)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", queue, err)
		}
		rows := make([]figure.TenantRow, len(out))
		for i, m := range out {
			rows[i] = figure.TenantRow{Offered: rates[i], Measured: m.offered, Goodput: m.goodput, P99MS: m.p99, RejectFraction: m.reject}
		}
		checks, key, err := figure.TenantChecks(res.Summary, tab, queue, capacity, ms(c.SLO.Seconds()), rows)
		if err != nil {
			return nil, err
		}
		res.Checks = append(res.Checks, checks...)
		res.Key = append(res.Key, key...)
	}
	res.AddTable("tenants.csv", tab)
	return res, nil
}

type tenantMetrics struct{ offered, goodput, p99, reject float64 }

func runTenantsOne(seed uint64, c tenantsParams, fair bool, rates []float64) ([]tenantMetrics, error) {
	e := sim.New(seed)
	cfg := auto.DefaultConfig()
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
		sched, err := dist.NewSchedule(dist.Segment{Rate: rates[i]})
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
		out[i] = tenantMetrics{offered: float64(q.off) / c.length.Seconds(), goodput: float64(q.good) / c.length.Seconds(), p99: ms(monitor.Percentile(q.rts, 0.99)),
			reject: ratio(float64(q.reject), float64(q.off))}
	}
	return out, nil
}
