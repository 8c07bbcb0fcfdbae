// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metric descriptors. Counters are totals up to the last collected control
// period (a stage collects at every step). Response times are the latency
// histograms (latency.go), recorded per request: the per-period
// quantiles a controller reads are in each stage's State (the admin API's
// /state and its dashboard), not in metrics, since no query can
// aggregate quantiles across replicas.
var (
	descRequests = prometheus.NewDesc("sluice_requests_total",
		"Requests per stage, class and outcome: offered, admitted, rejected, shadow_rejected (would have been rejected; shadow mode admitted them), completed, error; deadline: the part of rejected refused because the request's deadline passed or would pass before service; fair_evicted: the part of rejected evicted from the queue under fair queueing among tenants for a tenant behind them in virtual time (both counted at once, the others at each control period).",
		[]string{"stage", "class", "outcome"}, nil)
	descHopInvalid = prometheus.NewDesc("sluice_hop_invalid_total",
		"Hop headers (priority, tenant, timeout) that were malformed and treated as absent.",
		[]string{"header"}, nil)
	descHopUntrusted = prometheus.NewDesc("sluice_hop_untrusted_total",
		"Priority and tenant headers sent by a peer that is not a trusted proxy, and ignored.",
		[]string{"header"}, nil)
	descGate = prometheus.NewDesc("sluice_gate_setting",
		"The gate setting in force for the class, in the unit of its kind (rate: req/s, drop_probability, concurrency: requests, quality: level, none: 0).",
		[]string{"stage", "class", "kind"}, nil)
	descQuality = prometheus.NewDesc("sluice_quality",
		"Quality level in (0, 1] a degrading stage hands to its backend (1 = full service).",
		[]string{"stage"}, nil)
	descGateOff = prometheus.NewDesc("sluice_gate_off",
		"1 when the stage's admission control is switched off (every request admitted), 0 otherwise.",
		[]string{"stage"}, nil)
	descDecisions = prometheus.NewDesc("sluice_controller_decisions_total",
		"Controller steps taken by the stage.",
		[]string{"stage"}, nil)
	descInFlight = prometheus.NewDesc("sluice_in_flight",
		"Requests holding a concurrency slot of the stage (stages with a concurrency limit only).",
		[]string{"stage"}, nil)
	descQueued = prometheus.NewDesc("sluice_queue_length",
		"Requests waiting for a concurrency slot of the stage (stages with a concurrency limit only).",
		[]string{"stage"}, nil)
	descMaxWait = prometheus.NewDesc("sluice_queue_max_wait_seconds",
		"Longest a new arrival may wait for a concurrency slot (0: rejected at once when no slot is free).",
		[]string{"stage"}, nil)
	descDemand = prometheus.NewDesc("sluice_demand_ratio",
		"Offered load over the capacity the stage's controller grants, over its last control period (stage.State.DemandRatio): concurrency (offered req/s × mean response time) / limit, rate offered req/s / rate, else offered / admitted. Above 1 more capacity would serve refused or queued work; the metric to autoscale on.",
		[]string{"stage"}, nil)
	descEstimate = prometheus.NewDesc("sluice_controller_estimate",
		"A controller's own estimate, by name (auto: limit, throughput_rps, service_mean_s, service_p99_s; with its guardrails min_rate_open, max_reject_fraction, warmup_left_s, latency_guard).",
		[]string{"stage", "name"}, nil)
	descMaxRejectAdmitted = prometheus.NewDesc("sluice_max_reject_admitted_total",
		"Requests admitted past the limit because rejecting them would have exceeded the controller's bound on the share of a step's arrivals rejected (auto's max_reject_fraction).",
		[]string{"stage"}, nil)
	descHogCancelled = prometheus.NewDesc("sluice_hog_cancelled_total",
		"Requests the stage's hog rule cancelled while they were in service, by reason: max_service_time (held their slot longer than hog.max_service_time), over_share (the longest-running request of the tenant furthest over its fair share while others waited, hog.over_share). Stages with a hog rule only.",
		[]string{"stage", "reason"}, nil)
	descTenantsQueued = prometheus.NewDesc("sluice_tenants_queued",
		"Tenants with a request waiting in the stage's queue under fair queueing (tenants.fair).",
		[]string{"stage"}, nil)
)

var allDescs = []*prometheus.Desc{descRequests, descGate, descQuality, descGateOff,
	descDecisions, descInFlight, descQueued, descMaxWait, descEstimate, descDemand, descHopInvalid, descHopUntrusted,
	descMaxRejectAdmitted, descTenantsQueued, descHogCancelled}

