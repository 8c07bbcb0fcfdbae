// SPDX-License-Identifier: Apache-2.0

package live

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
)

// renderPeers writes the analysis into res: the comparison, time series
// and controller tables, the plots, the field notes' expectations checked
// on this run, the headline metrics and the setup.
func renderPeers(res *figure.Result, ps *peersSetup, an *peersAnalysis) error {
	s, tl := res.Summary, ps.tl
	cmp := report.NewTable("system", "label", "window", "from_s", "to_s", "offered_rps", "throughput_rps", "goodput_rps",
		"reject_fraction", "timeouts", "errors", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "p90_admitted_ms")
	for _, r := range an.windows {
		st := r.w
		if err := cmp.Append(r.sys.name, r.sys.label, r.name, r.from.Seconds(), r.to.Seconds(), st.offeredRate(), st.throughput(), st.goodput(),
			st.rejectFraction(), st.timeouts, st.err, st.p50, st.p90, st.p99, st.mean, st.p90Admitted); err != nil {
			return err
		}
	}
	ts := report.NewTable("system", "time_s", "offered_rps", "ok_rps", "goodput_rps", "rejected_rps", "failed_rps", "p90_ms", "p90_admitted_ms")
	ctl := report.NewTable("system", "time_s", "setting")
	per := an.width.Seconds()
	vlines := []report.RefLine{{Value: tl.from.Seconds()}, {Value: tl.half.Seconds()}}
	p90 := report.Panel{Title: fmt.Sprintf("open-loop crowd at %g× capacity from t = %gs; the backend's capacity halves at t = %gs", peersCrowd, tl.from.Seconds(), tl.half.Seconds()),
		XLabel: "time (s)", YLabel: "p90 of admitted requests (ms)", LogY: true, LegendLeft: true,
		HLines: []report.RefLine{{Value: msOf(peersTarget), Label: fmt.Sprintf("target %v", peersTarget)}}, VLines: vlines}
	good := report.Panel{XLabel: "time (s)", YLabel: fmt.Sprintf("answers within %v (per s)", peersTarget), YMin: 0, LegendLeft: true,
		HLines: []report.RefLine{{Value: ps.capacity, Label: fmt.Sprintf("capacity %.0f req/s", ps.capacity)},
			{Value: ps.capAfter, Label: fmt.Sprintf("halved %.0f req/s", ps.capAfter)}}, VLines: vlines}
	rej := report.Panel{XLabel: "time (s)", YLabel: "fraction rejected", YMin: 0, YMax: 1.05, LegendLeft: true, VLines: vlines}
	rate := report.Panel{Title: "sluice SEDA: admission rate", XLabel: "time (s)", YLabel: "token rate (req/s)", LogY: true, LegendLeft: true, VLines: vlines,
		HLines: []report.RefLine{{Value: ps.capacity, Label: "capacity"}, {Value: ps.capAfter, Label: "halved"}}}
	drop := report.Panel{Title: "sluice Yaksha: drop probability", XLabel: "time (s)", YLabel: "drop probability", YMin: 0, YMax: 1, LegendLeft: true, VLines: vlines}
	for _, sys := range an.systems {
		var x, yp, yg, yr []float64
		for _, b := range an.bins[sys.name] {
			if err := ts.Append(sys.name, b.t, float64(b.offered)/per, float64(b.ok)/per, float64(b.good)/per, float64(b.rejected)/per,
				float64(b.fails)/per, b.p90, b.p90Admitted); err != nil {
				return err
			}
			x = append(x, b.t)
			yp = append(yp, b.p90Admitted)
			yg = append(yg, float64(b.good)/per)
			yr = append(yr, ratio(float64(b.rejected), float64(b.ok+b.rejected+b.fails)))
		}
		p90.Series = append(p90.Series, report.Series{Label: sys.name, X: x, Y: yp})
		good.Series = append(good.Series, report.Series{Label: sys.name, X: x, Y: yg})
		rej.Series = append(rej.Series, report.Series{Label: sys.name, X: x, Y: yr})
		if sys.name == "seda" || sys.name == "yaksha" {
			var sx, sy []float64
			for _, st := range sys.res.states {
				sx, sy = append(sx, st.t.Seconds()), append(sy, st.setting)
				if err := ctl.Append(sys.name, st.t.Seconds(), st.setting); err != nil {
					return err
				}
			}
			if sys.name == "seda" {
				rate.Series = append(rate.Series, report.Series{Label: "seda rate", X: sx, Y: sy})
			} else {
				drop.Series = append(drop.Series, report.Series{Label: "yaksha drop probability", X: sx, Y: sy})
			}
		}
	}
	res.AddTable("comparison.csv", cmp)
	res.AddTable("timeseries.csv", ts)
	res.AddTable("controller.csv", ctl)
	res.AddFigure("peers.png", &report.Figure{PanelHeight: 3.2, Panels: []report.Panel{p90, good, rej}})
	res.AddFigure("controllers.png", &report.Figure{PanelHeight: 2.6, Panels: []report.Panel{rate, drop}})
	res.Checks = peersChecks(s, ps)
	res.Key = []string{"capacity_rps", "capacity_after_rps", "goodput_rps_before_best_static", "goodput_rps_before_best_sluice",
		"goodput_rps_after_best_static", "goodput_rps_after_best_sluice"}
	for _, m := range []string{"goodput_rps_before_", "goodput_rps_after_", "p90_ms_after_", "p90_admitted_ms_after_", "reject_fraction_after_", "errors_after_"} {
		for _, sys := range an.systems {
			res.Key = append(res.Key, m+sys.name)
		}
	}
	res.Setup = peersSetupText(ps)
	return nil
}

