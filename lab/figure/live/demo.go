// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
)

// The demo: a TPC-W-like bookstore on SQLite behind the proxy, hit by a
// flash crowd from 0.5× to 10× its capacity, once without control, once
// with auto (sluice's default, told only the target as its SLO), once with
// SEDA and once with Yaksha. It needs nothing beyond Go and finishes in
// about 100 s on two cores.
//
// Why the load is shaped this way: the bookstore at scale 1 answers over
// a thousand pages a second on two cores, and 10× that cannot be offered
// by a load generator and a proxy sharing the same two cores. So the
// bookstore is generated at scale 20 (20,000 items: searches and best
// sellers cost milliseconds) and the proxy gives it one worker
// (max_concurrency 1, like a single-threaded application server), which
// makes its capacity about 200 pages/s — measured before the runs — and
// leaves a CPU for the proxy and the load generator. The users are
// closed-loop TPC-W browsing sessions with a 0.5 s mean think time; a
// rejected user waits 0.5 s and asks again, so that a crowd of N users
// offers about N/0.5 s requests a second whether it is served or not.

// DemoTarget is the demo's service-level target: a page answered within
// it counts as goodput. SEDA holds its p90 there; Yaksha, which controls
// the mean, gets a third of it (for response times with an exponential
// tail the p90 is about 2.3 times the mean).
const DemoTarget = 250 * time.Millisecond

// DemoRuns are the names of the demo's runs, in order.
var DemoRuns = []string{"uncontrolled", "auto", "seda", "yaksha"}

// DemoExperiment returns the demo as an experiment (it is not in the
// registry: `sluice-lab demo` runs it).
func DemoExperiment() Experiment {
	return Experiment{
		Name:        "demo",
		Paper:       "sluice's demo: auto, SEDA (Welsh & Culler) and Yaksha (Kamra, Misra & Nahum) against a flash crowd on a TPC-W-like bookstore",
		Description: "A bookstore on SQLite behind the sluice proxy, hit by a flash crowd from 0.5× to 10× its capacity: no control, auto told only the target, SEDA on the p90, Yaksha on the mean.",
		Run:         runDemo,
	}
}

// demoPolicy is the admission policy of one demo run; capacity (req/s)
// sizes SEDA's initial rate.
func demoPolicy(run string, capacity float64) policy.Config {
	switch run {
	case "auto":
		return mainPolicy(autoConfig(DemoTarget))
	case "seda":
		c := control.DefaultSEDAConfig()
		c.Target, c.Timeout, c.InitialRate, c.AdjI = DemoTarget, 500*time.Millisecond, math.Round(capacity), 20
		return mainPolicy(&c)
	case "yaksha":
		return mainPolicy(selfTuningYaksha(DemoTarget / 3))
	default:
		return nonePolicy()
	}
}

// demoScale is the bookstore's population scale (see the comment at the
// top of this file).
const demoScale = 20

// demoThink is the users' mean think time and their wait after a
// rejection; demoRamp is how long the crowd takes to build up.
const (
	demoThink = 250 * time.Millisecond
	demoRamp  = 4 * time.Second
)

