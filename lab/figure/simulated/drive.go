// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/settle"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/stage"
)

// This file holds what the scenarios share: driving a real stage.Stage (the
// proxy's own controller, gates, monitors, trigger and censoring) in
// virtual time through sim.Stage, and the proxy's connection policer
// (policer.Policer) through sim.Policer, and keeping their steps; a log of
// the requests the sources sent, and small statistics helpers.

// step is one controller step: its decision, whose Inputs are the
// measurements the controller saw over [start, end), and Extra, a
// controller-specific state read after the step (the Kihl integrator, the
// Yaksha gain A) or NaN.
type step struct {
	Decision sluice.Decision
	Extra    float64
}

// end returns the virtual time of the step (the end of its interval).
func (s step) end() time.Duration { return s.Decision.At.Sub(sim.DefaultBase) }

// start returns the start of the interval the step measured.
func (s step) start() time.Duration { return s.end() - s.Decision.Inputs.Elapsed }

// in returns the measurements the step saw.
func (s step) in() sluice.Measurements { return s.Decision.Inputs }

// stepPoints turns steps into a series for package settle: each step's
// interval, and the value and weight f reads from its measurements.
func stepPoints(steps []step, f func(m sluice.Measurements) (value, weight float64)) []settle.Point {
	ps := make([]settle.Point, len(steps))
	for i, st := range steps {
		v, w := f(st.in())
		ps[i] = settle.Point{Start: st.start(), End: st.end(), Value: v, Weight: w}
	}
	return ps
}

// meanRT reads the mean response time (s) weighted by its samples.
func meanRT(m sluice.Measurements) (float64, float64) { return m.MeanRT, m.Samples }

// staged is a stage.Stage in virtual time: sim.Stage drives it exactly as
// the proxy's runner drives a live stage, and every decision is kept.
type staged struct {
	st    *stage.Stage
	entry *sim.Stage
	steps []step
	// extra, if set, is read after each step into step.Extra.
	extra func(c sluice.Controller) float64
}

// newStaged builds the stage of opts at the engine's current time (its
// dropper draws from the engine's "gate" stream unless opts.Rand is set)
// and its entry handler, which passes admitted requests to next. classOf
// maps a request to the stage's class (nil: Request.Class).
func newStaged(e *sim.Engine, opts stage.Options, next sim.Handler, classOf func(r *sim.Request) int) (*staged, error) {
	if opts.Rand == nil {
		opts.Rand = e.Stream("gate")
	}
	st, err := stage.New(opts, e.Time())
	if err != nil {
		return nil, err
	}
	entry, err := sim.NewStage(e, st, next, classOf)
	if err != nil {
		return nil, err
	}
	s := &staged{st: st, entry: entry}
	entry.OnStep = func(_ time.Duration, ds []sluice.Decision) {
		x := math.NaN()
		if s.extra != nil {
			x = s.extra(st.Controller().Unwrap())
		}
		for _, d := range ds {
			s.steps = append(s.steps, step{Decision: d, Extra: x})
		}
	}
	return s, nil
}

// initial returns the setting in force before the first step.
func (s *staged) initial() float64 {
	if len(s.steps) > 0 {
		return s.steps[0].Decision.Old
	}
	return s.st.Controller().Current().New
}

// trace returns s's steps and its setting before the first; false for a
// nil s (a run without that stage).
func (s *staged) trace() (steps []step, initial float64, ok bool) {
	if s == nil {
		return nil, 0, false
	}
	return s.steps, s.initial(), true
}

// stepTrace is a controller driven in virtual time whose steps were kept:
// a stage (staged) or the connection policer (policing). A nil one has
// none.
type stepTrace interface {
	trace() (steps []step, initial float64, ok bool)
}

// policing is the proxy's connection policer in virtual time: a
// policer.Policer with its controller, the queue it steers and its CPU
// guard, driven by sim.Policer exactly as the proxy's runner drives it
// live, and every decision kept.
type policing struct {
	ctrl  sluice.Controller
	entry *sim.Policer
	steps []step
}

// newPolicing builds the policer of cfg at the engine's current time, with
// the controller of ctrl on the given queue and CPU guard, and its entry
// handler, which passes admitted requests to next.
func newPolicing(e *sim.Engine, cfg policer.Config, ctrl control.VoigtQueueConfig, guard policer.UtilizationSource,
	queue func() float64, next sim.Handler) (*policing, error) {
	p, err := policer.New(cfg, e.Time())
	if err != nil {
		return nil, err
	}
	c, err := control.NewVoigtQueue(ctrl)
	if err != nil {
		return nil, err
	}
	if err := p.SetControl(policer.Control{Controller: c, Queue: queue, Utilization: guard}); err != nil {
		return nil, err
	}
	entry, err := sim.NewPolicer(e, p, next)
	if err != nil {
		return nil, err
	}
	pp := &policing{ctrl: c, entry: entry}
	entry.OnStep = func(_ time.Duration, ds []sluice.Decision) {
		for _, d := range ds {
			pp.steps = append(pp.steps, step{Decision: d, Extra: math.NaN()})
		}
	}
	return pp, nil
}

// trace returns p's steps and its rate before the first; false for a nil
// p (a run without the policer).
func (p *policing) trace() (steps []step, initial float64, ok bool) {
	if p == nil {
		return nil, 0, false
	}
	if len(p.steps) > 0 {
		return p.steps, p.steps[0].Decision.Old, true
	}
	return nil, p.ctrl.Current().New, true
}

