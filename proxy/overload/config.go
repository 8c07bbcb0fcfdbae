// SPDX-License-Identifier: Apache-2.0

// Package overload is the proxy's overload control: the utilization
// sensor, the resource rules (Voigt & Gunningberg) with their sensors and
// Kihl auto tuning, the connection policer and the client shares, with
// their defaults and validation (Config), and the runtime that runs
// them (Runtime: the live sensors, the stages' wiring to them, the
// policer's control loop and its nftables kernel path, their /state and
// metrics; RunMemLimit, the soft memory limit). The runtime reads the
// proxy only through Host and MemoryHost, which package proxy
// implements, so it does not import the proxy.
package overload

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/mathx"
	"github.com/sluicehq/sluice/internal/strictyaml"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/share"
)

// Config is the overload sections of the proxy's file, inline at its top
// level. The resource rules and the policer's defaults depend on the
// admission policy's stages, so SetDefaults and Validate take it.
type Config struct {
	// Utilization is the utilization sensor of the stages whose
	// controller needs one (kihl, voigt-cpu, voigt-queue) and have no
	// resource rule of their own, and of the policer's CPU guard when no
	// CPU rule names another. Changing it needs a restart.
	Utilization UtilizationConfig `yaml:"utilization"`
	// Resources bind stages to the critical resource they use (CPU,
	// outgoing bandwidth) and its sensor: Voigt & Gunningberg's resource
	// rules. Changing them needs a restart.
	Resources []ResourceConfig `yaml:"resources,omitempty"`
	// Policer is the connection policer (early discard at accept time) on
	// every client listener; nil (the default) has none. Changing it
	// needs a restart.
	Policer *PolicerConfig `yaml:"policer,omitempty"`
	// Shares are per-client bandwidth shares enforced by delaying replies
	// (Li & Jamin); nil (the default) has none. A reload applies changes.
	Shares *share.Config `yaml:"shares,omitempty"`
}

func fieldErr(path, format string, args ...any) error {
	return fielderr.Errorf(path, format, args...)
}

// Utilization sources (UtilizationConfig.Source).
const (
	UtilizationNone   = "none"
	UtilizationHost   = "host"
	UtilizationCgroup = "cgroup"
	// UtilizationAuto is "cgroup" (this process's own group) when this
	// process runs in a CPU-limited cgroup (a quota, or fewer CPUs than
	// the host's), else "host".
	UtilizationAuto          = "auto"
	UtilizationBackendHeader = "backend-header"
	// DefaultUtilizationHeader is the response header a backend reports
	// its utilization in (what sluice's testbed backends send).
	DefaultUtilizationHeader = "X-Sluice-Utilization"
)

// UtilizationConfig chooses where the utilization ρ in [0, 1] of the
// protected service comes from. A sensor that cannot work on this host
// fails validation, naming the sensor and why.
type UtilizationConfig struct {
	// Source is "none" (default: kihl and voigt-cpu hold their setting),
	// "host" (busy fraction of the host's CPUs, or of a CPU list, from
	// /proc/stat), "cgroup" (CPU use of a cgroup v2 or v1 against its
	// quota and cpuset), "auto" ("cgroup" of this process's own group
	// when it is CPU-limited, else "host"),
	// "process" (CPU use of one backend process), "pool-busy" (busy
	// fraction of the backend pool's slots) or "backend-header" (the mean
	// of the values the servers report in a response header).
	Source string `yaml:"source"`
	// CPUs restricts "host" to a CPU list such as "0-3,8" (default: all).
	CPUs string `yaml:"cpus,omitempty"`
	// Cgroup is the cgroup v2 directory for "cgroup", e.g.
	// /sys/fs/cgroup/system.slice/app.service (default: none, meaning the
	// group this process runs in, v2 or v1, found from /proc/self/cgroup).
	Cgroup string `yaml:"cgroup,omitempty"`
	// CgroupCPUs is, for "cgroup" and "auto", the capacity in CPUs the
	// group's CPU time is divided by, in place of its quota and cpuset
	// (default 0: the group's limits).
	CgroupCPUs float64 `yaml:"cgroup_cpus,omitempty"`
	// PID or Pidfile names the process for "process" (exactly one).
	PID     int    `yaml:"pid,omitempty"`
	Pidfile string `yaml:"pidfile,omitempty"`
	// ProcessCPUs is, for "process", the number of CPUs the process may
	// keep busy: the capacity its CPU time is divided by (default: the
	// number of CPUs of this host).
	ProcessCPUs float64 `yaml:"process_cpus,omitempty"`
	// Header is the response header for "backend-header" (default
	// X-Sluice-Utilization); the proxy removes it from responses.
	Header string `yaml:"header,omitempty"`
}

