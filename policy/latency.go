// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The latency histograms: how long requests take, by stage and class,
// recorded per request so that replicas aggregate (sum the buckets, then
// take histogram_quantile) where the per-period numbers of /state cannot.
// Each is a Prometheus native histogram (exponential buckets, schema 3:
// a factor of 2^(1/8) ≈ 1.09 between bucket bounds, so a quantile is
// read within about 4.5 %) and, for scrapers without native histograms,
// classic buckets around typical SLOs (LatencyBuckets).
//
// The observers of every stage, class and outcome are resolved once per
// policy (a configuration's), so the request path never looks up a label
// value: recording costs the proxy three observations, the middleware
// one, or two in a stage with a concurrency limit (no upstream: the
// handler is the service), and no allocation; a request that did not
// wait goes to the zero bucket of the queue wait, the cheapest
// observation.
const (
	metricRequestDuration  = "sluice_request_duration_seconds"
	metricUpstreamDuration = "sluice_upstream_duration_seconds"
	metricQueueWait        = "sluice_queue_wait_seconds"

	// LatencyBucketFactor is the native histograms' growth factor
	// between bucket bounds (client_golang picks the largest schema whose
	// factor does not exceed it: 2^(1/8)).
	LatencyBucketFactor = 1.1
	// LatencyMaxBuckets bounds a native histogram's populated buckets:
	// beyond it the histogram resets if LatencyMinReset has passed since
	// its last reset, else widens its zero bucket up to LatencyMaxZero,
	// else halves its resolution. 160 buckets of schema 3 span 2^20
	// (1 µs to 1 s, or 10 µs to 10 s), more than any one stage's spread.
	LatencyMaxBuckets = 160
	// LatencyMinReset is the shortest time between two resets of a
	// native histogram that has run out of buckets.
	LatencyMinReset = time.Hour
	// LatencyMaxZero is the widest the zero bucket may grow, in seconds,
	// before the resolution is lowered: at its widest, observations under
	// 1 ms fall into the zero bucket.
	LatencyMaxZero = 1e-3
)

// LatencyBuckets are the classic buckets' upper bounds, in seconds.
var LatencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// LatencyOutcome is the outcome label of sluice_request_duration_seconds.
type LatencyOutcome uint8

const (
	// LatencyOK is an answer of the backend (the handler behind the
	// middleware) below 500.
	LatencyOK LatencyOutcome = iota
	// LatencyError is a 5xx of the backend, a 502 or 504 of sluice's, a
	// failed exchange, or a client that left before its answer.
	LatencyError
	// LatencyRejected is a request sluice refused (503 or 429 from a
	// stage, the backend pool or a client share; a gRPC
	// RESOURCE_EXHAUSTED).
	LatencyRejected
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "error", "rejected"}

// String returns the label value: ok, error or rejected.
func (o LatencyOutcome) String() string { return outcomeNames[o] }

// Latency records the latency histograms of one stage and class. Its
// methods are safe for concurrent use and do not allocate; a nil
// *Latency records nothing.
type Latency struct {
	request   [numOutcomes]prometheus.Observer
	upstream  prometheus.Observer
	queueWait prometheus.Observer
}

// Request records a request's time from its arrival to its answer
// (sluice_request_duration_seconds).
func (l *Latency) Request(o LatencyOutcome, d time.Duration) {
	if l != nil && o < numOutcomes {
		l.request[o].Observe(d.Seconds())
	}
}

// Upstream records the time of a request's upstream exchange, its wait
// before it excluded (sluice_upstream_duration_seconds), when the
// policy was built with Options.RecordsUpstream.
func (l *Latency) Upstream(d time.Duration) {
	if l != nil && l.upstream != nil {
		l.upstream.Observe(d.Seconds())
	}
}

// QueueWait records the time from a request's arrival to the start of
// its upstream exchange (sluice_queue_wait_seconds): with
// Options.RecordsUpstream, of every stage; otherwise of the stages with a
// concurrency limit, the only ones whose requests can wait in-process.
func (l *Latency) QueueWait(d time.Duration) {
	if l != nil && l.queueWait != nil {
		l.queueWait.Observe(d.Seconds())
	}
}

