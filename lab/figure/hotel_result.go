// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/monitor"
)

// HotelCode is how a user request or a call ended.
type HotelCode uint8

const (
	// HotelOK: answered.
	HotelOK HotelCode = iota
	// HotelRejected: refused for overload somewhere on its path (gRPC
	// RESOURCE_EXHAUSTED), locally by a client side or by a service.
	HotelRejected
	// HotelTimeout: its deadline passed (DEADLINE_EXCEEDED, or the user
	// gave up).
	HotelTimeout
	// HotelFailed: another error.
	HotelFailed
)

// HotelUser is one user request as its user saw it. Times are offsets
// from the start of the load.
type HotelUser struct {
	API, Class int
	// Sent is the intended send time; Done when the answer (or the
	// user's giving up) came.
	Sent, Done time.Duration
	Code       HotelCode
}

// Good reports whether u was answered within d.
func (u HotelUser) Good(d time.Duration) bool { return u.Code == HotelOK && u.Done-u.Sent <= d }

// HotelCall is one call a service took into its worker queue (a call
// refused at admission did no work and has none).
type HotelCall struct {
	Service, Instance, API int
	// User is the index of its user request in HotelRun.Users (−1:
	// unknown).
	User int
	// Arrival is when it entered the worker queue, Start when a worker
	// took it (0: never), Finish when its work was done (0: never).
	Arrival, Start, Finish time.Duration
	// Demand is its work, CPU seconds (live: the CPU time burnt).
	Demand float64
	// Deadline is the call's deadline (its user's).
	Deadline time.Duration
	// Gone says its caller had left when its work was done.
	Gone bool
}

// HotelRun is one row's run of one scenario.
type HotelRun struct {
	Scenario, Row string
	// Params describes the row's parameters (a peer's point).
	Params string
	Users  []HotelUser
	Calls  []HotelCall
}

// hotelSeries are a run's per-second sums (by send time for users, by
// finish time for work).
type hotelSeries struct {
	offered, good, ok, capacity, p99, high, low, heavy, light []float64
	leafWork, leafWasted, work, wasted                        []float64
}

// hotelMetrics are a run's figures.
type hotelMetrics struct {
	phaseGood, phaseOffered, phaseP99 [3]float64
	storm, recStart, recEnd, p99      float64
	late, servedLate                  float64
	wastedLeaf, wasted                float64
	highSuccess, highSLO              float64
	heavyEvent, lightEvent            float64
	capEvent, capBase                 float64
	users, calls                      float64
}

// HotelStormSettle is how long after the event the storm goodput keeps
// counting: the recovery is part of it.
const HotelStormSettle = 10 * time.Second

// hotelRecoveryShare is the share of min(offered, capacity) a second's
// goodput must reach to count as recovered.
const hotelRecoveryShare = 0.95

func (c HotelParams) series(g *HotelGraph, s HotelScenario, streams []HotelStream, run *HotelRun) hotelSeries {
	n := int(math.Ceil(s.Stop.Seconds()))
	mk := func() []float64 { return make([]float64, n) }
	h := hotelSeries{offered: mk(), good: mk(), ok: mk(), capacity: mk(), p99: mk(), high: mk(), low: mk(), heavy: mk(),
		light: mk(), leafWork: mk(), leafWasted: mk(), work: mk(), wasted: mk()}
	lat := make([][]float64, n)
	for _, u := range run.Users {
		i := int(u.Sent / time.Second)
		if i < 0 || i >= n {
			continue
		}
		h.offered[i]++
		if u.Code == HotelOK {
			h.ok[i]++
			lat[i] = append(lat[i], float64(u.Done-u.Sent))
		}
		if !u.Good(c.SLO) {
			continue
		}
		h.good[i]++
		if u.Class == 0 {
			h.high[i]++
			if g.APIs[u.API].Heavy {
				h.heavy[i]++
			} else {
				h.light[i]++
			}
		} else {
			h.low[i]++
		}
	}
	for i := range n {
		h.capacity[i] = c.CapacityAt(g, s, streams, time.Duration(i)*time.Second+time.Second/2)
		h.p99[i] = monitor.Percentile(lat[i], 0.99) / float64(time.Millisecond)
	}
	leaf := make([]bool, len(g.Services))
	for _, l := range g.Leaves() {
		leaf[l] = true
	}
	for _, k := range run.Calls {
		i := int(k.Finish / time.Second)
		if k.Finish <= 0 || i >= n {
			continue
		}
		useless := k.Gone || k.User < 0 || k.User >= len(run.Users) || !run.Users[k.User].Good(c.Deadline)
		h.work[i] += k.Demand
		if useless {
			h.wasted[i] += k.Demand
		}
		if leaf[k.Service] {
			h.leafWork[i] += k.Demand
			if useless {
				h.leafWasted[i] += k.Demand
			}
		}
	}
	return h
}

