// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/mathx"
	"github.com/sluicehq/sluice/monitor"
)

// Defaults of Options.
const (
	DefaultWindow       = 4096
	DefaultHistory      = 100
	DefaultMaxQueue     = 1024
	DefaultQueueTimeout = time.Second
	// MaxPoll bounds how often a sample-triggered controller (SEDA) is
	// checked for nreq response-time samples by Run.
	MaxPoll = 10 * time.Millisecond
	// DefaultController names the controller of a stage given none: auto,
	// with its default parameters (auto.DefaultConfig). A policy
	// stage without a controller and the proxy's quick start run the same.
	DefaultController = "auto"
)

// Options configure a Stage. The zero value of every field has a
// documented default.
type Options struct {
	// Name labels the stage in errors, metrics and the admin API.
	Name string
	// Controller is the decoded controller configuration; nil means
	// DefaultController with its default parameters (auto and its default
	// SLO, as a policy stage without a controller). A field left at zero
	// where zero is not a valid setting means its default
	// (control.WithDefaults).
	Controller control.Config
	// ClassNames names the request classes in priority order (index 0 is
	// the highest). Empty means one class named "default".
	ClassNames []string
	// Burst is the token-bucket size (default DefaultBurst = 5).
	Burst int
	// Window is the number of response-time samples kept per period and
	// class (default 4096; must be ≥ a SEDA controller's nreq).
	Window int
	// History is the number of decisions kept for the admin API (default
	// 100).
	History int
	// Shadow makes the stage decide and record as usual but admit every
	// request (for a safe rollout); would-be rejections are counted.
	Shadow bool
	// Rand drives a dropper; nil uses the concurrency-safe global source.
	Rand *rand.Rand
	// Utilization, when set, fills Measurements.Utilization every step.
	Utilization monitor.UtilizationSource
	// Queue, when set, fills Measurements.Queue every step.
	Queue func() float64
	// MaxQueue and QueueTimeout size the wait queue of a concurrency
	// limit: defaults 1024 and 1s. A concurrency controller's decisions
	// may shorten the wait (Decision.MaxWait, Decision.Drain).
	MaxQueue     int
	QueueTimeout time.Duration
	// Priority is how a stage with several classes sheds the lowest first
	// (see Priority); the zero value takes the controller's default, with
	// a reserve of DefaultPriorityReserve.
	Priority Priority
	// Tenants turns on weighted fair queueing among tenants within each
	// class of a concurrency stage's wait queue (see Tenants); the zero
	// value serves each class FIFO.
	Tenants Tenants
	// Hog is the rule by which the stage cancels requests in service
	// (see Hog); the zero value cancels none.
	Hog Hog
}

// classState is the live state of one class.
type classState struct {
	name string
	rec  *monitor.Recorder
	// totals accumulated at each collection (counters for metrics).
	offered, admitted, rejected, completed atomic.Uint64
	errors, shadowRejected                 atomic.Uint64
	last                                   atomic.Pointer[Period]
	// deadline counts, as they happen, the rejections of requests whose
	// deadline passed or would pass before service (also in rejected).
	deadline atomic.Uint64
	// fairEvicted counts, as they happen, the waiters evicted under fair
	// queueing by a tenant behind them in virtual time (also in rejected).
	fairEvicted atomic.Uint64
}

