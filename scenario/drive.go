package scenario

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/dist"
	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/stage"
)

// This file holds the machinery the scenarios share: binding a real
// controller to real gates in virtual time, on a period (Kihl, Yaksha) or
// on SEDA's nreq/timeout trigger, and small statistics helpers.

// step is one controller run: the measurements it saw (as a recorder row)
// and the decision it returned.
type step struct {
	Row      sim.Row
	Decision sluice.Decision
	// Extra is a controller-specific state read after the step (the Kihl
	// integrator, the Yaksha gain A), or NaN.
	Extra float64
}

// periodic runs a controller every period h of virtual time: at the end
// of each period the recorder's row becomes the controller's Measurements,
// Update runs at the period's end time, and the decision is applied to the
// gates at once.
type periodic struct {
	e     *sim.Engine
	ctrl  sluice.Controller
	gates *stage.Gates
	rec   *sim.Recorder
	steps []step
	err   error
	// sense, if set, adjusts the measurements before Update (for example
	// to add a sensor the recorder does not have).
	sense func(m *sluice.Measurements)
	// extra, if set, is read after each step into step.Extra.
	extra func() float64
}

// newPeriodic builds the gates for ctrl (one class, the given burst, drop
// draws from the engine's "gate" stream) and starts calling Update every
// ctrl.Period() with rec's rows.
func newPeriodic(e *sim.Engine, ctrl sluice.Controller, rec *sim.Recorder, burst int) (*periodic, error) {
	g, err := stage.NewGates(ctrl.Current(), 1, burst, e.Stream("gate"))
	if err != nil {
		return nil, err
	}
	p := &periodic{e: e, ctrl: ctrl, gates: g, rec: rec}
	if err := rec.Start(ctrl.Period(), p.onRow); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *periodic) onRow(w sim.Row) {
	m := w.Measurements()
	if p.sense != nil {
		p.sense(&m)
	}
	now := p.e.Time()
	d := p.ctrl.Update(now, m)
	if err := p.gates.Apply(now, d); err != nil && p.err == nil {
		p.err = fmt.Errorf("applying decision at %v: %w", p.e.Now(), err)
	}
	x := math.NaN()
	if p.extra != nil {
		x = p.extra()
	}
	p.steps = append(p.steps, step{Row: w, Decision: d, Extra: x})
}

// admitter returns the sim hook that asks the real gates.
func (p *periodic) admitter() sim.Admitter {
	return sim.AdmitFunc(func(now time.Time, r *sim.Request) bool { return p.gates.AdmitAt(now, r.Class) })
}

// triggered runs a sample-triggered controller (SEDA) per class: class c's
// controller runs as soon as nreq of its admitted requests have completed
// since its previous run, or timeout after that run, whichever comes first,
// with the p90 of exactly those samples. The response time of a sample is
// measured from the moment the request entered the stage (passed the gate)
// to its completion.
//
// triggered is itself the stage's entry (a sim.Handler): it asks the real
// gates, feeds the per-class controller recorders and the per-class report
// recorders, and passes admitted requests to next.
type triggered struct {
	e       *sim.Engine
	ctrl    sluice.Controller
	gates   *stage.Gates
	nreq    int
	timeout time.Duration
	classes int // controller classes
	ctlRec  []*sim.Recorder
	timers  []sim.Timer
	next    sim.Handler
	// classOf maps a request to its controller class (nil: r.Class).
	classOf func(r *sim.Request) int
	// report, if set, is indexed by r.Class and sees every request.
	report []*sim.Recorder
	// onDone, if set, sees every admitted request when it finishes, with
	// the time it entered the stage.
	onDone func(r *sim.Request, entered time.Duration)
	steps  []step
	err    error
}