// peersChecks are the field notes' expectations, and what the peers'
// designs predict, checked on the run's summary.
func peersChecks(s *report.Summary, ps *peersSetup) []figure.Check {
	tl := ps.tl
	T := msOf(peersTarget)
	after := fmt.Sprintf("after the capacity halves (requests sent %gs–%gs)", (tl.half + tl.settle).Seconds(), tl.length.Seconds())
	before := fmt.Sprintf("at %g× capacity before it halves (requests sent %gs–%gs)", peersCrowd, (tl.from + tl.settle).Seconds(), tl.half.Seconds())
	checks := []figure.Check{
		figure.AtLeast(s, "Field notes: sluice seda's goodput (answers within the target) "+before+" is at least the best static peer's", "goodput_rps_before_seda", s.Metric("goodput_rps_before_best_static")),
		figure.AtLeast(s, "Field notes: sluice yaksha's goodput "+before+" is at least the best static peer's", "goodput_rps_before_yaksha", s.Metric("goodput_rps_before_best_static")),
		figure.Below(s, "Field notes: sluice seda's goodput "+after+" is higher than the best static peer's", "goodput_rps_after_best_static", "goodput_rps_after_seda", 1),
		figure.Below(s, "Field notes: sluice yaksha's goodput "+after+" is higher than the best static peer's", "goodput_rps_after_best_static", "goodput_rps_after_yaksha", 1),
		figure.AtMost(s, "sluice seda holds its p90 near the target "+after+": ≤ 1.5 × target", "p90_ms_after_seda", 1.5*T),
		figure.AtMost(s, "sluice yaksha keeps the p90 near the target "+after+": ≤ 1.5 × target", "p90_ms_after_yaksha", 1.5*T),
		figure.AtMost(s, "sluice yaksha holds its mean near Tref = target/3 "+after+": ≤ 1.5 × Tref", "mean_rt_ms_after_yaksha", 1.5*T/3),
		figure.AtLeast(s, "sluice seda follows the halved capacity: goodput "+after+" ≥ 70% of the halved capacity", "goodput_rps_after_seda", 0.7*ps.capAfter),
		figure.AtLeast(s, "sluice yaksha follows the halved capacity: goodput "+after+" ≥ 70% of the halved capacity", "goodput_rps_after_yaksha", 0.7*ps.capAfter),
		figure.Below(s, "Before the capacity halves, nginx limit_req beats no control on the p90 of admitted requests", "p90_admitted_ms_before_nginx", "p90_admitted_ms_before_uncontrolled", 1),
		figure.AtLeast(s, "nginx limit_req, static at the first capacity, misses the target "+after+": p90 of admitted requests ≥ target", "p90_admitted_ms_after_nginx", T),
		figure.AtMost(s, "nginx limit_req's goodput collapses "+after+": < 50% of the halved capacity", "goodput_rps_after_nginx", 0.5*ps.capAfter),
		figure.AtLeast(s, "HAProxy's maxconn follows the halved capacity: goodput "+after+" ≥ 70% of the halved capacity", "goodput_rps_after_haproxy", 0.7*ps.capAfter),
		figure.Below(s, "sluice yaksha answers faster than HAProxy's standing queue "+after+": lower median", "p50_ms_after_yaksha", "p50_ms_after_haproxy", 1),
	}
	for _, sys := range []string{"haproxy", "seda", "yaksha"} {
		// At least 10% lower: both p90s can sit at the client timeout,
		// where a strict "<" would pass on a fraction of a millisecond.
		checks = append(checks, figure.Below(s, sys+" beats no control on the p90 of admitted requests over the whole crowd (by at least 10%)",
			"p90_admitted_ms_"+sys, "p90_admitted_ms_uncontrolled", 0.9))
	}
	for _, sys := range []string{"nginx", "haproxy", "seda", "yaksha"} {
		checks = append(checks, figure.AtLeast(s, sys+" answers more requests within the target than no control over the whole crowd",
			"goodput_rps_"+sys, s.Metric("goodput_rps_uncontrolled")*1.0000001+1e-9))
	}
	return checks
}