// Period is what a class measured over its last collected interval.
type Period struct {
	End          time.Time     `json:"end"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	Offered      float64       `json:"offered"`
	Admitted     float64       `json:"admitted"`
	Rejected     float64       `json:"rejected"`
	Completed    float64       `json:"completed"`
	Samples      int           `json:"samples"`
	MeanMS       float64       `json:"mean_ms"`
	P50MS        float64       `json:"p50_ms"`
	P90MS        float64       `json:"p90_ms"`
	P99MS        float64       `json:"p99_ms"`
	Utilization  *float64      `json:"utilization,omitempty"`
	Queue        float64       `json:"queue"`
	SensorError  string        `json:"sensor_error,omitempty"`
	ThroughputPS float64       `json:"throughput_rps"`
}

// Stage is a live admission stage: requests enter through Enter (or
// Admit) and leave through Ticket.Done; a runner (Run, or a caller of Step)
// feeds the controller with the measurements of each interval and puts its
// decisions into force. All methods are safe for concurrent use.
type Stage struct {
	name        string
	ctrl        *control.Logged
	gates       *Gates
	conc        *concGate // the concurrency limit and wait queue, or nil
	hog         *hogWatch // the hog rule and the requests it watches, or nil
	classes     []*classState
	classNames  []string
	agg         *monitor.Recorder // the controller's input when it is not class-aware
	classAware  bool
	trigger     atomic.Int64 // SEDA's nreq (re-read after every step)
	period      time.Duration
	shadow      bool
	util        monitor.UtilizationSource
	queue       func() float64
	errReject   error
	errTimeout  error // a wait that ended without a slot
	errDeadline error // a request whose deadline passes before service
	// shedMix: the gates split a drop probability by the class mix
	// (Priority), so Step hands them each class's arrivals.
	shedMix bool

	waitPool sync.Pool    // of *liveWait
	mkWait   func() *Wait // s.getWait, bound once

	// censorAt is the elapsed time from which a failed request counts as
	// a (censored) sample: the controller's target, or never.
	censorAt atomic.Int64

	// What concurrency controllers steer by: requests in service, their
	// service times (of the current sample epoch, see Fence) and the time
	// admitted requests waited for a slot.
	flight  flightMeter
	otk     *overtakeMeter // Measurements.Parallel, when the controller needs it (nil: not)
	svc     *monitor.Window
	svcTail *monitor.Window // every completion's service time, fences or not (nil: not needed)
	epoch   atomic.Uint32
	waits   waitMeter
	expired atomic.Uint64 // waiters that left the queue without a slot

	// For Retry-After on the rejection path, read without mu: each
	// input's last step (Unix ns) and the last period's mean service
	// time (ns, 0 unknown).
	lastStep []atomic.Int64
	svcMean  atomic.Int64
	// The controller's bound on the rejected share of a step's arrivals
	// (Decision.MaxReject, float bits; 0: none), the step's arrivals and
	// rejections while it is in force, and the requests it admitted past
	// the limit since start.
	rejCap          atomic.Uint64
	capArr, capRej  atomic.Int64
	maxRejectAdmits atomic.Uint64

	mu      sync.Mutex // serialises Step and SetTarget
	lastRun []time.Time
	created time.Time
}

// New builds a stage at time now.
func New(opts Options, now time.Time) (*Stage, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	c, err := opts.Controller.New()
	if err != nil {
		return nil, fmt.Errorf("stage %q: controller: %w", opts.Name, err)
	}
	logged, err := control.WithHistory(c, opts.History)
	if err != nil {
		return nil, fmt.Errorf("stage %q: %w", opts.Name, err)
	}
	n := len(opts.ClassNames)
	g, err := NewGates(c.Current(), n, opts.Burst, opts.Rand)
	if err != nil {
		return nil, fmt.Errorf("stage %q: %w", opts.Name, err)
	}
	s := &Stage{name: opts.Name, ctrl: logged, gates: g, period: c.Period(), shadow: opts.Shadow,
		util: opts.Utilization, queue: opts.Queue, created: now,
		classAware:  len(c.Current().ClassRates) > 0,
		errReject:   fmt.Errorf("stage %q: %w", opts.Name, sluice.ErrRejected),
		errTimeout:  fmt.Errorf("stage %q: %w", opts.Name, ErrQueueTimeout),
		errDeadline: fmt.Errorf("stage %q: %w", opts.Name, ErrDeadline),
		classNames:  append([]string(nil), opts.ClassNames...)}
	shed, reserve, err := opts.Priority.resolve(opts.Controller, n)
	if err != nil {
		return nil, fmt.Errorf("stage %q: %w", opts.Name, err)
	}
	if shed {
		g.setPriority(n, reserve)
		s.shedMix = g.classDrop != nil
	}
	if s.hog, err = opts.Hog.watch(c, opts.Tenants.Fair && g.Kind() == sluice.KindConcurrency); err != nil {
		return nil, fmt.Errorf("stage %q: %w", opts.Name, err)
	}
	s.waitPool.New = newLiveWait
	s.mkWait = s.getWait
	s.setCensor(c)
	s.flight.base = now
	s.waits.reset()
	if s.svc, err = monitor.NewWindow(opts.Window); err != nil {
		return nil, fmt.Errorf("stage %q: %w", opts.Name, err)
	}
	if t, ok := c.(sluice.SampleTriggered); ok && t.TriggerSamples() > 0 {
		s.trigger.Store(int64(t.TriggerSamples()))
		if opts.Window < t.TriggerSamples() {
			return nil, fmt.Errorf("stage %q: window %d is smaller than the controller's nreq %d", opts.Name, opts.Window, t.TriggerSamples())
		}
	}
	if g.Kind() == sluice.KindConcurrency {
		if err := s.initConcurrency(opts, c, shed, reserve, now); err != nil {
			return nil, err
		}
	}
	if err := s.initRecorders(opts, now); err != nil {
		return nil, err
	}
	return s, nil
}

// setDefaults fills the options left at zero with the defaults New
// documents, and checks the tenants' settings.
func (opts *Options) setDefaults() error {
	if opts.Controller == nil {
		c, err := control.NewConfig(DefaultController)
		if err != nil {
			return fmt.Errorf("stage %q: %w", opts.Name, err)
		}
		opts.Controller = c
	}
	// A field of the controller's configuration left at zero means its
	// default (the caller's value is not modified).
	opts.Controller = control.WithDefaults(opts.Controller)
	if len(opts.ClassNames) == 0 {
		opts.ClassNames = []string{"default"}
	}
	opts.Burst = cmp.Or(opts.Burst, DefaultBurst)
	opts.Window = cmp.Or(opts.Window, DefaultWindow)
	opts.History = cmp.Or(opts.History, DefaultHistory)
	opts.MaxQueue = cmp.Or(opts.MaxQueue, DefaultMaxQueue)
	opts.QueueTimeout = cmp.Or(opts.QueueTimeout, DefaultQueueTimeout)
	if err := opts.Tenants.validate(); err != nil {
		return fmt.Errorf("stage %q: %w", opts.Name, err)
	}
	return nil
}

// initConcurrency sets up a concurrency-limited stage: its wait queue,
// priority reserve, the measurements its controller needs, fair
// queueing among tenants and the burst allowance.
func (s *Stage) initConcurrency(opts Options, c sluice.Controller, shed bool, reserve float64, now time.Time) error {
	var err error
	if s.conc, err = newConcGate(s.gates.Limit(), opts.MaxQueue, len(opts.ClassNames), opts.QueueTimeout); err != nil {
		return fmt.Errorf("stage %q: %w", opts.Name, err)
	}
	if shed {
		s.conc.reserve = reserve
	}
	need := control.NeedsOf(opts.Controller)
	if need.Overtakes {
		s.otk = newOvertakeMeter(need.OvertakeTolerance)
	}
	if need.ServiceTail {
		if s.svcTail, err = monitor.NewWindow(opts.Window); err != nil {
			return fmt.Errorf("stage %q: %w", opts.Name, err)
		}
	}
	if opts.Tenants.Fair {
		s.conc.fair = newFairQueue(opts.Tenants, len(opts.ClassNames), opts.MaxQueue)
		s.conc.slots.SetFair(true)
		if f := s.conc.fair; opts.Tenants.SlotShare {
			s.conc.slots.SetHold(func(w *Wait) bool { return f.holds(w.Tenant) })
		}
	}
	s.setBurst()
	if granted, _ := s.conc.apply(now, c.Current()); len(granted) > 0 {
		return fmt.Errorf("stage %q: waiters before start", opts.Name)
	}
	return nil
}

// initRecorders makes the per-class recorders, the aggregate one of a
// stage whose controller takes one input for several classes, and the
// controller inputs' clocks.
func (s *Stage) initRecorders(opts Options, now time.Time) error {
	var err error
	for _, name := range opts.ClassNames {
		var rec *monitor.Recorder
		if rec, err = monitor.NewRecorder(opts.Window, now); err != nil {
			return fmt.Errorf("stage %q: %w", opts.Name, err)
		}
		s.classes = append(s.classes, &classState{name: name, rec: rec})
	}
	inputs := 1
	if s.classAware {
		inputs = len(opts.ClassNames)
	} else if len(opts.ClassNames) > 1 {
		if s.agg, err = monitor.NewRecorder(opts.Window, now); err != nil {
			return err
		}
	}
	s.lastRun = make([]time.Time, inputs)
	s.lastStep = make([]atomic.Int64, inputs)
	for i := range s.lastRun {
		s.lastRun[i] = now
		s.lastStep[i].Store(now.UnixNano())
	}
	return nil
}

// Name returns the stage's name.
func (s *Stage) Name() string { return s.name }

// Classes returns the class names in priority order.
func (s *Stage) Classes() []string {
	out := make([]string, len(s.classes))
	for i, c := range s.classes {
		out[i] = c.name
	}
	return out
}

// Quality returns the quality level in (0, 1] the backend should serve at
// (1 unless the controller degrades).
func (s *Stage) Quality() float64 { return s.gates.Quality() }

// Degrading reports whether the stage's controller sets a quality level.
func (s *Stage) Degrading() bool { return s.gates.Degrading() }

// MeasuresOvertakes reports whether the stage orders the requests in
// service to count overtakes (its controller reads the knee from them), so
// that a caller reporting Ticket.Sent is worth its cost.
func (s *Stage) MeasuresOvertakes() bool { return s.otk != nil }

// Triggered reports whether the controller also runs after a number of
// samples (SEDA's nreq, Envoy's minRTT window): a runner then polls Step
// every MaxPoll instead of every period.
func (s *Stage) Triggered() bool {
	_, ok := s.ctrl.Unwrap().(sluice.SampleTriggered)
	return ok
}

// Period returns the controller's period.
func (s *Stage) Period() time.Duration { return s.period }

// Controller returns the stage's controller (wrapped with its history).
func (s *Stage) Controller() *control.Logged { return s.ctrl }

// Step runs every control step that is due at now: the controller's
// period has elapsed since its last run, or (SEDA) nreq response-time
// samples have been recorded. It collects the interval's measurements, reads the
// sensors, calls Update and applies the decision; then, after a step
// of a stage with a hog rule (Hog), it cancels the requests in service
// the rule names, with no lock of the stage held. It returns the
// decisions taken.
func (s *Stage) Step(now time.Time) []sluice.Decision {
	out, refused := s.step(now)
	if s.hog != nil && len(out) > 0 {
		for _, v := range s.hogs(now, refused) {
			v.cancel(v.err)
		}
	}
	return out
}

// step is Step's control step under s.mu; refused reports whether the
// step's interval refused requests.
func (s *Stage) step(now time.Time) (out []sluice.Decision, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.classAware {
		for c, cs := range s.classes {
			if !s.due(c, cs.rec, now) {
				continue
			}
			m := s.collect(cs, now)
			m.Class = c
			refused = refused || m.Rejected > 0
			out = append(out, s.decide(now, c, m))
		}
		return out, refused
	}
	input := s.classes[0].rec
	if s.agg != nil {
		input = s.agg
	}
	if !s.due(0, input, now) {
		return nil, false
	}
	var m sluice.Measurements
	if s.agg != nil {
		var mix []float64
		if s.shedMix {
			mix = make([]float64, len(s.classes))
		}
		for i, cs := range s.classes {
			cm := s.collect(cs, now)
			if mix != nil {
				mix[i] = cm.Arrivals
			}
		}
		if mix != nil {
			s.gates.SetClassMix(mix)
		}
		m = s.sense(now, s.agg.Collect(now), nil)
	} else {
		m = s.collect(s.classes[0], now)
	}
	s.concurrency(now, &m)
	return append(out, s.decide(now, 0, m)), m.Rejected > 0
}

// concurrency fills the stage-level measurements of concurrency
// controllers into m and starts their next interval.
func (s *Stage) concurrency(now time.Time, m *sluice.Measurements) {
	m.InFlight, m.MaxInFlight = s.flight.collect(now)
	st := s.svc.Stats(true)
	m.ServiceSamples = float64(st.Count)
	m.ServiceMean, m.ServiceP50, m.ServiceP90, m.ServiceP99, m.ServiceMin = serviceStats(st)
	if st.Count > 0 {
		s.svcMean.Store(int64(st.Mean))
	}
	m.ServiceTailP99 = math.NaN()
	if s.svcTail != nil {
		tail := s.svcTail.Stats(true)
		if tail.Count > 0 {
			m.ServiceTailSamples, m.ServiceTailP99 = float64(tail.Count), tail.P99.Seconds()
		}
	}
	if s.otk != nil {
		m.Parallel, m.BackendShare = s.otk.collect(now)
	}
	m.QueueWaitMean, m.QueueWaitMin = s.waits.collect()
	m.Expired = float64(s.expired.Swap(0))
	if c := s.conc; c != nil && c.fair != nil && c.fair.costs != nil {
		// Under a measured cost the controller counts completions in
		// units of the mean request's cost: a probe that lets more of a
		// costly tenant's requests in serves fewer requests but no less
		// work, and must not read as a loss.
		c.mu.Lock()
		n, w := c.fair.weighted()
		c.fair.costs.fold()
		c.mu.Unlock()
		if n > 0 {
			k := w / n
			m.Completed *= k
			m.Failed *= k
		}
	}
}

// due reports whether input i runs at now: its period has elapsed, or it
// holds nreq response-time samples (SEDA records nreq samples, so fast
// failures that are not samples do not make it run more often).
func (s *Stage) due(i int, rec *monitor.Recorder, now time.Time) bool {
	// A ticker fires a little early or late; a period that is 95% over
	// counts, or a tick a hair early would skip a whole period.
	if now.Sub(s.lastRun[i]) >= s.period-s.period/20 {
		return true
	}
	tr := s.trigger.Load()
	if tr <= 0 {
		return false
	}
	if s.conc != nil {
		// A concurrency controller's trigger counts service samples.
		return int64(s.svc.Len()) >= tr
	}
	return int64(rec.Samples()) >= tr
}

// collect ends a class's period: totals, last-period view, sensors.
func (s *Stage) collect(cs *classState, now time.Time) sluice.Measurements {
	m, st := cs.rec.CollectStats(now)
	cs.offered.Add(uint64(m.Arrivals))
	cs.admitted.Add(uint64(m.Admitted))
	cs.rejected.Add(uint64(m.Rejected))
	cs.completed.Add(uint64(m.Completed))
	p := &Period{End: now, Elapsed: m.Elapsed, Offered: m.Arrivals, Admitted: m.Admitted, Rejected: m.Rejected,
		Completed: m.Completed, Samples: st.Count, MeanMS: ms(st.Mean), P50MS: ms(st.P50), P90MS: ms(st.P90),
		P99MS: ms(st.P99), ThroughputPS: m.Throughput()}
	m = s.sense(now, m, p)
	cs.last.Store(p)
	return m
}

// sense fills the sensor readings at now into m (and p when given).
func (s *Stage) sense(now time.Time, m sluice.Measurements, p *Period) sluice.Measurements {
	if s.util != nil {
		u, err := s.util.Utilization(now)
		if err != nil {
			u = math.NaN()
			if p != nil {
				p.SensorError = err.Error()
			}
		} else if p != nil {
			p.Utilization = &u
		}
		m.Utilization = u
	}
	if s.queue != nil {
		m.Queue = s.queue()
		if p != nil {
			p.Queue = m.Queue
		}
	} else if s.conc != nil {
		m.Queue = float64(s.QueueLen())
		if p != nil {
			p.Queue = m.Queue
		}
	}
	return m
}

func (s *Stage) decide(now time.Time, input int, m sluice.Measurements) sluice.Decision {
	d := s.ctrl.Update(now, m)
	s.lastRun[input] = now
	s.lastStep[input].Store(now.UnixNano())
	if err := s.gates.Apply(now, d); err != nil {
		// Controllers return finite bounded settings of their own kind, so
		// this is a programming error; keep the previous setting.
		d.Reason += " (not applied: " + err.Error() + ")"
	}
	s.rejCap.Store(math.Float64bits(max(d.MaxReject, 0)))
	s.capArr.Store(0)
	s.capRej.Store(0)
	if d.Fence {
		s.epoch.Add(1)
		s.svc.Stats(true) // drop the samples of the old epoch
	}
	if t, ok := s.ctrl.Unwrap().(sluice.SampleTriggered); ok {
		s.trigger.Store(int64(max(t.TriggerSamples(), 0)))
	}
	if s.conc != nil && d.Kind == sluice.KindConcurrency {
		s.setBurst()
		s.applyLimit(now, d)
	}
	return d
}

// applyLimit applies d to the concurrency limit and settles the queue: the
// waiters the new limit evicts are dropped, those it has room for are
// granted their slot. The caller holds the stage's lock.
func (s *Stage) applyLimit(now time.Time, d sluice.Decision) {
	granted, evicted := s.conc.apply(now, d)
	for _, w := range evicted {
		s.drop(w, true, true)
	}
	for _, w := range granted {
		s.grant(w, now)
	}
}

// QueueLen returns the number of requests waiting for a concurrency slot
// (0 for a stage without a limit).
func (s *Stage) QueueLen() int {
	if s.conc == nil {
		return 0
	}
	s.conc.mu.Lock()
	defer s.conc.mu.Unlock()
	return s.conc.slots.QueueLen()
}

// InFlight returns the number of requests in service.
func (s *Stage) InFlight() int { return int(s.flight.n.Load()) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// SetTarget changes the response-time target of the stage's controller
// (SEDA, degradation, Yaksha); other controllers have no such target.
func (s *Stage) SetTarget(target time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.ctrl.Unwrap().(control.Targeted)
	if !ok {
		return fmt.Errorf("stage %q: controller %s has no response-time target", s.name, s.ctrl.Current().Controller)
	}
	if err := t.SetTarget(target); err != nil {
		return err
	}
	s.setCensor(s.ctrl.Unwrap())
	s.setBurst()
	return nil
}

// setBurst sets the fair queue's burst wait (Tenants) from the
// controller: min(T/2, T − R̂99) for a controller with a response-time
// target T that estimates the service's p99 R̂99 (its estimate
// service_p99_s; T/2 while it has none), 0 (none) for the others.
func (s *Stage) setBurst() {
	c := s.conc
	if c == nil || c.fair == nil {
		return
	}
	b := time.Duration(0)
	t, ok := s.ctrl.Unwrap().(control.Targeted)
	e, ok2 := s.ctrl.Unwrap().(Estimator)
	if ok && ok2 {
		b = t.Target() / 2
		if p99 := e.Estimates()["service_p99_s"]; mathx.Finite(p99) {
			b = max(0, min(b, t.Target()-time.Duration(p99*float64(time.Second))))
		}
	}
	c.mu.Lock()
	c.fair.burst = b
	c.mu.Unlock()
}

// setCensor sets censorAt from the controller's response-time target.
func (s *Stage) setCensor(c sluice.Controller) {
	if t, ok := c.(control.Targeted); ok {
		s.censorAt.Store(int64(t.Target()))
		return
	}
	s.censorAt.Store(math.MaxInt64)
}

// Poll returns how often a runner calls Step: the controller's period, or
// MaxPoll for a sample-triggered controller when that is shorter.
func (s *Stage) Poll() time.Duration {
	if s.Triggered() && s.period > MaxPoll {
		return MaxPoll
	}
	return s.period
}

var _ sluice.Stepper = (*Stage)(nil)

// Run drives the stage with the wall clock until ctx ends (a Runner):
// every Poll it calls Step.
func (s *Stage) Run(ctx context.Context) { Runner{Stepper: s}.Run(ctx) }