// Sources of a sensor (UtilizationConfig.Source, SensorConfig.Source)
// beyond the utilization sources declared with UtilizationConfig.
const (
	// UtilizationProcess is the CPU use of one backend process (pid or
	// pidfile) from /proc/<pid>/stat.
	UtilizationProcess = "process"
	// UtilizationPoolBusy is the busy fraction of the backend pool: the
	// time-average of requests holding a server slot over the pool's
	// capacity (the sum of the servers' max_concurrency).
	UtilizationPoolBusy = "pool-busy"
	// SensorOutQueue is the outgoing queue: the unsent bytes of the client
	// sockets, sampled samples_per_period times per control period,
	// averaged and normalised to scale (100) at capacity_bytes.
	SensorOutQueue = "outqueue"
	// SensorBandwidth is the outgoing bytes per second written to client
	// connections against link_capacity, normalised to scale (100) at the
	// link capacity.
	SensorBandwidth = "bandwidth"
)

// Resources a rule protects (ResourceConfig.Resource); which controllers a
// rule may bind is each controller's own statement (control.Needs).
const (
	ResourceCPU       = string(control.ResourceCPU)
	ResourceBandwidth = string(control.ResourceBandwidth)
)

// Kihl tuning modes (KihlTuningConfig.Tuning) and the defaults of auto
// tuning.
const (
	KihlTuningParams = "params"
	KihlTuningAuto   = "auto"
	// DefaultKihlA1 and DefaultKihlA2 are the closed-loop polynomial
	// z·(z² + a1·z + a2) auto tuning places: two real poles at about
	// 0.82 and 0.73, inside the Jury triangle with a margin and proved
	// absolutely stable for the queue nonlinearity by KihlAnalyze.
	DefaultKihlA1 = -1.55
	DefaultKihlA2 = 0.71
	// DefaultKihlEstimatePeriods is the number of control periods with a
	// usable reading that σ is estimated over before the gains are set.
	DefaultKihlEstimatePeriods = 5
	// DefaultKihlMinUtilization is the lowest utilization of a period
	// that enters the σ estimate (an idle resource says nothing about its
	// service rate).
	DefaultKihlMinUtilization = 0.2
	// DefaultPolicerHistory is the number of policer decisions kept for
	// /state.
	DefaultPolicerHistory = 100
	// PolicerControllerVoigtQueue and PolicerControllerNone are the values
	// of PolicerConfig.Controller.
	PolicerControllerVoigtQueue = "voigt-queue"
	PolicerControllerNone       = "none"
	// PolicerKernelAuto, PolicerKernelOn and PolicerKernelOff are the
	// values of PolicerConfig.Kernel; auto is the default.
	PolicerKernelAuto = "auto"
	PolicerKernelOn   = "on"
	PolicerKernelOff  = "off"
)

// SensorConfig is the sensor of a resource rule: a utilization source
// (the fields of UtilizationConfig) for a CPU rule, or the outgoing queue
// or outgoing bandwidth for a bandwidth rule.
type SensorConfig struct {
	UtilizationConfig `yaml:",inline"`
	// CapacityBytes is, for source outqueue, the number of unsent bytes
	// summed over all client sockets that reads as a full queue (scale).
	// Required for outqueue.
	CapacityBytes int64 `yaml:"capacity_bytes,omitempty"`
	// SamplesPerPeriod is, for source outqueue, how many times per control
	// period the queue is sampled; the period's samples are averaged
	// (default 20, at least 10).
	SamplesPerPeriod int `yaml:"samples_per_period,omitempty"`
	// Mode is, for source outqueue, "unsent" (default: bytes not yet sent,
	// SIOCOUTQNSD) or "unacked" (bytes not yet acknowledged, SIOCOUTQ).
	Mode string `yaml:"mode,omitempty"`
	// Scale is the normalised value of a full queue (outqueue) or of the
	// link capacity (bandwidth): default 100, the paper's queue of
	// capacity 100.
	Scale float64 `yaml:"scale,omitempty"`
	// LinkCapacity is, for source bandwidth, the capacity of the outgoing
	// link in bytes per second ("12.5MB", "100MiB"). Required for
	// bandwidth.
	LinkCapacity share.Bandwidth `yaml:"link_capacity,omitempty"`
}