// peersSetupText describes the run for the report's Setup section.
func peersSetupText(ps *peersSetup) []string {
	tl := ps.tl
	return []string{
		fmt.Sprintf("Backend: the queue testbed in this process on 127.0.0.1, %d FIFO workers with exponential service of mean %v (nominal %.0f req/s); at t = %gs of each run the mean service time doubles to %v (the testbed's demand is 2×%v scaled by its quality header, 0.5 before and 1 after, set behind every proxy). Capacity measured before the runs with %d closed-loop users without think time, directly: %.0f req/s, and %.0f req/s with the service time doubled.",
			peersWorkers, peersService, peersWorkers/peersService.Seconds(), tl.half.Seconds(), 2*peersService, peersService, 8*peersWorkers, ps.capacity, ps.capAfter),
		fmt.Sprintf("Load: open-loop Poisson arrivals, the same seeded sequence for every system: %.0f req/s (0.6× capacity) until t = %gs, then %.0f req/s (%g× capacity, %g× the halved capacity) until t = %gs; client timeout %v, at most %d connections.",
			0.6*ps.capacity, tl.from.Seconds(), peersCrowd*ps.capacity, peersCrowd, 2*peersCrowd, tl.length.Seconds(), peersTimeout, peersClientConns),
		fmt.Sprintf("uncontrolled: the sluice proxy with controller none (pool of %d connections, which never binds). nginx (%s): one worker, limit_req rate=%dr/s (the measured capacity) burst=%d (%v of it: a request waits at most %v) without nodelay, status 503, upstream keepalive. HAProxy (%s): one thread, server maxconn %d (the backend's workers) and timeout queue %v (503 after it).",
			peersProxyConns, ps.nginxVersion, ps.nginxRate, ps.burst, peersPeerWait, peersPeerWait, ps.haproxyVersion, peersWorkers, peersPeerWait),
		fmt.Sprintf("sluice seda: p90 target %v, a run every 250ms or 100 samples, adj_i %g (2%% of the capacity), initial rate %.0f req/s (the measured capacity, as nginx is told), other parameters the paper's; Yaksha is told nothing about the capacity (its drop probability starts at 0). sluice yaksha: self-tuning, Tref %v (a third of the target), period 250ms, pole −1/s, tune window 2s. nginx and HAProxy run as child processes in the foreground with generated configurations in a temporary directory, on free loopback ports, and are stopped after their run.",
			peersTarget, math.Max(1, math.Round(0.02*ps.capacity)), ps.capacity, (peersTarget / 3).Round(100*time.Microsecond)),
		fmt.Sprintf("Windows by send time: crowd %gs–%gs, before %gs–%gs, after %gs–%gs (%v after each change left out). Goodput counts OK answers within the %v target per second; p90 is over OK answers; p90_admitted is over every request not rejected, a timeout counted at the %v client timeout; errors are timeouts and failed requests.",
			tl.from.Seconds(), tl.length.Seconds(), (tl.from + tl.settle).Seconds(), tl.half.Seconds(), (tl.half + tl.settle).Seconds(), tl.length.Seconds(),
			tl.settle, peersTarget, peersTimeout),
		"All processes share this machine's CPUs with the load generator (and with any other run on it at the same time), so numbers are noisy; no time compression.",
	}
}