// latencyVecs are the histograms of a policy and of the policies that
// replace it on reload (Options.Previous), so that a reload keeps their
// counts.
type latencyVecs struct {
	request, upstream, queueWait *prometheus.HistogramVec
}

func latencyOpts(name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Name: name, Help: help, Buckets: LatencyBuckets,
		NativeHistogramBucketFactor:     LatencyBucketFactor,
		NativeHistogramMaxBucketNumber:  LatencyMaxBuckets,
		NativeHistogramMinResetDuration: LatencyMinReset,
		NativeHistogramMaxZeroThreshold: LatencyMaxZero,
	}
}

func newLatencyVecs() *latencyVecs {
	return &latencyVecs{
		request: prometheus.NewHistogramVec(latencyOpts(metricRequestDuration,
			"Time from a request's arrival at sluice to the last byte of its answer, in seconds, by stage, class and outcome: ok (the backend's answer, below 500), error (a 5xx of the backend, sluice's 502 or 504, or a client that left first), rejected (refused by sluice: 503 or 429 from a stage, the pool or a client share). Upgrades and event streams are not observed."),
			[]string{"stage", "class", "outcome"}),
		upstream: prometheus.NewHistogramVec(latencyOpts(metricUpstreamDuration,
			"Time of the upstream exchange alone, in seconds: from sending the request to the end of the response body, less the time spent waiting on the client (the proxy's)."),
			[]string{"stage", "class"}),
		queueWait: prometheus.NewHistogramVec(latencyOpts(metricQueueWait,
			"Time from a request's arrival to the start of its upstream exchange, in seconds: its wait in the stage's queue and for a backend slot (behind the middleware: until the handler starts)."),
			[]string{"stage", "class"}),
	}
}

// resolve returns the observers of stage and each of classes: with
// upstream, those of the upstream histogram too, with queues those of the
// queue wait. The series exist from then on, at 0, so that rate() sees
// them before the first request.
func (v *latencyVecs) resolve(stage string, classes []string, upstream, queues bool) []Latency {
	out := make([]Latency, len(classes))
	for i, c := range classes {
		l := &out[i]
		for o := range numOutcomes {
			l.request[o] = v.request.WithLabelValues(stage, c, o.String())
		}
		if upstream {
			l.upstream = v.upstream.WithLabelValues(stage, c)
		}
		if queues {
			l.queueWait = v.queueWait.WithLabelValues(stage, c)
		}
	}
	return out
}

// forget removes the series of stage and class.
func (v *latencyVecs) forget(stage, class string) {
	for o := range numOutcomes {
		v.request.DeleteLabelValues(stage, class, o.String())
	}
	v.upstream.DeleteLabelValues(stage, class)
	v.queueWait.DeleteLabelValues(stage, class)
}

func (v *latencyVecs) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.request, v.upstream, v.queueWait}
}

// bindLatency resolves every entry's observers, and removes the series
// of prev's stages and classes that p no longer has. With upstream (the
// proxy's) every stage records the upstream exchange and the wait before
// it (its backend pool's included); otherwise (the middleware's) only a
// stage with a concurrency limit records waits: a request admitted by
// any other gate never waits in-process, and observing its zero would
// cost the request path for nothing.
func (p *Policy) bindLatency(prev *Policy, upstream bool) {
	for _, e := range p.entries {
		queues := upstream || e.st.State(0).InFlightLimited != nil
		e.lat = p.lat.resolve(e.name, p.classes, upstream, queues)
	}
	if prev == nil {
		return
	}
	kept := map[[2]string]bool{}
	for _, e := range p.entries {
		for _, c := range p.classes {
			kept[[2]string{e.name, c}] = true
		}
	}
	for _, e := range prev.entries {
		for _, c := range prev.classes {
			if !kept[[2]string{e.name, c}] {
				p.lat.forget(e.name, c)
			}
		}
	}
}

// latency returns the observers of class (out of range: the lowest) in e.
func (e *entry) latency(class int) *Latency {
	if len(e.lat) == 0 {
		return nil
	}
	if class < 0 || class >= len(e.lat) {
		class = len(e.lat) - 1
	}
	return &e.lat[class]
}