// ResourceConfig binds a stage to the critical resource its requests
// use, Voigt & Gunningberg's resource rules (docs/algorithms.md §1): the
// stage's controller is then fed by the resource's sensor. Stages without
// a rule are covered only by the connection policer.
type ResourceConfig struct {
	// Stage is the name of a configured stage.
	Stage string `yaml:"stage"`
	// Resource is "cpu" (the stage's controller must be voigt-cpu or
	// kihl, fed with the sensor's utilization) or "bandwidth" (the
	// controller must be voigt-queue, fed with the normalised outgoing
	// queue or bandwidth).
	Resource string `yaml:"resource"`
	// Sensor is the rule's sensor. A cpu rule without one uses the
	// top-level utilization sensor; a bandwidth rule needs one (source
	// outqueue or bandwidth).
	Sensor *SensorConfig `yaml:"sensor,omitempty"`
	// Kihl configures the tuning of a kihl stage's gains.
	Kihl *KihlTuningConfig `yaml:"kihl,omitempty"`
}

// KihlTuningConfig chooses how a kihl stage gets its gains K and Ti.
type KihlTuningConfig struct {
	// Tuning is "params" (default: params.k and params.ti of the stage) or
	// "auto": σ, the resource's maximum departures per period, is
	// estimated from the measured service rate and the pole placement
	// K = (2 + a1)·σ, Ti = h·(2 + a1)/(1 + a1 + a2) picks the gains
	// (docs/algorithms.md §4). Until σ is known the stage runs with
	// params.k and params.ti (the paper's 20 and 2.8s by default).
	Tuning string `yaml:"tuning"`
	// A1 and A2 are the coefficients of the placed polynomial
	// z·(z² + a1·z + a2) (defaults −1.55 and 0.71).
	A1 *float64 `yaml:"a1,omitempty"`
	A2 *float64 `yaml:"a2,omitempty"`
	// Sigma fixes σ in requests per period instead of estimating it
	// (default 0: estimate).
	Sigma float64 `yaml:"sigma,omitempty"`
	// EstimatePeriods is the number of usable periods σ is estimated over
	// (default 5).
	EstimatePeriods int `yaml:"estimate_periods,omitempty"`
	// MinUtilization is the lowest utilization of a period used for the
	// estimate (default 0.2).
	MinUtilization float64 `yaml:"min_utilization,omitempty"`
}

// utilizationSources lists the sources a utilization sensor accepts.
var utilizationSources = []string{UtilizationHost, UtilizationCgroup, UtilizationAuto, UtilizationProcess, UtilizationPoolBusy, UtilizationBackendHeader}

func IsUtilizationSource(s string) bool { return slices.Contains(utilizationSources, s) }

// setDefaults fills a utilization sensor's defaults.
func (u *UtilizationConfig) setDefaults() {
	u.Source = cmp.Or(u.Source, UtilizationNone)
	if u.Source == UtilizationBackendHeader && u.Header == "" {
		u.Header = DefaultUtilizationHeader
	}
	if u.Source == UtilizationProcess && u.ProcessCPUs == 0 {
		u.ProcessCPUs = float64(runtime.NumCPU())
	}
}

// setDefaults fills a resource sensor's defaults.
func (s *SensorConfig) setDefaults() {
	if s.Source == SensorOutQueue || s.Source == SensorBandwidth {
		s.Scale = cmp.Or(s.Scale, monitor.DefaultQueueScale)
	}
	if s.Source == SensorOutQueue {
		s.SamplesPerPeriod = cmp.Or(s.SamplesPerPeriod, monitor.DefaultSamplesPerPeriod)
		if s.Mode == "" {
			s.Mode = string(monitor.QueueUnsent)
		}
	}
	s.UtilizationConfig.setDefaults()
}

func (k *KihlTuningConfig) setDefaults() {
	k.Tuning = cmp.Or(k.Tuning, KihlTuningParams)
	if k.Tuning != KihlTuningAuto {
		return
	}
	if k.A1 == nil {
		v := DefaultKihlA1
		k.A1 = &v
	}
	if k.A2 == nil {
		v := DefaultKihlA2
		k.A2 = &v
	}
	k.EstimatePeriods = cmp.Or(k.EstimatePeriods, DefaultKihlEstimatePeriods)
	k.MinUtilization = cmp.Or(k.MinUtilization, DefaultKihlMinUtilization)
}