func (c HotelParams) metrics(g *HotelGraph, s HotelScenario, streams []HotelStream, run *HotelRun, h hotelSeries) hotelMetrics {
	var m hotelMetrics
	sec := func(d time.Duration) int { return int(d / time.Second) }
	bounds := s.Phases()
	mean := func(xs []float64, from, to int) float64 {
		to = min(to, len(xs))
		sum := 0.0
		for i := from; i < to; i++ {
			sum += xs[i]
		}
		return sum / float64(max(to-from, 1))
	}
	var lat [3][]float64
	var all []float64
	for _, u := range run.Users {
		if u.Code != HotelOK {
			continue
		}
		d := float64(u.Done - u.Sent)
		all = append(all, d)
		for p := range 3 {
			if u.Sent >= bounds[p] && u.Sent < bounds[p+1] {
				lat[p] = append(lat[p], d)
			}
		}
	}
	for p := range 3 {
		from, to := sec(bounds[p]), sec(bounds[p+1])
		if p == 0 {
			from = to / 2 // the level before: the warm phase's second half
		}
		m.phaseGood[p] = mean(h.good, from, to)
		m.phaseOffered[p] = mean(h.offered, from, to)
		m.phaseP99[p] = monitor.Percentile(lat[p], 0.99) / float64(time.Millisecond)
	}
	m.p99 = monitor.Percentile(all, 0.99) / float64(time.Millisecond)
	from, to := s.stormWindow()
	m.storm = mean(h.good, from, to)
	m.heavyEvent = mean(h.heavy, sec(s.Start), sec(s.End))
	m.lightEvent = mean(h.light, sec(s.Start), sec(s.End))
	m.capEvent = mean(h.capacity, sec(s.Start), sec(s.End))
	m.capBase = c.Capacity(g)
	// Recovery: the first second of the phase from which every second
	// to the phase's end reaches 95 % of min(offered, capacity).
	recover := func(from, to int) float64 {
		first := to
		for i := to - 1; i >= from; i-- {
			if h.good[i] < hotelRecoveryShare*math.Min(h.offered[i], h.capacity[i]) {
				break
			}
			first = i
		}
		if first == to {
			return math.Inf(1)
		}
		return float64(first - from)
	}
	m.recStart = recover(sec(s.Start), sec(s.End))
	m.recEnd = recover(sec(s.End), sec(s.Stop))
	for _, k := range run.Calls {
		if k.Deadline > 0 && k.Start > k.Deadline {
			m.late++
		}
		if k.Deadline > 0 && k.Finish > k.Deadline {
			m.servedLate++
		}
	}
	m.wastedLeaf = ratio(sum(h.leafWasted), sum(h.leafWork))
	m.wasted = ratio(sum(h.wasted), sum(h.work))
	var hs, hg, hslo float64
	for _, u := range run.Users {
		if u.Class != 0 || u.Sent < s.Start || u.Sent >= s.End {
			continue
		}
		hs++
		if u.Good(c.Deadline) {
			hg++
		}
		if u.Good(c.SLO) {
			hslo++
		}
	}
	m.highSuccess, m.highSLO = ratio(hg, hs), ratio(hslo, hs)
	m.users, m.calls = float64(len(run.Users)), float64(len(run.Calls))
	return m
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// HotelTag turns a scenario or row name into a metric name's part:
// "step-1.4" → "step_1_4".
func HotelTag(name string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(name)
}

// HotelMetric returns a metric's name for a scenario and a row:
// storm_goodput_rps_step_8_sluice.
func HotelMetric(base, scenario, row string) string {
	return base + "_" + HotelTag(scenario) + "_" + HotelTag(row)
}

// HotelResult fills res from the runs, the same way in both drivers:
// the summary's metrics (HotelMetric names), rows.csv, timeseries.csv,
// one plot per scenario, the headline metrics and the checks
// (HotelChecks).
func HotelResult(res *Result, c HotelParams, g *HotelGraph, runs []*HotelRun) error {
	s := res.Summary
	s.Set("capacity_rps", c.Capacity(g))
	s.Set("load_rps", c.Load*c.Capacity(g))
	s.Set("slo_ms", ms(c.SLO))
	s.Set("deadline_ms", ms(c.Deadline))
	s.Set("services", float64(len(g.Services)))
	s.Set("instances", float64(g.Instances()))
	rows := report.NewTable("scenario", "row", "params", "capacity_event_rps", "goodput_before_rps", "goodput_event_rps",
		"goodput_after_rps", "storm_goodput_rps", "recovery_start_s", "recovery_end_s", "p99_ms", "p99_event_ms",
		"late_calls", "served_late_calls", "wasted_leaf_fraction", "wasted_fraction", "high_success_fraction",
		"light_goodput_event_rps", "heavy_goodput_event_rps")
	series := report.NewTable("scenario", "row", "time_s", "offered_rps", "goodput_rps", "ok_rps", "capacity_rps",
		"p99_ms", "high_goodput_rps", "low_goodput_rps", "light_goodput_rps", "heavy_goodput_rps", "leaf_work_s",
		"leaf_wasted_s")
	figs := map[string]*report.Figure{}
	for _, scn := range c.Scenarios {
		sc, streams, err := c.ScenarioStreams(g, scn)
		if err != nil {
			return err
		}
		b, err := c.stormBound(g, sc, streams)
		if err != nil {
			return err
		}
		s.Set(HotelBoundMetric(scn), b)
	}
	for _, run := range runs {
		scn, streams, err := c.ScenarioStreams(g, run.Scenario)
		if err != nil {
			return err
		}
		h := c.series(g, scn, streams, run)
		m := c.metrics(g, scn, streams, run, h)
		set := func(base string, v float64) { s.Set(HotelMetric(base, run.Scenario, run.Row), v) }
		for p, name := range PhaseNames {
			set("goodput_"+name+"_rps", m.phaseGood[p])
			set("offered_"+name+"_rps", m.phaseOffered[p])
			set("p99_"+name+"_ms", m.phaseP99[p])
		}
		set("capacity_event_rps", m.capEvent)
		set("storm_goodput_rps", m.storm)
		set("recovery_start_s", m.recStart)
		set("recovery_end_s", m.recEnd)
		set("p99_ms", m.p99)
		set("late_calls", m.late)
		set("served_late_calls", m.servedLate)
		set("wasted_leaf_fraction", m.wastedLeaf)
		set("wasted_fraction", m.wasted)
		set("light_goodput_event_rps", m.lightEvent)
		set("heavy_goodput_event_rps", m.heavyEvent)
		set("users", m.users)
		set("calls", m.calls)
		if run.Scenario == HotelCrowd {
			set("high_success_fraction", m.highSuccess)
			set("high_slo_fraction", m.highSLO)
		}
		if err := rows.Append(run.Scenario, run.Row, run.Params, m.capEvent, m.phaseGood[0], m.phaseGood[1], m.phaseGood[2],
			m.storm, m.recStart, m.recEnd, m.p99, m.phaseP99[1], m.late, m.servedLate, m.wastedLeaf, m.wasted,
			m.highSuccess, m.lightEvent, m.heavyEvent); err != nil {
			return err
		}
		var xs []float64
		for i := range h.offered {
			if err := series.Append(run.Scenario, run.Row, float64(i), h.offered[i], h.good[i], h.ok[i], h.capacity[i],
				h.p99[i], h.high[i], h.low[i], h.light[i], h.heavy[i], h.leafWork[i], h.leafWasted[i]); err != nil {
				return err
			}
			xs = append(xs, float64(i)+0.5)
		}
		fig := figs[run.Scenario]
		if fig == nil {
			fig = hotelFigure(scn, xs, h.capacity)
			figs[run.Scenario] = fig
		}
		fig.Panels[0].Series = append(fig.Panels[0].Series, report.Series{Label: run.Row, X: xs, Y: h.good})
		fig.Panels[1].Series = append(fig.Panels[1].Series, report.Series{Label: run.Row, X: xs, Y: h.p99})
	}
	res.AddTable("rows.csv", rows)
	res.AddTable("timeseries.csv", series)
	for _, scn := range c.Scenarios {
		if f := figs[scn]; f != nil {
			res.AddFigure("hotel-"+HotelTag(scn)+".png", f)
		}
	}
	res.Checks = HotelChecks(s, c)
	for _, scn := range c.Scenarios {
		for _, row := range c.Rows {
			res.Key = append(res.Key, HotelMetric("storm_goodput_rps", scn, row))
		}
	}
	return nil
}

// hotelFigure returns a scenario's plot, without the rows' series.
func hotelFigure(s HotelScenario, xs, capacity []float64) *report.Figure {
	ev := []report.RefLine{{Value: s.Start.Seconds()}, {Value: s.End.Seconds()}}
	return &report.Figure{PanelHeight: 3, Panels: []report.Panel{
		{Title: fmt.Sprintf("graph-hotel %s: the event from %gs to %gs", s.Name, s.Start.Seconds(), s.End.Seconds()),
			XLabel: "time (s, by send time)", YLabel: "answers within the SLO / s", YMin: 0, VLines: ev,
			Series: []report.Series{{Label: "capacity", X: xs, Y: slices.Clone(capacity)}}},
		{XLabel: "time (s, by send time)", YLabel: "p99 of the answers (ms)", YMin: 0, VLines: ev},
	}}
}

// HotelBoundMetric returns the name of scenario scn's storm goodput
// bound (the mean of GoodputBoundAt over the storm goodput's window,
// requests/s): storm_goodput_bound_rps_step_3.
func HotelBoundMetric(scn string) string { return "storm_goodput_bound_rps_" + HotelTag(scn) }

// HotelBestPeer returns the peer row with the highest storm goodput in
// scenario scn among those in s, and its value (NaN and "" if none).
func HotelBestPeer(s *report.Summary, scn string) (string, float64) {
	best, bv := "", math.NaN()
	for _, p := range HotelPeers {
		v, ok := s.Get(HotelMetric("storm_goodput_rps", scn, p))
		if ok && !math.IsNaN(v) && (best == "" || v > bv) {
			best, bv = p, v
		}
	}
	return best, bv
}

// HotelChecks are graph-hotel's goals for sluice's row, checked on
// either driver's summary for the scenarios and rows it has: in every
// scenario, goodput within the SLO over the event and the 10 s after it
// ≥ 1.2× the best tuned peer's (moonshot 1.5×), the admitted p99 within
// the SLO, recovery within 1 s of the event's start and of its end, no
// call begun after its deadline at any service; in the crowd, the high
// class ≥ 99.9 % answered within its deadline.
func HotelChecks(s *report.Summary, c HotelParams) []Check {
	var cs []Check
	row := HotelSluice
	for _, scn := range c.Scenarios {
		if _, ok := s.Get(HotelMetric("users", scn, row)); !ok {
			continue
		}
		metric := func(base string) string { return HotelMetric(base, scn, row) }
		if best, bv := HotelBestPeer(s, scn); best != "" {
			bound := ""
			if b, ok := s.Get(HotelBoundMetric(scn)); ok {
				bound = fmt.Sprintf("; no controller can serve more than %s req/s here", Num(b))
			}
			cs = append(cs,
				AtLeast(s, fmt.Sprintf("%s: sluice's goodput within the SLO over the event and the 10 s after ≥ 1.2× the best tuned peer's (%s, %s req/s%s)", scn, best, Num(bv), bound),
					metric("storm_goodput_rps"), 1.2*bv),
				AtLeast(s, fmt.Sprintf("%s (moonshot): … ≥ 1.5× the best tuned peer's", scn), metric("storm_goodput_rps"), 1.5*bv))
		}
		cs = append(cs,
			AtMost(s, fmt.Sprintf("%s: sluice's admitted p99 ≤ the SLO (%v)", scn, c.SLO), metric("p99_ms"), ms(c.SLO)),
			AtMost(s, fmt.Sprintf("%s: recovery ≤ 1 s after the event starts (goodput ≥ 95 %% of min(offered, capacity) from then on)", scn), metric("recovery_start_s"), 1),
			AtMost(s, fmt.Sprintf("%s: recovery ≤ 1 s after the event ends", scn), metric("recovery_end_s"), 1),
			AtMost(s, fmt.Sprintf("%s: no call begun after its deadline at any service", scn), metric("late_calls"), 0))
		if scn == HotelCrowd {
			cs = append(cs, AtLeast(s, fmt.Sprintf("%s: the high class ≥ 99.9 %% answered within its deadline through the %g× crowd", scn, c.CrowdX),
				metric("high_success_fraction"), 0.999))
		}
	}
	return cs
}
