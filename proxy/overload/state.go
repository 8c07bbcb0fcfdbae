// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"cmp"
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/mathx"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/stage"
)

// ResourceState is one resource rule as /state shows it: the stage it
// binds, its rate, hits and rejections, the sensor value it was fed and
// its last decisions with their reasons.
type ResourceState struct {
	Stage      string `json:"stage"`
	Resource   string `json:"resource"`
	Controller string `json:"controller"`
	Sensor     string `json:"sensor"`
	// Rate is the rule's token rate in force (req/s).
	Rate float64 `json:"rate"`
	// HitsPerSec are the requests offered to the rule per second over its
	// last period; Offered and Rejected count them since start (up to the
	// last period).
	HitsPerSec float64 `json:"hits_per_second"`
	Offered    uint64  `json:"offered"`
	Rejected   uint64  `json:"rejected"`
	// Input is the sensor value of the last period: utilization in [0, 1]
	// for a cpu rule, the normalised queue for a bandwidth rule; absent
	// when the sensor had no reading (SensorError says why).
	Input       *float64                 `json:"input,omitempty"`
	SensorError string                   `json:"sensor_error,omitempty"`
	Kihl        *control.KihlTuningState `json:"kihl,omitempty"`
	Decisions   []stage.DecisionState    `json:"decisions"`
}

// ResourceStates returns the rules' states with their last n decisions,
// from the stages of pol.
func (o *Runtime) ResourceStates(pol *policy.Policy, n int) []ResourceState {
	var out []ResourceState
	for _, r := range o.rules {
		rs := ResourceState{Stage: r.cfg.Stage, Resource: r.cfg.Resource}
		if r.sensor != nil {
			rs.Sensor = r.sensor.name
		}
		if r.tune != nil {
			k := r.tune.State()
			rs.Kihl = &k
		}
		if st := pol.Stage(r.cfg.Stage); st != nil {
			s := st.State(n)
			rs.Controller, rs.Rate, rs.Decisions = s.Controller, s.Setting, s.Decisions
			for _, c := range s.Classes {
				rs.Offered += c.Offered
				rs.Rejected += c.Rejected
				if l := c.Last; l != nil {
					if sec := l.Elapsed.Seconds(); sec > 0 {
						rs.HitsPerSec += l.Offered / sec
					}
					switch {
					case l.SensorError != "":
						rs.SensorError = l.SensorError
					case r.cfg.Resource == ResourceCPU && l.Utilization != nil:
						v := *l.Utilization
						rs.Input = &v
					case r.cfg.Resource == ResourceBandwidth && mathx.Finite(l.Queue):
						v := l.Queue
						rs.Input = &v
					}
				}
			}
			if r.cfg.Resource == ResourceBandwidth && rs.Input == nil && r.sensor != nil {
				if ss := r.sensor.State(); ss.Error != "" {
					rs.SensorError = ss.Error
				}
			}
		}
		out = append(out, rs)
	}
	return out
}

// SanitizeStages replaces a NaN queue (a bandwidth rule's sensor without
// a reading) in the stages' last periods, which JSON cannot carry, by 0
// with the reason in sensor_error.
func SanitizeStages(sts []stage.State) {
	for i := range sts {
		for j := range sts[i].Classes {
			if l := sts[i].Classes[j].Last; l != nil && !mathx.Finite(l.Queue) {
				cp := *l
				cp.Queue = 0
				cp.SensorError = cmp.Or(cp.SensorError, "queue sensor: no reading in the period")
				sts[i].Classes[j].Last = &cp
			}
		}
	}
}

// runtimeDescs are the descriptions of the runtime's metrics, in the
// order Describe sends them: newDesc adds each as it is made.
var runtimeDescs []*prometheus.Desc

// newDesc returns the description of one of the runtime's metrics (no
// constant labels) and adds it to runtimeDescs.
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labels, nil)
	runtimeDescs = append(runtimeDescs, d)
	return d
}