// cpuRuleRef returns the utilization reference in percent of the first
// CPU rule (voigt-cpu util_ref, kihl 100·rho_ref), or 0 when there is
// none or the policy does not compile (Validate reports that).
func (c *Config) cpuRuleRef(pol *policy.Config) float64 {
	if len(c.Resources) == 0 {
		return 0
	}
	ctrls, err := pol.StageControllers()
	if err != nil {
		return 0
	}
	for _, r := range c.Resources {
		if r.Resource != ResourceCPU {
			continue
		}
		switch cc := ctrls[r.Stage].(type) {
		case *control.VoigtCPUConfig:
			return cc.UtilRef
		case *control.KihlConfig:
			return 100 * cc.RhoRef
		}
	}
	return 0
}

// SetDefaults fills the defaults of utilization, resources, policer and
// shares; pol is the admission policy, its defaults set (the policer's
// util_ref defaults to the first CPU rule's reference).
func (c *Config) SetDefaults(pol *policy.Config) {
	c.Utilization.setDefaults()
	for i := range c.Resources {
		r := &c.Resources[i]
		if r.Sensor != nil {
			r.Sensor.setDefaults()
		}
		if r.Kihl != nil {
			r.Kihl.setDefaults()
		}
	}
	if c.Policer != nil {
		c.Policer.setDefaults(c.cpuRuleRef(pol))
	}
	if c.Shares != nil {
		setShareDefaults(c.Shares)
	}
}

// setShareDefaults fills the zero fields of a share configuration from
// share.DefaultConfig (total_bandwidth and clients have no default, and
// reply_buffer none in the proxy, which never buffers a reply).
func setShareDefaults(s *share.Config) {
	d := share.DefaultConfig()
	d.ReplyBuffer = 0
	fillZero(s, d)
}

// validate checks a utilization sensor at path ("utilization",
// "resources[0].sensor") and probes it: a sensor that cannot work on this
// host (no /proc/stat, no such cgroup or process) is an error naming the
// sensor and why.
func (u *UtilizationConfig) validate(path string) error {
	switch u.Source {
	case UtilizationNone, UtilizationPoolBusy:
	case UtilizationHost:
		var cpus []int
		if u.CPUs != "" {
			var err error
			if cpus, err = monitor.ParseCPUList(u.CPUs); err != nil {
				return fieldErr(path+".cpus", "%q is invalid: %v", u.CPUs, err)
			}
		}
		if _, err := monitor.NewProcStat("/proc", cpus); err != nil {
			p := path + ".source"
			if u.CPUs != "" {
				p = path + ".cpus"
			}
			return fieldErr(p, "the host CPU sensor is unavailable: %v", err)
		}
	case UtilizationCgroup, UtilizationAuto:
		if u.CgroupCPUs < 0 || math.IsNaN(u.CgroupCPUs) || math.IsInf(u.CgroupCPUs, 0) {
			return fieldErr(path+".cgroup_cpus", "%v is invalid: must be the number of CPUs the group may use (> 0), or 0 for its limits", u.CgroupCPUs)
		}
		if _, err := NewCgroupSource(u, time.Now()); err != nil {
			return fielderr.Under(path, err)
		}
	case UtilizationProcess:
		if (u.PID == 0) == (u.Pidfile == "") {
			return fieldErr(path+".pid", "source: process needs exactly one of pid and pidfile")
		}
		if !(u.ProcessCPUs > 0) || math.IsInf(u.ProcessCPUs, 0) {
			return fieldErr(path+".process_cpus", "%v is invalid: must be the number of CPUs the process may use (> 0)", u.ProcessCPUs)
		}
		if _, err := NewProcessSource(u, time.Now()); err != nil {
			p := path + ".pid"
			if u.Pidfile != "" {
				p = path + ".pidfile"
			}
			return fieldErr(p, "the process CPU sensor is unavailable: %v", err)
		}
	case UtilizationBackendHeader:
		if u.Header == "" || strings.ContainsAny(u.Header, " :\t\r\n") {
			return fieldErr(path+".header", "%q is not a header name", u.Header)
		}
	default:
		return fieldErr(path+".source", "%q is invalid: must be none, %s", u.Source, strings.Join(utilizationSources, ", "))
	}
	only := func(field, source string, set bool) error {
		if set && u.Source != source {
			return fieldErr(path+"."+field, "is only used with source: %s", source)
		}
		return nil
	}
	onlyOf := func(field string, set bool, sources ...string) error {
		if set && !slices.Contains(sources, u.Source) {
			return fieldErr(path+"."+field, "is only used with source: %s", strings.Join(sources, " or "))
		}
		return nil
	}
	for _, e := range []error{
		only("cpus", UtilizationHost, u.CPUs != ""),
		only("cgroup", UtilizationCgroup, u.Cgroup != ""),
		onlyOf("cgroup_cpus", u.CgroupCPUs != 0, UtilizationCgroup, UtilizationAuto),
		only("header", UtilizationBackendHeader, u.Header != ""),
		only("pid", UtilizationProcess, u.PID != 0),
		only("pidfile", UtilizationProcess, u.Pidfile != ""),
		only("process_cpus", UtilizationProcess, u.ProcessCPUs != 0),
	} {
		if e != nil {
			return e
		}
	}
	return nil
}

