// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/textproto"
	"sync"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/internal/dashboard"
	"github.com/sluicehq/sluice/proxy/overload"
)

// sensor is one live sensor of the proxy, shared by its consumers (a
// resource rule's stage, the policer's CPU guard). Most readers report
// the interval since their previous reading, so a second consumer
// reading right after the first would see an empty interval: a reading
// requested less than gap after the previous one returns that previous
// reading again. The value is a utilization in [0, 1] for utilization
// sources, and a queue normalised to the sensor's scale for outqueue and
// bandwidth. It is safe for concurrent use.
type sensor struct {
	name   string // configuration path: "utilization", "resources[1].sensor"
	source string
	unit   string // "utilization" or "queue"
	gap    time.Duration
	read   func(now time.Time) (reading, error)
	desc   func() string
	// sample, when set, is the sampling loop of an outgoing-queue sensor;
	// it runs while the proxy serves.
	sample func(ctx context.Context) error

	mu     sync.Mutex
	have   bool
	at     time.Time
	last   reading
	err    error
	reads  uint64
	errors uint64
}

// reading is one value of a sensor.
type reading struct {
	value float64
	// bytes is the mean queued bytes (outqueue) or the bytes per second
	// (bandwidth); NaN for utilization sources.
	bytes float64
}

// get returns the reading at now (see sensor for the sharing rule).
func (s *sensor) get(now time.Time) (reading, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.have && (now.Before(s.at) || now.Sub(s.at) < s.gap) {
		return s.last, s.err
	}
	r, err := s.read(now)
	s.have, s.at, s.last, s.err = true, now, r, err
	s.reads++
	if err != nil {
		s.errors++
	}
	return r, err
}

// Utilization implements monitor.UtilizationSource.
func (s *sensor) Utilization(now time.Time) (float64, error) {
	r, err := s.get(now)
	if err != nil {
		return math.NaN(), fmt.Errorf("%s (%s): %w", s.name, s.source, err)
	}
	return r.value, nil
}

// Describe implements monitor.UtilizationSource.
func (s *sensor) Describe() string { return s.desc() }

// queue is the stage queue sensor of a bandwidth rule: the normalised
// queue, or NaN while the sensor has no reading (the controller holds).
func (s *sensor) queue() float64 {
	r, err := s.get(time.Now())
	if err != nil {
		return math.NaN()
	}
	return r.value
}

var _ monitor.UtilizationSource = (*sensor)(nil)

// SensorState is a sensor as /state shows it: its name, source,
// description and unit, its last value (nil when it failed) and bytes,
// when it was read, its error, and its reads and failed reads. The
// dashboard carries the same type to the page.
type SensorState = dashboard.Sensor

func (s *sensor) state() SensorState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SensorState{Name: s.name, Source: s.source, Description: s.desc(), Unit: s.unit, At: s.at,
		Reads: s.reads, Errors: s.errors}
	if s.err != nil {
		st.Error = s.err.Error()
	} else if s.have {
		v := s.last.value
		st.Value = &v
		if !math.IsNaN(s.last.bytes) {
			b := s.last.bytes
			st.Bytes = &b
		}
	}
	return st
}

// reportedHeader is a backend-header sensor: the proxy reads header from
// every response and feeds rep.
type reportedHeader struct {
	header string // canonical
	rep    *monitor.Reported
}

// poolBusy is the pool-busy source: the busy time of the running
// generation's pool. A pool rebuilt on reload starts a new interval.
type poolBusy struct{ h *Handler }

func (b poolBusy) Utilization(now time.Time) (float64, error) {
	g := b.h.gen.Load()
	if g == nil || g.pool.busy == nil {
		return math.NaN(), fmt.Errorf("no backend pool")
	}
	return g.pool.busy.Utilization(now)
}

func (b poolBusy) Describe() string {
	if g := b.h.gen.Load(); g != nil && g.pool.busy != nil {
		return "backend pool: " + g.pool.busy.Describe()
	}
	return "backend pool busy time"
}

// overloadRun holds the proxy's sensors, resource rules and connection
// policer: everything that lives as long as the Server (they cannot
// change on reload).
type overloadRun struct {
	registry *policer.Registry // live client connections, when a sensor or the policer needs them
	accept   *policer.Policer  // the policer wrapping the listeners, or an admit-all one for the registry
	pol      *policerRunner    // nil without policer
	util     *sensor           // the top-level utilization sensor, nil for none
	guard    *sensor           // the policer's CPU guard, nil for none
	sensors  []*sensor         // every sensor, for /state and metrics
	rules    []*resourceRule   // in configuration order
	byStage  map[string]*resourceRule
	reported []reportedHeader
	busy     bool // pools track their busy time
}

