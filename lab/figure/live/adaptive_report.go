// SPDX-License-Identifier: Apache-2.0

package live

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/monitor"
)

// adaptiveMetrics are one run's figures, over the requests sent from the
// phase's event (the crowd's arrival, or the backend's change) to the end.
type adaptiveMetrics struct {
	// goodput is answers within the SLO per second; first the same over
	// the first second after the event.
	goodput, first float64
	// p99First is the admitted p99 (ms) of the requests sent in the first
	// second after the event.
	p99First float64
	// p50 and p99 are over the answers (ms); reject is rejected/offered.
	p50, p99, reject float64
	// settle is the time (s) until the 2-s mean goodput is within 10% of
	// its steady value after the event.
	settle float64
}

// adaptiveBins returns answers within the SLO per second, by the second
// their request was meant to be sent, from 0 to the end of the run.
func adaptiveBins(recs []record, end time.Duration) []float64 {
	n := int((end + time.Second - 1) / time.Second)
	out := make([]float64, n)
	for i := range recs {
		r := &recs[i]
		if r.out != outOK || r.lat > adaptiveSLO {
			continue
		}
		if j := int(r.intended / time.Second); j >= 0 && j < n {
			out[j]++
		}
	}
	return out
}

func (r *adaptiveRun) metrics(pl adaptivePlan) adaptiveMetrics {
	at, end := pl.at(r.phase), pl.length(r.phase)
	recs := r.res.recs
	c := countSent(recs, at, end, nil)
	lat := okLatencies(recs, at, end, nil)
	m := adaptiveMetrics{
		goodput:  ratio(float64(goodWithin(recs, at, end, adaptiveSLO, nil)), (end - at).Seconds()),
		first:    float64(goodWithin(recs, at, at+time.Second, adaptiveSLO, nil)),
		p99First: monitor.Percentile(okLatencies(recs, at, at+time.Second, nil), 0.99),
		p50:      monitor.Percentile(lat, 0.5), p99: monitor.Percentile(lat, 0.99),
		reject: c.rejectFraction(),
	}
	tail := max(2, int(pl.after/time.Second)/2)
	m.settle = report.SettleTime(adaptiveBins(recs, end), int(at/time.Second), 2, tail, 0.1)
	return m
}

// metricName is a summary metric of a row and phase: goodput_rps_auto_a.
func metricName(base, row, phase string) string { return figure.AdaptiveMetric(base, row, phase) }

func adaptiveResult(env *Env, s *adaptiveSetup, runs []*adaptiveRun, versions map[string]string) (*figure.Result, error) {
	pl := s.plan
	sum := newSummary(env)
	res := &figure.Result{Bundle: report.NewBundle(sum)}
	tab := report.NewTable("row", "label", "phase", "goodput_rps", "goodput_first_s", "p50_ms", "p99_ms", "p99_first_s_ms", "reject_fraction", "settle_s", "capacity_after_rps", "service_p99_ms")
	ts := report.NewTable("row", "phase", "time_s", "goodput_rps", "setting")
	for _, r := range runs {
		m := r.metrics(pl)
		if err := tab.Append(r.row.name, r.row.label, r.phase.name, m.goodput, m.first, m.p50, m.p99, m.p99First, m.reject, m.settle, r.capAfter, r.serviceP99); err != nil {
			return nil, err
		}
		for _, kv := range []struct {
			base string
			v    float64
		}{{"goodput_rps", m.goodput}, {"p50_ms", m.p50}, {"p99_ms", m.p99}, {"reject_fraction", m.reject}, {"service_p99_ms", r.serviceP99}} {
			sum.Set(metricName(kv.base, r.row.name, r.phase.name), kv.v)
		}
		if r.phase.name == "a" {
			sum.Set(metricName("goodput_first_s_rps", r.row.name, "a"), m.first)
			sum.Set(metricName("p99_first_s_ms", r.row.name, "a"), m.p99First)
		} else {
			sum.Set(metricName("settle_s", r.row.name, r.phase.name), m.settle)
		}
		bins := adaptiveBins(r.res.recs, pl.length(r.phase))
		for i, g := range bins {
			set := settingAt(r.res.states, time.Duration(i+1)*time.Second, func(st *stateSample) float64 { return st.setting })
			if err := ts.Append(r.row.name, r.phase.name, float64(i), g, set); err != nil {
				return nil, err
			}
		}
	}
	sum.Set("capacity_rps", s.capacity)
	sum.Set("slo_ms", msOf(adaptiveSLO))
	res.AddTable("phases.csv", tab)
	res.AddTable("timeseries.csv", ts)
	for _, ph := range pl.phases {
		res.AddFigure("phase_"+ph.name+".png", adaptiveFigure(runs, pl, ph, s.capacity))
	}
	var phases []figure.AdaptivePhase
	for _, ph := range pl.phases {
		phases = append(phases, figure.AdaptivePhase{Name: ph.name, Title: ph.title})
	}
	res.Checks = figure.AdaptiveChecks(sum, phases, msOf(adaptiveSLO), s.capacity)
	for _, ph := range pl.phases {
		for _, m := range []string{"goodput_rps", "p99_ms"} {
			res.Key = append(res.Key, metricName(m, "auto", ph.name))
		}
	}
	res.Setup = adaptiveSetupText(env, s, versions)
	return res, nil
}