// NewCgroupSource builds the cgroup sensor of u (source cgroup or auto):
// the directory u names, else the group this process runs in; for auto,
// the host's /proc/stat when that group is not CPU-limited or cannot be
// found. Its error is a *sluice.FieldError relative to u ("cgroup",
// "source").
func NewCgroupSource(u *UtilizationConfig, now time.Time) (monitor.UtilizationSource, error) {
	if u.Cgroup != "" {
		cg, err := monitor.NewCgroupAt(monitor.CgroupPaths{Version: 2, Dir: u.Cgroup}, u.CgroupCPUs, now)
		if err != nil {
			return nil, fieldErr("cgroup", "the cgroup CPU sensor is unavailable for %q: %v", u.Cgroup, err)
		}
		return cg, nil
	}
	p, err := monitor.DetectCgroup(monitor.DefaultCgroupRoot, "/proc/self/cgroup")
	var cg *monitor.Cgroup
	if err == nil {
		cg, err = monitor.NewCgroupAt(p, u.CgroupCPUs, now)
	}
	if u.Source == UtilizationCgroup {
		if err != nil {
			return nil, fieldErr("source", "the cgroup CPU sensor cannot find this process's cgroup (set cgroup: to a cgroup v2 directory): %v", err)
		}
		return cg, nil
	}
	if err == nil {
		limited, lerr := cg.Limited()
		if lerr != nil {
			return nil, fieldErr("source", "auto: the cgroup CPU sensor is unavailable: %v", lerr)
		}
		if limited {
			return cg, nil
		}
	}
	ps, perr := monitor.NewProcStat("/proc", nil)
	if perr != nil {
		return nil, fieldErr("source", "auto: neither a CPU-limited cgroup (%v) nor the host CPU sensor (%v) is available", err, perr)
	}
	return autoHost{ps}, nil
}

// autoHost is the host sensor auto chose: its description says why.
type autoHost struct{ *monitor.ProcStat }

func (a autoHost) Describe() string {
	return a.ProcStat.Describe() + " (auto: this process's cgroup has no CPU limit)"
}

// NewProcessSource builds the process sensor of u.
func NewProcessSource(u *UtilizationConfig, now time.Time) (*monitor.Process, error) {
	if u.Pidfile != "" {
		return monitor.NewPidfile("/proc", u.Pidfile, u.ProcessCPUs, now)
	}
	if u.PID < 0 {
		return nil, fmt.Errorf("pid %d is not a process id", u.PID)
	}
	return monitor.NewProcess("/proc", u.PID, u.ProcessCPUs, now)
}

// OutQueueConfig returns the outgoing-queue sensor configuration of s for
// a control period.
func (s *SensorConfig) OutQueueConfig(period time.Duration) monitor.OutQueueConfig {
	return monitor.OutQueueConfig{CapacityBytes: s.CapacityBytes, Scale: s.Scale, Period: period,
		SamplesPerPeriod: s.SamplesPerPeriod, Mode: monitor.QueueMode(s.Mode)}
}

