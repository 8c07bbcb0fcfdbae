// SPDX-License-Identifier: Apache-2.0

package overload

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
	"github.com/sluicehq/sluice/policer/nft"
	"github.com/sluicehq/sluice/policy"
)

// Host is what the overload runtime reads of the proxy that runs it.
// Each method reads the configuration generation in force when it is
// called; they are called from the control loops, the metrics collector
// and /state, so they must be safe for concurrent use.
type Host interface {
	// Policy returns the admission policy in force, nil before the first
	// generation.
	Policy() *policy.Policy
	// QueueLen returns the backend pool's wait queue in requests (0
	// before the first generation).
	QueueLen() int
	// PoolBusy returns the busy time of the backend pool in force, nil
	// when there is no pool or it does not track its busy time.
	PoolBusy() monitor.UtilizationSource
}

// Runtime holds the proxy's sensors, resource rules and connection
// policer: everything that lives as long as the proxy's server (they
// cannot change on reload). Package proxy builds one with NewRuntime,
// wires its stages with NewPolicy, wraps its listeners with the policer
// of Listener, runs it with Run and reads it for /state and /metrics.
type Runtime struct {
	host     Host
	log      *slog.Logger
	registry *policer.Registry // live client connections, when a sensor or the policer needs them
	accept   *policer.Policer  // the policer wrapping the listeners, or an admit-all one for the registry
	pol      *PolicerRunner    // nil without policer
	util     *Sensor           // the top-level utilization sensor, nil for none
	guard    *Sensor           // the policer's CPU guard, nil for none
	sensors  []*Sensor         // every sensor, for /state and metrics
	rules    []*resourceRule   // in configuration order
	byStage  map[string]*resourceRule
	reported ReportedHeaders
	busy     bool       // pools track their busy time
	kernel   *nft.Table // the policer's kernel path (kernel.go), or nil
}

// resourceRule is one live resources[i] entry.
type resourceRule struct {
	idx    int
	cfg    ResourceConfig
	sensor *Sensor
	tune   *control.KihlTune // kihl tuning: auto, else nil
	period time.Duration     // the stage's control period at start
}

// TracksBusy reports whether the backend pools must track the busy time
// of their slots (a pool-busy sensor reads it through Host.PoolBusy).
func (o *Runtime) TracksBusy() bool { return o.busy }

// Reported returns the backend-header sensors, whose headers the proxy
// takes from every response (ReportedHeaders.Take).
func (o *Runtime) Reported() ReportedHeaders { return o.reported }

// Listener returns the policer that wraps the client listeners and the
// registry of live connections it feeds (policer.Policer.Wrap), or nil,
// nil when neither the policer nor a network sensor needs them.
func (o *Runtime) Listener() (*policer.Policer, *policer.Registry) { return o.accept, o.registry }

// Policer returns the connection policer's runner, nil without policer.
func (o *Runtime) Policer() *PolicerRunner { return o.pol }

// Sensors returns every sensor, in the order they were built.
func (o *Runtime) Sensors() []*Sensor { return o.sensors }

// CheckPeriods refuses a policy whose stages bound to an outgoing-queue
// sensor or an auto-tuned kihl changed their control period: the sensor
// averages, and σ counts, per period as it was at start.
func (o *Runtime) CheckPeriods(pol *policy.Policy) error {
	for _, r := range o.rules {
		if r.tune == nil && (r.cfg.Sensor == nil || r.cfg.Sensor.Source != SensorOutQueue) {
			continue
		}
		if st := pol.Stage(r.cfg.Stage); st != nil && st.Period() != r.period {
			return fieldErr(fmt.Sprintf("resources[%d].stage", r.idx),
				"stage %q now has period %v, not %v as at start: its sensor and tuning work per period; restart sluice to change it", r.cfg.Stage, st.Period(), r.period)
		}
	}
	return nil
}