func runDemo(ctx context.Context, env *Env) (*figure.Result, error) {
	env.Phasef("generating the bookstore (SQLite, scale %d, in a temporary directory)", demoScale)
	bcfg := testbed.DefaultBookstoreConfig()
	bcfg.Scale, bcfg.Seed = demoScale, 1
	store, err := testbed.NewBookstore(ctx, bcfg)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	srv, err := serveHTTP(store)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	meta, err := loadgen.FetchMeta(ctx, nil, srv.URL)
	if err != nil {
		return nil, err
	}
	wl, err := loadgen.NewTPCW(meta, "browsing")
	if err != nil {
		return nil, err
	}
	think, err := dist.NewExponential(demoThink.Seconds())
	if err != nil {
		return nil, err
	}
	const retry = demoThink
	const timeout = 10 * time.Second

	// Capacity: 8 users without think time through the proxy (one
	// worker), for 3 s.
	env.Phasef("measuring the capacity (3 s, 8 users without think time, through the proxy)")
	eight, err := dist.ConstantSchedule(8)
	if err != nil {
		return nil, err
	}
	capRes, err := runPhaseThroughProxy(ctx, env, srv.URL, demoPolicy("uncontrolled", 0), phase{name: "capacity", length: 3 * time.Second,
		loads: []loadgen.Config{{Mode: loadgen.ModeClosed, Duration: 3 * time.Second, Seed: env.Seed, Timeout: timeout, Workload: wl,
			Users: eight, Think: dist.Deterministic{}}}})
	if err != nil {
		return nil, err
	}
	capacity := float64(countSent(capRes.recs, 500*time.Millisecond, 3*time.Second, nil).ok) / 2.5
	if capacity < 10 {
		return nil, fmt.Errorf("the bookstore answered only %.1f pages/s while measuring its capacity", capacity)
	}
	env.Phasef("capacity %.0f pages/s", capacity)

	low, high := 0.5, 10.0
	usersFor := func(x float64) float64 { return float64(int(x*capacity*think.Mean() + 0.5)) }
	base, crowd, after := 3*time.Second, 15*time.Second, 3*time.Second
	from, to := base, base+crowd
	length := to + after
	// The crowd builds up over demoRamp in 8 steps, then stays.
	pairs := []float64{0, usersFor(low)}
	for k := 1; k <= 8; k++ {
		pairs = append(pairs, (from + time.Duration(k-1)*demoRamp/8).Seconds(), usersFor(low+(high-low)*float64(k)/8))
	}
	users, err := stepSchedule(append(pairs, to.Seconds(), usersFor(low))...)
	if err != nil {
		return nil, err
	}
	if env.AdminAddr != "" {
		env.Phasef("watch it live: http://%s/ui (the page follows each run's proxy)", env.AdminAddr)
	}
	results := map[string]*phaseResult{}
	for _, run := range DemoRuns {
		res, err := runPhaseThroughProxy(ctx, env, srv.URL, demoPolicy(run, capacity), phase{name: run, length: length, users: users.At,
			grace: time.Second, loads: []loadgen.Config{{Mode: loadgen.ModeClosed, Duration: length, Seed: env.Seed, Timeout: timeout,
				Workload: wl, Users: users, Think: think, RetryWait: retry}}})
		if err != nil {
			return nil, err
		}
		results[run] = res
	}

	s := newSummary(env)
	res := &figure.Result{Bundle: report.NewBundle(s)}
	ts := report.NewTable("run", "time_s", "users", "offered", "ok", "ok_within_target", "rejected", "timeouts", "errors", "mean_rt_ms", "p90_rt_ms")
	p90 := report.Panel{Title: fmt.Sprintf("flash crowd: %.0f → %.0f users (%g× → %g× capacity) at t = %gs", usersFor(low), usersFor(high), low, high, from.Seconds()),
		XLabel: "time (s)", YLabel: "p90 response time (ms)", LogY: true, LegendLeft: true,
		HLines: []report.RefLine{{Value: msOf(DemoTarget), Label: fmt.Sprintf("target %v", DemoTarget)}},
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	good := report.Panel{XLabel: "time (s)", YLabel: fmt.Sprintf("pages within %v (per s)", DemoTarget), LegendLeft: true, YMin: 0,
		HLines: []report.RefLine{{Value: capacity, Label: fmt.Sprintf("capacity %.0f pages/s", capacity)}},
		VLines: []report.RefLine{{Value: from.Seconds()}, {Value: to.Seconds()}}}
	for _, run := range DemoRuns {
		recs := results[run].recs
		bins := binRecords(recs, time.Second, length, DemoTarget, nil)
		for _, b := range bins {
			if err := ts.Append(run, b.t, users.At(time.Duration(b.t*float64(time.Second))), b.offered, b.ok, b.good, b.rejected,
				b.timeouts, b.errors, b.mean, b.p90); err != nil {
				return nil, err
			}
		}
		c := countSent(recs, 0, length, nil)
		lat := okLatencies(recs, 0, length+timeout, nil)
		s.Set("goodput_rps_"+run, float64(goodWithin(recs, 0, length+timeout, DemoTarget, nil))/length.Seconds())
		s.Set("throughput_rps_"+run, float64(len(lat))/length.Seconds())
		s.Set("p90_ms_"+run, monitor.Percentile(lat, 0.9))
		s.Set("mean_rt_ms_"+run, report.Mean(lat))
		s.Set("reject_fraction_"+run, c.rejectFraction())
		s.Set("errors_"+run, float64(c.errors+c.timeouts))
		s.Set("offered_"+run, float64(c.offered))
		crowdLat := okLatencies(recs, from, to, nil)
		s.Set("p90_ms_crowd_"+run, monitor.Percentile(crowdLat, 0.9))
		s.Set("goodput_rps_crowd_"+run, float64(goodWithin(recs, from, to, DemoTarget, nil))/crowd.Seconds())
		x, y := binColumns(bins, func(b *bin) float64 { return b.p90 })
		p90.Series = append(p90.Series, report.Series{Label: run, X: x, Y: y})
		x, g := binColumns(bins, func(b *bin) float64 { return float64(b.good) })
		good.Series = append(good.Series, report.Series{Label: run, X: x, Y: g})
	}
	s.Set("capacity_rps", capacity)
	s.Set("target_ms", msOf(DemoTarget))
	s.Set("users_low", usersFor(low))
	s.Set("users_high", usersFor(high))
	res.AddTable("timeseries.csv", ts)
	res.AddFigure("flash_crowd.png", &report.Figure{PanelHeight: 3.2, Panels: []report.Panel{p90, good}})
	for _, run := range DemoRuns[1:] {
		res.Checks = append(res.Checks,
			figure.Below(s, fmt.Sprintf("%s keeps the p90 below the uncontrolled one", run), "p90_ms_"+run, "p90_ms_uncontrolled", 1),
			figure.AtLeast(s, fmt.Sprintf("%s answers more pages within the %v target than no control", run, DemoTarget),
				"goodput_rps_"+run, s.Metric("goodput_rps_uncontrolled")*1.0000001))
	}
	res.Key = []string{"capacity_rps"}
	for _, m := range []string{"goodput_rps_", "p90_ms_", "reject_fraction_", "errors_"} {
		for _, run := range DemoRuns {
			res.Key = append(res.Key, m+run)
		}
	}
	res.Setup = []string{
		fmt.Sprintf("Backend: the TPC-W-like bookstore on SQLite at scale %d (%d items, %d customers) in a temporary directory, in this process. The proxy gives it one worker (max_concurrency 1; the backlog waits in the proxy's queue), which sets its capacity to the %.0f pages/s measured with 8 users without think time before the runs.",
			demoScale, store.Items(), store.Customers(), capacity),
		fmt.Sprintf("Load: closed-loop TPC-W browsing sessions, exponential think time of mean %v; a rejected user waits %v and asks again; client timeout %v. %.0f users (%g× capacity: N = load × capacity × mean think time) for %v, %.0f users (%g×) for %v, then %.0f again for %v.",
			time.Duration(think.Mean()*float64(time.Second)), retry, timeout, usersFor(low), low, base, usersFor(high), high, crowd, usersFor(low), after),
		fmt.Sprintf("Runs: uncontrolled (controller none, and a pool queue that never times out); auto (slo %v, nothing else: it finds the one worker by itself); seda (p90 target %v, controller timeout 500ms, initial rate %.0f req/s = the measured capacity, as the simulator sizes its stage, and adj_i 20: the paper's 2 adds about 2 req/s per run, made for stages of a few requests per second, and would take minutes to recover from a cut at this 150 pages/s service; other parameters the paper's); yaksha (Tref %v = a third of the target, period 250ms, pole −1/s: a 1 s time constant for a crowd that lasts %v, tune window 2s, λ0 estimated; only the target is given).",
			DemoTarget, DemoTarget, capacity, DemoTarget/3, crowd),
		fmt.Sprintf("The crowd builds up over %v in 8 steps (a flash crowd arrives within seconds, and no feedback controller can see a response time before the first of the crowd's requests are answered).", demoRamp),
		fmt.Sprintf("Goodput counts pages answered (2xx/3xx) within the %v target, per second of the run; p90 is over the OK pages of the whole run; errors are timeouts and failed requests.", DemoTarget),
	}
	return res, nil
}

// runPhaseThroughProxy starts a proxy with policy in front of backendURL
// (one upstream connection), runs the phase through it and stops it.
func runPhaseThroughProxy(ctx context.Context, env *Env, backendURL string, pol policy.Config, ph phase) (*phaseResult, error) {
	px, err := startProxy(ctx, proxyConfig(backendURL, 1, pol, env.AdminAddr))
	if err != nil {
		return nil, err
	}
	ph.target, ph.proxy, ph.stageName = px.URL, px, mainStage
	res, runErr := ph.run(ctx, env)
	if err := errors.Join(runErr, px.Close()); err != nil {
		return nil, err
	}
	return res, nil
}