// gauges reads a station's utilization and a queue gauge every second of
// virtual time for the report: the busy fraction of the second and the
// mean of the queue's readings in it (one at its end, or queueSamples
// spread over it).
type gauges struct {
	busy  *sim.Busy
	queue *sim.Sampler
	rows  []gaugeRow
}

// at returns the gauges of second i (NaN when it was not read).
func (g *gauges) at(i int) gaugeRow {
	if i < 0 || i >= len(g.rows) {
		return gaugeRow{util: math.NaN(), queue: math.NaN()}
	}
	return g.rows[i]
}

// gaugeRow is one second of gauges.
type gaugeRow struct {
	start, end  time.Duration
	util, queue float64
}

func newGauges(e *sim.Engine, busy func() float64, queue func() float64, queueSamples int) (*gauges, error) {
	b, err := sim.NewBusy(e, busy, "station")
	if err != nil {
		return nil, err
	}
	g := &gauges{busy: b}
	if g.queue, err = sim.NewSampler(e, time.Second/time.Duration(max(queueSamples, 1)), queue); err != nil {
		return nil, err
	}
	if _, err := e.Every(time.Second, func() {
		u, _ := g.busy.Utilization(e.Time())
		now := e.Now()
		g.rows = append(g.rows, gaugeRow{start: now - time.Second, end: now, util: u, queue: g.queue.Mean()})
	}); err != nil {
		return nil, err
	}
	return g, nil
}

// reqLog records every finished request of a run as its client saw it.
type reqLog struct{ recs []reqRec }

// reqRec is one finished request.
type reqRec struct {
	class, typ int
	sent, done time.Duration
	out        sim.Outcome
}

// rt returns the response time in seconds.
func (q reqRec) rt() float64 { return (q.done - q.sent).Seconds() }

// add is a source's OnFinish.
func (l *reqLog) add(r *sim.Request) {
	l.recs = append(l.recs, reqRec{class: r.Class, typ: r.Type, sent: r.Sent, done: r.Finished, out: r.Outcome})
}

// second is one second of a request log, for one class: requests offered
// and rejected by the second they were sent in (the stage decides at once),
// completed ones and their response times by the second they finished in.
type second struct {
	start, end                             time.Duration
	offered, admitted, rejected, completed int
	meanRT, p90RT                          float64 // seconds, NaN when none completed
}

// seconds bins the log's requests of class (any class when < 0) into the
// seconds of [0, until).
func (l *reqLog) seconds(class int, until time.Duration) []second {
	n := int((until + time.Second - 1) / time.Second)
	out := make([]second, n)
	rts := make([][]float64, n)
	for i := range out {
		out[i].start, out[i].end = time.Duration(i)*time.Second, time.Duration(i+1)*time.Second
	}
	for _, q := range l.recs {
		if class >= 0 && q.class != class {
			continue
		}
		if i := int(q.sent / time.Second); i < n {
			out[i].offered++
			if q.out == sim.Rejected {
				out[i].rejected++
			} else {
				out[i].admitted++
			}
		}
		if i := int(q.done / time.Second); i < n && q.out == sim.Completed {
			out[i].completed++
			rts[i] = append(rts[i], q.rt())
		}
	}
	for i := range out {
		out[i].meanRT = report.Mean(rts[i])
		out[i].p90RT = monitor.Percentile(rts[i], 0.9)
	}
	return out
}

// completed returns the response times (s) of the completed requests of
// class (any when < 0) that finished in [from, to).
func (l *reqLog) completed(class int, from, to time.Duration) []float64 {
	var out []float64
	for _, q := range l.recs {
		if q.out == sim.Completed && q.done >= from && q.done < to && (class < 0 || q.class == class) {
			out = append(out, q.rt())
		}
	}
	return out
}

// serviceDist returns the service-time distribution of the given kind and
// mean (seconds): exp (exponential), det (constant), lognormal (σ = 1 of
// the underlying normal) or pareto (bounded Pareto with shape 1.5 on
// [min, 1000·min], min chosen to give the mean).
func serviceDist(kind string, mean float64) (dist.Dist, error) {
	switch kind {
	case "exp":
		return dist.NewExponential(mean)
	case "det":
		return dist.NewDeterministic(mean)
	case "lognormal":
		return dist.NewLogNormal(mean, 1)
	case "pareto":
		// Bounded Pareto with α = 1.5 on [min, 1000·min], min chosen so
		// that the mean is the requested one.
		unit, err := dist.NewBoundedPareto(1, 1000, 1.5)
		if err != nil {
			return nil, err
		}
		lo := mean / unit.Mean()
		return dist.NewBoundedPareto(lo, 1000*lo, 1.5)
	}
	return nil, fmt.Errorf("unknown service distribution %q", kind)
}

// serviceKinds are the choices of serviceDist.
var serviceKinds = figure.ServiceKinds

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// ratio returns a/b, or NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// ms converts seconds to milliseconds.
func ms(s float64) float64 { return s * 1e3 }

func nan() float64 { return math.NaN() }

// countAtMost counts the values ≤ limit.
func countAtMost(xs []float64, limit float64) int {
	n := 0
	for _, x := range xs {
		if x <= limit {
			n++
		}
	}
	return n
}