// resourceRule is one live resources[i] entry.
type resourceRule struct {
	idx    int
	cfg    overload.ResourceConfig
	sensor *sensor
	tune   *control.KihlTune // kihl tuning: auto, else nil
	period time.Duration     // the stage's control period at start
}

// checkPeriods refuses a policy whose stages bound to an outgoing-queue
// sensor or an auto-tuned kihl changed their control period: the sensor
// averages, and σ counts, per period as it was at start.
func (o *overloadRun) checkPeriods(pol *policy.Policy) error {
	for _, r := range o.rules {
		if r.tune == nil && (r.cfg.Sensor == nil || r.cfg.Sensor.Source != overload.SensorOutQueue) {
			continue
		}
		if st := pol.Stage(r.cfg.Stage); st != nil && st.Period() != r.period {
			return fieldErr(fmt.Sprintf("resources[%d].stage", r.idx),
				"stage %q now has period %v, not %v as at start: its sensor and tuning work per period; restart sluice to change it", r.cfg.Stage, st.Period(), r.period)
		}
	}
	return nil
}

// buildOverload builds the sensors, rules and policer of cfg (validated,
// with defaults) at now. Sensors whose readers need the running proxy
// (pool-busy, backend-header) read it through h.
func buildOverload(cfg *Config, h *Handler, log *slog.Logger, now time.Time) (*overloadRun, error) {
	o := &overloadRun{byStage: map[string]*resourceRule{}}
	ctrls, err := cfg.Config.StageControllers()
	if err != nil {
		return nil, err
	}
	needRegistry := cfg.Policer != nil
	for _, r := range cfg.Resources {
		if r.Sensor != nil && (r.Sensor.Source == overload.SensorOutQueue || r.Sensor.Source == overload.SensorBandwidth) {
			needRegistry = true
		}
	}
	if needRegistry {
		o.registry = new(policer.Registry)
	}
	// gap: half the shortest period of the consumers, so that consumers
	// stepping within one period share a reading.
	minPeriod := time.Second
	for _, cc := range ctrls {
		minPeriod = min(minPeriod, overload.ControllerPeriod(cc))
	}
	if cfg.Policer != nil {
		minPeriod = min(minPeriod, cfg.Policer.Control.Period)
	}
	gap := minPeriod / 2
	if overload.IsUtilizationSource(cfg.Utilization.Source) {
		if o.util, err = o.utilizationSensor("utilization", &cfg.Utilization, h, gap, now); err != nil {
			return nil, err
		}
	}
	for i, r := range cfg.Resources {
		period := overload.ControllerPeriod(ctrls[r.Stage])
		rule := &resourceRule{idx: i, cfg: r, period: period}
		p := fmt.Sprintf("resources[%d].sensor", i)
		switch {
		case r.Sensor == nil:
			rule.sensor = o.util
		case r.Resource == overload.ResourceCPU:
			if rule.sensor, err = o.utilizationSensor(p, &r.Sensor.UtilizationConfig, h, gap, now); err != nil {
				return nil, err
			}
		default:
			if rule.sensor, err = o.networkSensor(p, r.Sensor, period, gap, now); err != nil {
				return nil, err
			}
		}
		if r.Kihl != nil && r.Kihl.Tuning == overload.KihlTuningAuto {
			k := r.Kihl
			rule.tune = control.NewKihlTune(r.Stage, *k.A1, *k.A2, period, k.Sigma, k.EstimatePeriods, k.MinUtilization, log)
		}
		o.rules = append(o.rules, rule)
		o.byStage[r.Stage] = rule
	}
	// The policer's CPU guard: the first CPU rule's sensor, else the
	// top-level utilization sensor.
	o.guard = o.util
	for _, r := range o.rules {
		if r.cfg.Resource == overload.ResourceCPU && r.sensor != nil {
			o.guard = r.sensor
			break
		}
	}
	if cfg.Policer != nil {
		if o.pol, err = newPolicerRunner(cfg.Policer, o.guard, h, now); err != nil {
			return nil, err
		}
		o.accept = o.pol.p
	} else if o.registry != nil {
		// Track connections for the network sensors without policing.
		if o.accept, err = policer.New(policer.Config{Rate: math.Inf(1), Burst: 1}, now); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// utilizationSensor builds a utilization sensor named name.
func (o *overloadRun) utilizationSensor(name string, u *overload.UtilizationConfig, h *Handler, gap time.Duration, now time.Time) (*sensor, error) {
	var src monitor.UtilizationSource
	switch u.Source {
	case overload.UtilizationHost:
		var cpus []int
		if u.CPUs != "" {
			var err error
			if cpus, err = monitor.ParseCPUList(u.CPUs); err != nil {
				return nil, fieldErr(name+".cpus", "%q is invalid: %v", u.CPUs, err)
			}
		}
		ps, err := monitor.NewProcStat("/proc", cpus)
		if err != nil {
			return nil, fieldErr(name+".source", "the host CPU sensor is unavailable: %v", err)
		}
		src = ps
	case overload.UtilizationCgroup, overload.UtilizationAuto:
		cg, err := overload.NewCgroupSource(u, now)
		if err != nil {
			return nil, fielderr.Under(name, err)
		}
		src = cg
	case overload.UtilizationProcess:
		pr, err := overload.NewProcessSource(u, now)
		if err != nil {
			return nil, fieldErr(name+".pid", "the process CPU sensor is unavailable: %v", err)
		}
		src = pr
	case overload.UtilizationPoolBusy:
		o.busy = true
		src = poolBusy{h: h}
	case overload.UtilizationBackendHeader:
		hdr := textproto.CanonicalMIMEHeaderKey(u.Header)
		var rep *monitor.Reported
		for _, r := range o.reported {
			if r.header == hdr {
				rep = r.rep
			}
		}
		if rep == nil {
			rep = monitor.NewReported("the backends' " + hdr + " header")
			o.reported = append(o.reported, reportedHeader{header: hdr, rep: rep})
		}
		src = rep
	default:
		return nil, fieldErr(name+".source", "%q is not a utilization source", u.Source)
	}
	s := &sensor{name: name, source: u.Source, unit: "utilization", gap: gap, desc: src.Describe,
		read: func(now time.Time) (reading, error) {
			v, err := src.Utilization(now)
			return reading{value: v, bytes: math.NaN()}, err
		}}
	o.sensors = append(o.sensors, s)
	return s, nil
}

// networkSensor builds the outgoing-queue or outgoing-bandwidth sensor of
// a bandwidth rule whose stage steps every period.
func (o *overloadRun) networkSensor(name string, sc *overload.SensorConfig, period, gap time.Duration, now time.Time) (*sensor, error) {
	s := &sensor{name: name, source: sc.Source, unit: "queue", gap: gap}
	switch sc.Source {
	case overload.SensorOutQueue:
		q, err := monitor.NewSocketOutQueue(sc.OutQueueConfig(period), o.registry, now)
		if err != nil {
			return nil, fieldErr(name+".source", "the outgoing-queue sensor is unavailable: %v", err)
		}
		s.desc = q.Describe
		s.read = func(now time.Time) (reading, error) {
			r, err := q.Collect(now)
			if err != nil {
				return reading{value: math.NaN(), bytes: math.NaN()}, err
			}
			return reading{value: r.Queue, bytes: r.MeanBytes}, nil
		}
		s.sample = func(ctx context.Context) error { return monitor.RunOutQueueSampler(ctx, q) }
	case overload.SensorBandwidth:
		b, err := monitor.NewBandwidth(o.registry, float64(sc.LinkCapacity), now)
		if err != nil {
			return nil, fieldErr(name+".link_capacity", "%v", err)
		}
		scale := sc.Scale
		s.desc = func() string { return fmt.Sprintf("%s, normalised to %g", b.Describe(), scale) }
		s.read = func(now time.Time) (reading, error) {
			r, err := b.Measure(now)
			if err != nil {
				return reading{value: math.NaN(), bytes: math.NaN()}, err
			}
			return reading{value: scale * r.Utilization, bytes: r.BytesPerSecond}, nil
		}
	default:
		return nil, fieldErr(name+".source", "%q is not a bandwidth sensor", sc.Source)
	}
	o.sensors = append(o.sensors, s)
	return s, nil
}

// run starts the sensors' sampling loops and the policer's controller
// until ctx ends.
func (o *overloadRun) run(ctx context.Context, wg *sync.WaitGroup) {
	for _, s := range o.sensors {
		if s.sample != nil {
			wg.Go(func() { _ = s.sample(ctx) })
		}
	}
	if o.pol != nil {
		wg.Go(func() { o.pol.run(ctx) })
	}
}