// NewRuntime builds the sensors, rules and policer of cfg (validated,
// with defaults) for the admission policy pol at now. Sensors whose
// readers need the running proxy (pool-busy) and the policer's queue
// read it through host; log receives what the policer and the Kihl
// tuning say.
func NewRuntime(cfg *Config, pol *policy.Config, host Host, log *slog.Logger, now time.Time) (*Runtime, error) {
	o := &Runtime{host: host, log: log, byStage: map[string]*resourceRule{}}
	ctrls, err := pol.StageControllers()
	if err != nil {
		return nil, err
	}
	needRegistry := cfg.Policer != nil
	for _, r := range cfg.Resources {
		if r.Sensor != nil && (r.Sensor.Source == SensorOutQueue || r.Sensor.Source == SensorBandwidth) {
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
		minPeriod = min(minPeriod, ControllerPeriod(cc))
	}
	if cfg.Policer != nil {
		minPeriod = min(minPeriod, cfg.Policer.Control.Period)
	}
	gap := minPeriod / 2
	if IsUtilizationSource(cfg.Utilization.Source) {
		if o.util, err = o.utilizationSensor("utilization", &cfg.Utilization, gap, now); err != nil {
			return nil, err
		}
	}
	for i, r := range cfg.Resources {
		period := ControllerPeriod(ctrls[r.Stage])
		rule := &resourceRule{idx: i, cfg: r, period: period}
		p := fmt.Sprintf("resources[%d].sensor", i)
		switch {
		case r.Sensor == nil:
			rule.sensor = o.util
		case r.Resource == ResourceCPU:
			if rule.sensor, err = o.utilizationSensor(p, &r.Sensor.UtilizationConfig, gap, now); err != nil {
				return nil, err
			}
		default:
			if rule.sensor, err = o.networkSensor(p, r.Sensor, period, gap, now); err != nil {
				return nil, err
			}
		}
		if r.Kihl != nil && r.Kihl.Tuning == KihlTuningAuto {
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
		if r.cfg.Resource == ResourceCPU && r.sensor != nil {
			o.guard = r.sensor
			break
		}
	}
	if cfg.Policer != nil {
		if o.pol, err = newPolicerRunner(cfg.Policer, o.guard, host, o.registry, now); err != nil {
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
func (o *Runtime) utilizationSensor(name string, u *UtilizationConfig, gap time.Duration, now time.Time) (*Sensor, error) {
	var src monitor.UtilizationSource
	switch u.Source {
	case UtilizationHost:
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
	case UtilizationCgroup, UtilizationAuto:
		cg, err := NewCgroupSource(u, now)
		if err != nil {
			return nil, fielderr.Under(name, err)
		}
		src = cg
	case UtilizationProcess:
		pr, err := NewProcessSource(u, now)
		if err != nil {
			return nil, fieldErr(name+".pid", "the process CPU sensor is unavailable: %v", err)
		}
		src = pr
	case UtilizationPoolBusy:
		o.busy = true
		src = poolBusy{h: o.host}
	case UtilizationBackendHeader:
		hdr := textproto.CanonicalMIMEHeaderKey(u.Header)
		var rep *monitor.Reported
		for _, r := range o.reported {
			if r.Header == hdr {
				rep = r.Rep
			}
		}
		if rep == nil {
			rep = monitor.NewReported("the backends' " + hdr + " header")
			o.reported = append(o.reported, ReportedHeader{Header: hdr, Rep: rep})
		}
		src = rep
	default:
		return nil, fieldErr(name+".source", "%q is not a utilization source", u.Source)
	}
	s := &Sensor{name: name, source: u.Source, unit: "utilization", gap: gap, desc: src.Describe,
		read: func(now time.Time) (reading, error) {
			v, err := src.Utilization(now)
			return reading{value: v, bytes: math.NaN()}, err
		}}
	o.sensors = append(o.sensors, s)
	return s, nil
}

// networkSensor builds the outgoing-queue or outgoing-bandwidth sensor of
// a bandwidth rule whose stage steps every period.
func (o *Runtime) networkSensor(name string, sc *SensorConfig, period, gap time.Duration, now time.Time) (*Sensor, error) {
	s := &Sensor{name: name, source: sc.Source, unit: "queue", gap: gap}
	switch sc.Source {
	case SensorOutQueue:
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
	case SensorBandwidth:
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

// Run starts the sensors' sampling loops and the policer's controller
// in wg until ctx ends.
func (o *Runtime) Run(ctx context.Context, wg *sync.WaitGroup) {
	for _, s := range o.sensors {
		if s.sample != nil {
			wg.Go(func() { _ = s.sample(ctx) })
		}
	}
	if o.pol != nil {
		wg.Go(func() { o.pol.run(ctx) })
	}
}

// NewPolicy builds the admission policy of cfg. With prev, stages whose
// configuration is unchanged are carried over with their controller
// state. Each stage is wired from what its controller needs
// (control.NeedsOf), never from its name:
//
//   - a stage bound to a resource rule gets the rule's sensor: a cpu
//     rule's utilization (and the pool's queue), a bandwidth rule's
//     normalised outgoing queue; a kihl stage with tuning: auto gets the
//     auto-tuning controller;
//   - any other stage gets the backend pool's wait queue (Host.QueueLen)
//     as its queue signal unless its controller reports its own (OwnQueue), and
//     the top-level utilization sensor, when there is one, if its
//     controller reads a utilization.
func (o *Runtime) NewPolicy(cfg policy.Config, prev *policy.Policy, logger *slog.Logger) (*policy.Policy, error) {
	ctrls, err := cfg.StageControllers()
	if err != nil {
		return nil, err
	}
	opts := policy.Options{Now: time.Now(), Logger: logger, Previous: prev, RecordsUpstream: true, Queue: map[string]func() float64{},
		Utilization: map[string]monitor.UtilizationSource{}, Controllers: map[string]control.Config{}}
	for _, st := range cfg.Stages {
		if rule := o.byStage[st.Name]; rule != nil {
			if rule.cfg.Resource == ResourceBandwidth {
				opts.Queue[st.Name] = rule.sensor.queue
				continue
			}
			opts.Queue[st.Name] = o.queueLen
			opts.Utilization[st.Name] = rule.sensor
			if rule.tune != nil {
				if kc, ok := ctrls[st.Name].(*control.KihlConfig); ok {
					rule.tune.Gains(time.Now()) // a fixed σ resolves now
					opts.Controllers[st.Name] = &control.KihlAutoConfig{Base: *kc, Tune: rule.tune}
				}
			}
			continue
		}
		needs := control.NeedsOf(ctrls[st.Name])
		if !needs.OwnQueue {
			opts.Queue[st.Name] = o.queueLen
		}
		if needs.Utilization != control.NeedNone && o.util != nil {
			opts.Utilization[st.Name] = o.util
		}
	}
	return policy.New(cfg, opts)
}

// queueLen is the backend pool's wait queue in requests, as a stage's
// queue signal.
func (o *Runtime) queueLen() float64 { return float64(o.host.QueueLen()) }
