// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
)

// tenants, live: the simulator's tenants figure on real sockets. The
// adaptive figure's backend (the queue testbed, 4 FIFO workers ×
// exponential 10 ms, 400 req/s) behind the sluice proxy with one auto
// stage (told the SLO, 250 ms); four open-loop Poisson loads, one per
// tenant, at 3× the capacity in all (figure.TenantRates), each sending its
// tenant in the hop tenant header, which the proxy believes from
// 127.0.0.1 (classes.trusted_proxies). Two rows: fair (tenants.fair) and
// fifo (auto alone). Each tenant's offered rate, goodput and p99 are
// measured over the requests sent in [warm, warm + length), and the fair
// row is held to figure.TenantChecks, the simulator's checks.

// tenantsPlan is the figure's timing.
type tenantsPlan struct {
	warm, length time.Duration
	capacity     float64
	rates        []float64
}

func runTenants(ctx context.Context, env *Env) (*figure.Result, error) {
	pl := tenantsPlan{warm: pick(env, 10*time.Second, 3*time.Second), length: pick(env, 20*time.Second, 4*time.Second),
		capacity: float64(adaptiveWorkers) / adaptiveService.Seconds()}
	pl.rates = figure.TenantRates(pl.capacity, 3)
	runs := map[string]*phaseResult{}
	for _, queue := range []string{"fair", "fifo"} {
		res, err := pl.run(ctx, env, queue)
		if err != nil {
			return nil, err
		}
		runs[queue] = res
	}
	var checks []figure.Check
	var key []string
	tab := figure.NewTenantTable()
	return finish(env, func(s *report.Summary) {
		for _, queue := range []string{"fair", "fifo"} {
			c, k, err := figure.TenantChecks(s, tab, queue, pl.capacity, msOf(adaptiveSLO), pl.rows(runs[queue]))
			if err != nil {
				panic(err) // the table's columns are fixed: cannot fail
			}
			checks, key = append(checks, c...), append(key, k...)
		}
		s.Set("capacity_rps", pl.capacity)
		s.Set("slo_ms", msOf(adaptiveSLO))
	}, func(r *figure.Result) error {
		r.AddTable("tenants.csv", tab)
		r.Checks, r.Key = checks, key
		r.Setup = []string{
			fmt.Sprintf("Backend: the queue testbed, %d FIFO workers with exponential service of mean %v (%.0f req/s).", adaptiveWorkers, adaptiveService, pl.capacity),
			fmt.Sprintf("Load: four open-loop Poisson streams, tenant heavy at %.0f req/s and a, b, c at %.1f req/s each (3× the capacity in all), the tenant in %s; clients time out after %v.",
				pl.rates[0], pl.rates[1], sluice.TenantHeader, adaptiveTimeout),
			fmt.Sprintf("Proxy: one auto stage told the SLO %v; fair: tenants.fair (equal weights), fifo: without; classes.trusted_proxies 127.0.0.1/32 so that the tenant header is believed.", adaptiveSLO),
			fmt.Sprintf("Measured: the requests sent in [%v, %v); goodput counts answers within the SLO; a tenant's fair share is the max-min share of the capacity over the offered rates measured.", pl.warm, pl.warm+pl.length),
		}
		return nil
	})
}

// run runs one row: a fresh backend, the proxy with the row's stage, the
// four tenants' loads.
func (pl *tenantsPlan) run(ctx context.Context, env *Env, queue string) (*phaseResult, error) {
	var loads []loadgen.Config
	for i, name := range figure.TenantNames {
		sched, err := dist.NewSchedule(dist.Segment{Rate: pl.rates[i]})
		if err != nil {
			return nil, err
		}
		load, err := openLoad("tenant-"+name, env.Seed+uint64(i)*1000, sched, adaptiveTimeout, pl.warm+pl.length)
		if err != nil {
			return nil, err
		}
		load.MaxConns = adaptiveConns
		load.Classes, load.ClassHeader = []loadgen.Weighted{{Name: name, Weight: 1}}, sluice.TenantHeader
		loads = append(loads, load)
	}
	run := proxied{newBackend: func() (testbed.Backend, error) { return newAdaptiveBackend(env.Seed, adaptiveWorkers, "") },
		maxConcurrency: adaptiveConns, policy: tenantsPolicy(queue == "fair"),
		phase: phase{name: "tenants/" + queue, length: pl.warm + pl.length, loads: loads, grace: 2 * time.Second}}
	return run.run(ctx, env)
}

// tenantsPolicy is one auto stage told the SLO, with fair queueing among
// tenants or without; the tenant header is believed from 127.0.0.1.
func tenantsPolicy(fair bool) policy.Config {
	pol := mainPolicy(autoConfig(adaptiveSLO))
	pol.Classes.TrustedProxies = []string{"127.0.0.1/32"}
	pol.Stages[0].Tenants.Fair = fair
	return pol
}

// rows measures each tenant of a run.
func (pl *tenantsPlan) rows(res *phaseResult) []figure.TenantRow {
	from, to := pl.warm, pl.warm+pl.length
	out := make([]figure.TenantRow, len(figure.TenantNames))
	for i := range figure.TenantNames {
		k := inGroup(uint8(i))
		c := countSent(res.recs, from, to, k)
		good := 0
		var lats []float64
		for j := range res.recs {
			r := &res.recs[j]
			if r.intended < from || r.intended >= to || !k.ok(r) || r.out != outOK {
				continue
			}
			lats = append(lats, msOf(r.lat))
			if r.lat <= adaptiveSLO {
				good++
			}
		}
		out[i] = figure.TenantRow{Offered: pl.rates[i], Measured: float64(c.offered) / pl.length.Seconds(),
			Goodput: float64(good) / pl.length.Seconds(), P99MS: monitor.Percentile(lats, 0.99), RejectFraction: c.rejectFraction()}
	}
	return out
}
