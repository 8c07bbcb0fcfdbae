// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are cluster mode's Prometheus metrics. One Metrics serves the
// runners of successive configurations (reloads): counters continue,
// and the gauges show the running runner's view.
//
//	sluice_cluster_instances                     instances counted (N)
//	sluice_cluster_fallback                      1 while enforcing the fallback rule (fallback or starting)
//	sluice_cluster_mode{mode}                    1 for the current mode
//	sluice_cluster_syncs_total{result}           syncs, "ok" or "error"
//	sluice_cluster_sync_duration_seconds         Redis exchange time of a sync
//	sluice_cluster_budget{stage,scope}           a global budget ("global") and this instance's part ("part")
//	sluice_cluster_budget_demand{stage,scope}    offered req/s here ("instance") and over the cluster ("cluster")
//	sluice_cluster_share_allocation_bytes_per_second{client,scope}  b_i ("global") and this instance's part ("part")
type Metrics struct {
	syncs    *prometheus.CounterVec
	duration prometheus.Histogram
	cur      atomic.Pointer[Runner]

	instances, fallback, mode, budget, demand, shareAlloc *prometheus.Desc
}

var modes = []Mode{ModeStarting, ModeSynced, ModeFallback}

// NewMetrics returns cluster metrics registered with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_cluster_syncs_total",
			Help: "Cluster syncs with Redis, by result (ok, error)."}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_cluster_sync_duration_seconds",
			Help:    "Time of a cluster sync's Redis exchange.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}),
		instances: prometheus.NewDesc("sluice_cluster_instances", "Instances this one counts in the cluster (N).", nil, nil),
		fallback: prometheus.NewDesc("sluice_cluster_fallback",
			"1 while this instance enforces 1/N of every global budget locally (Redis unreachable, or no sync yet).", nil, nil),
		mode:   prometheus.NewDesc("sluice_cluster_mode", "1 for the cluster mode this instance is in.", []string{"mode"}, nil),
		budget: prometheus.NewDesc("sluice_cluster_budget", "A global static budget (scope global) and this instance's part of it (scope part), req/s or requests in flight.", []string{"stage", "scope"}, nil),
		demand: prometheus.NewDesc("sluice_cluster_budget_demand_rps",
			"Offered requests per second of a global-budget stage, here (scope instance) and over the cluster (scope cluster).", []string{"stage", "scope"}, nil),
		shareAlloc: prometheus.NewDesc("sluice_cluster_share_allocation_bytes_per_second",
			"A client's allocation b_i over the cluster (scope global) and this instance's part (scope part).", []string{"client", "scope"}, nil),
	}
	for _, r := range []string{"ok", "error"} {
		m.syncs.WithLabelValues(r)
	}
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.syncs.Describe(ch)
	m.duration.Describe(ch)
	for _, d := range []*prometheus.Desc{m.instances, m.fallback, m.mode, m.budget, m.demand, m.shareAlloc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.syncs.Collect(ch)
	m.duration.Collect(ch)
	r := m.cur.Load()
	if r == nil {
		return
	}
	v := r.View()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(m.instances, float64(v.Instances))
	fb := 0.0
	if v.Mode != ModeSynced {
		fb = 1
	}
	g(m.fallback, fb)
	for _, md := range modes {
		x := 0.0
		if v.Mode == md {
			x = 1
		}
		g(m.mode, x, string(md))
	}
	for _, b := range v.Budgets {
		g(m.budget, b.Global, b.Stage, "global")
		g(m.budget, b.Part, b.Stage, "part")
		g(m.demand, b.Demand, b.Stage, "instance")
		g(m.demand, b.ClusterDemand, b.Stage, "cluster")
	}
	if v.Shares != nil {
		for _, c := range v.Shares.Clients {
			g(m.shareAlloc, c.Allocation, c.Name, "global")
			g(m.shareAlloc, c.Part, c.Name, "part")
		}
	}
}

// observe counts one sync; m may be nil.
func (m *Metrics) observe(ok bool, took time.Duration) {
	if m == nil {
		return
	}
	if ok {
		m.syncs.WithLabelValues("ok").Inc()
	} else {
		m.syncs.WithLabelValues("error").Inc()
	}
	m.duration.Observe(took.Seconds())
}

// setView makes r the runner whose view the gauges show; m may be nil.
func (m *Metrics) setView(r *Runner) {
	if m != nil {
		m.cur.Store(r)
	}
}