// collector reports the metrics of the policy current() returns.
type collector struct {
	current func() *Policy
}

// Collector returns a prometheus.Collector of p's per-stage and per-class
// metrics (sluice_requests_total, the latency histograms
// sluice_request_duration_seconds, sluice_upstream_duration_seconds and
// sluice_queue_wait_seconds, sluice_gate_setting, sluice_quality,
// sluice_gate_off, sluice_controller_decisions_total, sluice_in_flight,
// sluice_queue_length, sluice_queue_max_wait_seconds,
// sluice_controller_estimate, sluice_demand_ratio, sluice_tenants_queued,
// sluice_hog_cancelled_total) and the hop headers it refused
// (sluice_hop_invalid_total, sluice_hop_untrusted_total). Nothing is registered: pass it to a registry. Two
// policies' collectors describe the same metrics, so register only one at
// a time; a proxy that reloads should register CollectorFor once instead.
func (p *Policy) Collector() prometheus.Collector {
	return &collector{current: func() *Policy { return p }}
}

// CollectorFor returns a collector of the policy current returns at each
// scrape (nil: no metrics), for callers that swap policies on reload.
func CollectorFor(current func() *Policy) prometheus.Collector {
	return &collector{current: current}
}

// latencyDescs describe the latency histograms of every policy (the
// same names, help and labels).
var latencyDescs = newLatencyVecs().collectors()

// Describe sends the descriptors of every metric.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
	for _, l := range latencyDescs {
		l.Describe(ch)
	}
}

// Collect sends the current values.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	p := c.current()
	if p == nil {
		return
	}
	for _, l := range p.lat.collectors() {
		l.Collect(ch)
	}
	for _, e := range p.entries {
		st := e.st.State(0)
		name := e.name
		for ci, cs := range st.Classes {
			class := cs.Name
			for _, o := range []struct {
				outcome string
				v       uint64
			}{{"offered", cs.Offered}, {"admitted", cs.Admitted}, {"rejected", cs.Rejected},
				{"shadow_rejected", cs.ShadowRejected}, {"completed", cs.Completed}, {"error", cs.Errors},
				{"deadline", cs.Deadline}, {"fair_evicted", cs.FairEvicted}} {
				ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(o.v), name, class, o.outcome)
			}
			setting := st.Setting
			if ci < len(st.ClassRates) {
				setting = st.ClassRates[ci]
			}
			ch <- prometheus.MustNewConstMetric(descGate, prometheus.GaugeValue, setting, name, class, st.Kind)
		}
		ch <- prometheus.MustNewConstMetric(descQuality, prometheus.GaugeValue, st.Quality, name)
		off := 0.0
		if st.GateOff {
			off = 1
		}
		ch <- prometheus.MustNewConstMetric(descGateOff, prometheus.GaugeValue, off, name)
		ch <- prometheus.MustNewConstMetric(descDecisions, prometheus.CounterValue, float64(e.decisions.Load()), name)
		if l := st.InFlightLimited; l != nil {
			ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(l.InFlight), name)
			ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(l.Queued), name)
			ch <- prometheus.MustNewConstMetric(descMaxWait, prometheus.GaugeValue, l.MaxWaitSeconds, name)
		}
		if d, ok := st.DemandRatio(); ok {
			ch <- prometheus.MustNewConstMetric(descDemand, prometheus.GaugeValue, d, name)
		}
		for k, v := range st.Estimates {
			ch <- prometheus.MustNewConstMetric(descEstimate, prometheus.GaugeValue, v, name, k)
		}
		ch <- prometheus.MustNewConstMetric(descMaxRejectAdmitted, prometheus.CounterValue, float64(st.MaxRejectAdmitted), name)
		if l := st.InFlightLimited; l != nil {
			ch <- prometheus.MustNewConstMetric(descTenantsQueued, prometheus.GaugeValue, float64(st.TenantsQueued), name)
		}
		for reason, n := range st.HogCancelled {
			ch <- prometheus.MustNewConstMetric(descHogCancelled, prometheus.CounterValue, float64(n), name, reason)
		}
	}
	for i, hh := range hopHeaders {
		ch <- prometheus.MustNewConstMetric(descHopInvalid, prometheus.CounterValue, float64(p.hops.invalid[i].Load()), hh.String())
		ch <- prometheus.MustNewConstMetric(descHopUntrusted, prometheus.CounterValue, float64(p.hops.untrusted[i].Load()), hh.String())
	}
}