func adaptiveFigure(runs []*adaptiveRun, pl adaptivePlan, ph adaptivePhase, capacity float64) *report.Figure {
	at := pl.at(ph).Seconds()
	good := report.Panel{Title: ph.title, XLabel: "time (s, by intended send time)", YLabel: fmt.Sprintf("answers within %v per s", adaptiveSLO),
		YMin: 0, LegendLeft: true, VLines: []report.RefLine{{Value: at}}, HLines: []report.RefLine{{Value: capacity, Label: "capacity"}}}
	conc := report.Panel{XLabel: "time (s)", YLabel: "concurrency limit", YMin: 0.5, LogY: true, LegendLeft: true, VLines: []report.RefLine{{Value: at}}}
	other := report.Panel{XLabel: "time (s)", YLabel: "seda rate (req/s) · yaksha drop prob. ×1000", YMin: 0.5, LogY: true, LegendLeft: true,
		VLines: []report.RefLine{{Value: at}}}
	for _, r := range runs {
		if r.phase.name != ph.name {
			continue
		}
		if r.capAfter != float64(adaptiveWorkers)/adaptiveService.Seconds() && len(good.HLines) == 1 {
			good.HLines = append(good.HLines, report.RefLine{Value: r.capAfter, Label: "nominal capacity after"})
		}
		bins := adaptiveBins(r.res.recs, pl.length(ph))
		x := make([]float64, len(bins))
		for i := range x {
			x[i] = float64(i) + 0.5
		}
		good.Series = append(good.Series, report.Series{Label: r.row.name, X: x, Y: bins})
		if len(r.res.states) == 0 || r.row.controller == "none" {
			continue
		}
		var sx, sy []float64
		scale := 1.0
		if r.row.controller == "yaksha" {
			scale = 1000
		}
		for _, st := range r.res.states {
			sx, sy = append(sx, st.t.Seconds()), append(sy, st.setting*scale)
		}
		switch r.row.controller {
		case "seda", "yaksha":
			other.Series = append(other.Series, report.Series{Label: r.row.name, X: sx, Y: sy})
		default:
			conc.Series = append(conc.Series, report.Series{Label: r.row.name, X: sx, Y: sy})
		}
	}
	panels := []report.Panel{good, conc}
	if len(other.Series) > 0 {
		panels = append(panels, other)
	}
	return &report.Figure{PanelHeight: 3, Panels: panels}
}

func adaptiveSetupText(env *Env, s *adaptiveSetup, versions map[string]string) []string {
	pl := s.plan
	where := "in this process"
	if env.BackendProcess {
		where = "in a process of its own (sluice-lab testbed queue --control; the changes over HTTP)"
	}
	proxyWhere := "in this process"
	if env.ProxyProcess {
		proxyWhere = "in a process of its own (sluice-lab proxy --config FILE; its stage read from the admin /state)"
	}
	svc, _ := figure.AdaptiveService(cmp.Or(env.Service, "exp"), adaptiveService)
	var rows []string
	for _, r := range pl.rows {
		rows = append(rows, r.name+" ("+r.label+")")
	}
	out := []string{
		fmt.Sprintf("Backend: the queue testbed %s on 127.0.0.1, %d FIFO workers with service %s, of mean %v (nominal %.0f req/s; measured %.0f req/s with %d closed-loop users, directly). A fresh backend per run. (b) at the change every new request costs twice as much; (c) half as much; (d) the backend gets %d workers; (e) two backends of %d workers each, and the second's requests cost 3× from the change.",
			where, adaptiveWorkers, svc, adaptiveService, float64(adaptiveWorkers)/adaptiveService.Seconds(), s.capacity, 8*adaptiveWorkers, 4*adaptiveWorkers, adaptiveWorkers/2),
		fmt.Sprintf("Load: open-loop Poisson arrivals, the same seeded sequence for every row of a phase: %.1f× the measured capacity for %v, then (a) a crowd ramping to %g× within 1 s for %v, or (b–e) %g× for %v before the change and %v after it. Client timeout %v, at most %d connections. Goodput counts answers within the %v SLO per second, by the time the request was meant to be sent; p50/p99 are over answers; windows start at the crowd's arrival or the change.",
			pl.base, pl.warm, pl.crowdX, pl.crowd, pl.overloadX, pl.changeAt, pl.after, adaptiveTimeout, adaptiveConns, adaptiveSLO),
		"Rows: " + strings.Join(rows, "; ") + ".",
		fmt.Sprintf("The sluice rows are the proxy %s with one stage and its controller, least-in-flight balancing over the backends, a pool that never binds by itself (%d connections per server). nginx (%s): one worker, limit_req rate = the measured capacity, burst = %v of it (no nodelay), upstream keepalive, round-robin. HAProxy (%s): one thread, maxconn per server = its workers, timeout queue %v, round-robin; nginx and HAProxy run as child processes with generated configurations.",
			proxyWhere, adaptiveConns, versions["nginx"], adaptivePeerWait, versions["haproxy"], adaptivePeerWait),
		"All processes share this machine's CPUs with the load generator, so numbers are noisy; no time compression.",
	}
	return out
}