// newTriggered builds the gates for ctrl with the given number of
// controller classes and burst, and arms the timeouts.
func newTriggered(e *sim.Engine, ctrl sluice.Controller, classes, burst int, next sim.Handler) (*triggered, error) {
	g, err := stage.NewGates(ctrl.Current(), classes, burst, e.Stream("gate"))
	if err != nil {
		return nil, err
	}
	t := &triggered{e: e, ctrl: ctrl, gates: g, timeout: ctrl.Period(), classes: classes, next: next}
	if st, ok := ctrl.(sluice.SampleTriggered); ok {
		t.nreq = st.TriggerSamples()
	}
	for range classes {
		rec, err := sim.NewRecorder(e, sim.RecorderConfig{})
		if err != nil {
			return nil, err
		}
		t.ctlRec = append(t.ctlRec, rec)
	}
	t.timers = make([]sim.Timer, classes)
	for c := range classes {
		t.arm(c)
	}
	return t, nil
}

func (t *triggered) arm(c int) {
	t.timers[c].Stop()
	t.timers[c] = t.e.After(t.timeout, func() { t.run(c) })
}

// run flushes class c's samples into one controller step.
func (t *triggered) run(c int) {
	w := t.ctlRec[c].Flush()
	m := w.Measurements()
	m.Class = c
	now := t.e.Time()
	d := t.ctrl.Update(now, m)
	if err := t.gates.Apply(now, d); err != nil && t.err == nil {
		t.err = fmt.Errorf("applying decision at %v: %w", t.e.Now(), err)
	}
	t.steps = append(t.steps, step{Row: w, Decision: d, Extra: math.NaN()})
	t.arm(c)
}

// Handle is the stage entry.
func (t *triggered) Handle(r *sim.Request) {
	c := r.Class
	if t.classOf != nil {
		c = t.classOf(r)
	}
	c = min(max(c, 0), t.classes-1)
	var rep *sim.Recorder
	if r.Class >= 0 && r.Class < len(t.report) {
		rep = t.report[r.Class]
	}
	rec := t.ctlRec[c]
	rec.Offer()
	if rep != nil {
		rep.Offer()
	}
	if !t.gates.AdmitAt(t.e.Time(), c) {
		rec.Reject()
		if rep != nil {
			rep.Reject()
		}
		r.Finish(t.e.Now(), sim.Rejected)
		return
	}
	rec.Admit()
	if rep != nil {
		rep.Admit()
		rep.Track(r)
	}
	entered := t.e.Now()
	r.Defer(func(r *sim.Request) {
		if t.onDone != nil {
			t.onDone(r, entered)
		}
		if r.Outcome != sim.Completed {
			rec.Fail()
			return
		}
		rec.Complete(r.Finished - entered)
		if t.nreq > 0 && rec.Samples() >= t.nreq {
			t.run(c)
		}
	})
	t.next.Handle(r)
}

// samples is a log of completed requests: finish time and response time.
type samples struct {
	at []time.Duration
	rt []float64 // seconds
}

func (s *samples) add(at, rt time.Duration) {
	s.at = append(s.at, at)
	s.rt = append(s.rt, rt.Seconds())
}

// between returns the response times of the requests that finished in
// [from, to).
func (s *samples) between(from, to time.Duration) []float64 {
	var out []float64
	for i, t := range s.at {
		if t >= from && t < to {
			out = append(out, s.rt[i])
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
var serviceKinds = []string{"exp", "det", "lognormal", "pareto"}

// rowTime returns the end of a row in seconds.
func rowTime(w sim.Row) float64 { return w.End.Seconds() }

// meanStd returns the mean and population standard deviation of the
// finite values of xs (NaN, NaN for none).
func meanStd(xs []float64) (mean, std float64) {
	s, n := 0.0, 0
	for _, x := range xs {
		if finite(x) {
			s += x
			n++
		}
	}
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	mean = s / float64(n)
	v := 0.0
	for _, x := range xs {
		if finite(x) {
			v += (x - mean) * (x - mean)
		}
	}
	return mean, math.Sqrt(v / float64(n))
}

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