var (
	descPolicerRate = newDesc("proxy_policer_rate",
		"Token rate of the connection policer (connections per second).")
	descPolicerBurst = newDesc("proxy_policer_burst",
		"Bucket size of the connection policer (connections).")
	descPolicerOffered = newDesc("proxy_policer_offered_total",
		"Connections offered to the connection policer (the paper's hits).")
	descPolicerAdmitted = newDesc("proxy_policer_admitted_total",
		"Connections the connection policer admitted.")
	descPolicerRejected = newDesc("proxy_policer_rejected_total",
		"Connections refused by the connection policer, by reason (rate: reset at accept, the global bucket was empty; source: reset at accept, the source address's bucket; kernel: SYNs dropped by the kernel path, retransmissions included).", "reason")
	descPolicerAcceptErrors = newDesc("proxy_policer_accept_errors_total",
		"Errors returned by accept(2) on the policed listeners.")
	descPolicerTracked = newDesc("proxy_policer_tracked_sources",
		"Per-address buckets held by the connection policer.")
	descPolicerEvictions = newDesc("proxy_policer_source_evictions_total",
		"Reuses of the per-address bucket table's slots (lossy: the bucket was not full).", "kind")
	descPolicerDecisions = newDesc("proxy_policer_decisions_total",
		"Control steps of the connection policer's controller.")
	descPolicerQueue = newDesc("proxy_policer_queue",
		"Backend pool wait queue fed to the policer's controller at its last step (requests).")
	descPolicerUtil = newDesc("proxy_policer_utilization",
		"CPU utilization (0–1) fed to the policer's guard at its last step (NaN when unavailable).")
	descLiveConns = newDesc("proxy_client_connections",
		"Client connections admitted and not yet closed (tracked when a policer or network sensor is configured).")
	descSensorValue = newDesc("proxy_sensor_value",
		"Last reading of a sensor: utilization (0–1) or normalised queue (NaN when the last reading failed).", "sensor", "source", "unit")
	descSensorBytes = newDesc("proxy_sensor_bytes",
		"Last reading of a network sensor in bytes: mean queued bytes (outqueue) or bytes per second (bandwidth).", "sensor", "source")
	descSensorErrors = newDesc("proxy_sensor_errors_total",
		"Failed readings of a sensor.", "sensor", "source")
	descRuleRate = newDesc("proxy_resource_rate",
		"Token rate of a resource rule's stage (requests per second).", "stage", "resource")
	descRuleHits = newDesc("proxy_resource_hits_per_second",
		"Requests offered to a resource rule per second over its last period.", "stage", "resource")
	descRuleOffered = newDesc("proxy_resource_offered_total",
		"Requests offered to a resource rule (totals advance each period).", "stage", "resource")
	descRuleRejected = newDesc("proxy_resource_rejected_total",
		"Requests a resource rule rejected (totals advance each period).", "stage", "resource")
	descRuleInput = newDesc("proxy_resource_input",
		"Sensor value a resource rule was fed at its last period: utilization (0–1) or normalised queue (NaN without a reading).", "stage", "resource")
	descKihlGain = newDesc("proxy_kihl_auto",
		"Auto tuning of a kihl stage: sigma (requests per period), K and ti_seconds (0 until sigma is known).", "stage", "param")
)

// Describe implements prometheus.Collector: the runtime reports the
// policer, the sensors and the resource rules.
func (o *Runtime) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range runtimeDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector; the rules are read from the
// policy in force (none before the first).
func (o *Runtime) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	count := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	if o.registry != nil {
		gauge(descLiveConns, float64(o.registry.Len()))
	}
	if r := o.pol; r != nil {
		st := r.p.Stats()
		gauge(descPolicerRate, st.Rate)
		gauge(descPolicerBurst, float64(st.Burst))
		count(descPolicerOffered, st.Offered)
		count(descPolicerAdmitted, st.Admitted)
		count(descPolicerRejected, st.RejectedRate, "rate")
		count(descPolicerRejected, st.RejectedSource, "source")
		count(descPolicerRejected, st.RejectedKernel, "kernel")
		count(descPolicerAcceptErrors, st.AcceptErrors)
		gauge(descPolicerTracked, float64(st.TrackedSources))
		count(descPolicerEvictions, st.Evictions, "all")
		count(descPolicerEvictions, st.LossyEvictions, "lossy")
		count(descPolicerDecisions, r.decisions.Load())
		if m, _, have := r.p.LastStep(); have {
			gauge(descPolicerQueue, m.Queue)
			gauge(descPolicerUtil, m.Utilization)
		}
	}
	for _, s := range o.sensors {
		st := s.State()
		v := math.NaN()
		if st.Value != nil {
			v = *st.Value
		}
		gauge(descSensorValue, v, s.name, s.source, s.unit)
		if st.Bytes != nil {
			gauge(descSensorBytes, *st.Bytes, s.name, s.source)
		}
		count(descSensorErrors, st.Errors, s.name, s.source)
	}
	pol := o.host.Policy()
	if pol == nil {
		return
	}
	for _, rs := range o.ResourceStates(pol, 0) {
		gauge(descRuleRate, rs.Rate, rs.Stage, rs.Resource)
		gauge(descRuleHits, rs.HitsPerSec, rs.Stage, rs.Resource)
		count(descRuleOffered, rs.Offered, rs.Stage, rs.Resource)
		count(descRuleRejected, rs.Rejected, rs.Stage, rs.Resource)
		in := math.NaN()
		if rs.Input != nil {
			in = *rs.Input
		}
		gauge(descRuleInput, in, rs.Stage, rs.Resource)
		if k := rs.Kihl; k != nil {
			gauge(descKihlGain, k.Sigma, rs.Stage, "sigma")
			gauge(descKihlGain, k.K, rs.Stage, "K")
			gauge(descKihlGain, k.Ti, rs.Stage, "ti_seconds")
		}
	}
}