// validate checks a resource rule's sensor at path for resource, given
// the control period of the rule's stage.
func (s *SensorConfig) validate(path, resource string, period time.Duration) error {
	netOnly := func(field string, set bool, sources ...string) error {
		if set && !slices.Contains(sources, s.Source) {
			return fieldErr(path+"."+field, "is only used with source: %s", strings.Join(sources, " or "))
		}
		return nil
	}
	for _, e := range []error{
		netOnly("capacity_bytes", s.CapacityBytes != 0, SensorOutQueue),
		netOnly("samples_per_period", s.SamplesPerPeriod != 0, SensorOutQueue),
		netOnly("mode", s.Mode != "", SensorOutQueue),
		netOnly("scale", s.Scale != 0, SensorOutQueue, SensorBandwidth),
		netOnly("link_capacity", s.LinkCapacity != 0, SensorBandwidth),
	} {
		if e != nil {
			return e
		}
	}
	switch resource {
	case ResourceCPU:
		if !IsUtilizationSource(s.Source) {
			return fieldErr(path+".source", "%q is invalid for a cpu rule: must be %s", s.Source, strings.Join(utilizationSources, ", "))
		}
		return s.UtilizationConfig.validate(path)
	case ResourceBandwidth:
	default:
		return nil
	}
	switch s.Source {
	case SensorOutQueue:
		if s.CapacityBytes <= 0 {
			return fieldErr(path+".capacity_bytes", "%d is invalid: the outgoing queue needs the number of unsent bytes that count as full (> 0), e.g. 100 ms of link capacity", s.CapacityBytes)
		}
		oc := s.OutQueueConfig(period)
		if err := oc.Validate(); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ")
			return fieldErr(path+"."+field, "%s", msg)
		}
		if _, err := monitor.NewSocketOutQueue(oc, new(policer.Registry), time.Now()); err != nil {
			return fieldErr(path+".source", "the outgoing-queue sensor is unavailable: %v", err)
		}
	case SensorBandwidth:
		if !(s.LinkCapacity > 0) || math.IsInf(float64(s.LinkCapacity), 0) {
			return fieldErr(path+".link_capacity", "%v is invalid: the outgoing-bandwidth sensor needs the link capacity in bytes per second (> 0), e.g. 12.5MB", float64(s.LinkCapacity))
		}
		if !(s.Scale > 0) || math.IsInf(s.Scale, 0) {
			return fieldErr(path+".scale", "%v is invalid: must be a finite number > 0", s.Scale)
		}
	default:
		return fieldErr(path+".source", "%q is invalid for a bandwidth rule: must be %s or %s", s.Source, SensorOutQueue, SensorBandwidth)
	}
	return nil
}

// Validate reports the first invalid field of utilization, resources,
// policer and shares as a *sluice.FieldError, probing the sensors. pol is
// the admission policy the rules bind, validated first. Call SetDefaults
// first.
func (c *Config) Validate(pol *policy.Config) error {
	if err := c.Utilization.validate("utilization"); err != nil {
		return err
	}
	var ctrls map[string]control.Config
	if len(c.Resources) > 0 {
		var err error
		if ctrls, err = pol.StageControllers(); err != nil {
			return err
		}
	}
	seen := map[string]int{}
	for i, r := range c.Resources {
		p := fmt.Sprintf("resources[%d]", i)
		if r.Stage == "" {
			return fieldErr(p+".stage", "the name of a configured stage is required")
		}
		ctrl, ok := ctrls[r.Stage]
		if !ok {
			var names []string
			for _, s := range pol.Stages {
				names = append(names, s.Name)
			}
			return fieldErr(p+".stage", "%q is not a configured stage (stages: %s)", r.Stage, strings.Join(names, ", "))
		}
		if j, dup := seen[r.Stage]; dup {
			return fieldErr(p+".stage", "%q is already bound by resources[%d]", r.Stage, j)
		}
		seen[r.Stage] = i
		name := controllerName(pol, r.Stage)
		period := ControllerPeriod(ctrl)
		switch r.Resource {
		case ResourceCPU, ResourceBandwidth:
			res := control.Resource(r.Resource)
			if !control.NeedsOf(ctrl).Binds(res) {
				return fieldErr(p+".resource", "a %s rule needs stage %q to use controller %s, not %s", r.Resource, r.Stage,
					control.NamesWhereText(func(n control.Needs) bool { return n.Binds(res) }), name)
			}
		}
		switch r.Resource {
		case ResourceCPU:
			if r.Sensor == nil && !IsUtilizationSource(c.Utilization.Source) {
				return fieldErr(p+".sensor", "a cpu rule needs a utilization sensor: set %s.sensor or utilization.source", p)
			}
		case ResourceBandwidth:
			if r.Sensor == nil {
				return fieldErr(p+".sensor", "a bandwidth rule needs a sensor: {source: outqueue, capacity_bytes: N} or {source: bandwidth, link_capacity: B}")
			}
		default:
			return fieldErr(p+".resource", "%q is invalid: must be %s or %s", r.Resource, ResourceCPU, ResourceBandwidth)
		}
		if r.Sensor != nil {
			if err := r.Sensor.validate(p+".sensor", r.Resource, period); err != nil {
				return err
			}
		}
		if r.Kihl != nil {
			if err := r.Kihl.validate(p+".kihl", pol, r.Stage, name, ctrl, period); err != nil {
				return err
			}
		}
	}
	if c.Policer != nil {
		if err := c.Policer.validate(); err != nil {
			return err
		}
	}
	if c.Shares != nil {
		if c.Shares.ReplyBuffer != 0 {
			return fieldErr("shares.reply_buffer", "%d: the proxy never buffers a reply (it takes the size from Content-Length or paces a reply of unknown size while streaming); reply_buffer is for the middleware", c.Shares.ReplyBuffer)
		}
		if err := c.Shares.Validate(); err != nil {
			return fielderr.Under("shares", err)
		}
	}
	return nil
}

// controllerName returns the controller name of the configured stage.
func controllerName(pol *policy.Config, stage string) string {
	for _, s := range pol.Stages {
		if s.Name == stage {
			return s.Controller
		}
	}
	return ""
}

// ControllerPeriod returns a controller configuration's period (1s if
// it cannot be built; validation has reported that).
func ControllerPeriod(cc control.Config) time.Duration {
	if cc == nil {
		return time.Second
	}
	ctrl, err := cc.New()
	if err != nil {
		return time.Second
	}
	return ctrl.Period()
}

// paramsSet reports whether the stage's params mapping sets key (merged
// keys too).
func paramsSet(pol *policy.Config, stage, key string) bool {
	for _, s := range pol.Stages {
		if s.Name == stage && slices.ContainsFunc(strictyaml.Keys(&s.Params), func(k *yaml.Node) bool { return k.Value == key }) {
			return true
		}
	}
	return false
}

func (k *KihlTuningConfig) validate(p string, pol *policy.Config, stage, ctrlName string, ctrl control.Config, period time.Duration) error {
	if _, ok := ctrl.(*control.KihlConfig); !ok { // the section tunes Kihl's PI gains
		return fieldErr(p, "is only for a stage with controller kihl; stage %q uses %s", stage, ctrlName)
	}
	switch k.Tuning {
	case KihlTuningParams:
		if k.A1 != nil || k.A2 != nil || k.Sigma != 0 || k.EstimatePeriods != 0 || k.MinUtilization != 0 {
			return fieldErr(p+".tuning", "a1, a2, sigma, estimate_periods and min_utilization are only used with tuning: auto")
		}
		return nil
	case KihlTuningAuto:
	default:
		return fieldErr(p+".tuning", "%q is invalid: must be %s or %s", k.Tuning, KihlTuningParams, KihlTuningAuto)
	}
	for _, key := range []string{"k", "ti"} {
		if paramsSet(pol, stage, key) {
			return fieldErr(p+".tuning", "auto picks K and Ti: remove params.%s from stage %q (or use tuning: params)", key, stage)
		}
	}
	if k.A1 == nil || k.A2 == nil || !mathx.Finite(*k.A1) || !mathx.Finite(*k.A2) {
		return fieldErr(p+".a1", "a1 and a2 must be finite numbers")
	}
	if err := control.CheckKihlPlacement(period, *k.A1, *k.A2); err != nil {
		return fieldErr(p+".a1", "(a1, a2) = (%g, %g) cannot be placed: %v", *k.A1, *k.A2, err)
	}
	if !mathx.Finite(k.Sigma) || k.Sigma < 0 {
		return fieldErr(p+".sigma", "%v is invalid: must be σ in requests per period (> 0), or 0 to estimate it", k.Sigma)
	}
	if k.EstimatePeriods < 1 {
		return fieldErr(p+".estimate_periods", "%d is invalid: must be ≥ 1", k.EstimatePeriods)
	}
	if !(k.MinUtilization > 0 && k.MinUtilization < 1) {
		return fieldErr(p+".min_utilization", "%v is invalid: must be within (0, 1)", k.MinUtilization)
	}
	return nil
}
