// SPDX-License-Identifier: Apache-2.0

package share

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshot is the state of a Shares at one moment, for /state and metrics.
// Bandwidths are in bytes per second, times in seconds.
type Snapshot struct {
	// TotalBandwidth is B.
	TotalBandwidth float64 `json:"total_bandwidth_bytes_per_second"`
	// MaxMeasured is Â, the maximum measured bandwidth.
	MaxMeasured float64 `json:"max_measured_bytes_per_second"`
	// Utilized is Σ avg_j over every client, others included.
	Utilized float64 `json:"utilized_bytes_per_second"`
	// Unsatisfied reports whether some active client is below its
	// allocation (the unsatisfied branch of d_i is in force).
	Unsatisfied bool `json:"unsatisfied"`
	// Ticks is the number of manager steps so far; LastTick the now of the
	// last one (zero before the first).
	Ticks    uint64    `json:"ticks"`
	LastTick time.Time `json:"last_tick"`
	// Clients has one entry per configured client, in configuration order,
	// then others.
	Clients []ClientSnapshot `json:"clients"`
}

// ClientSnapshot is the state of one client.
type ClientSnapshot struct {
	Name string `json:"name"`
	// Share is the allocation in percent of B; Allocation is b_i.
	Share      float64 `json:"share_percent"`
	Allocation float64 `json:"allocation_bytes_per_second"`
	// Measured is avg_i; Available is d_i as computed now.
	Measured  float64 `json:"measured_bytes_per_second"`
	Available float64 `json:"available_bytes_per_second"`
	// DelayPerKB is the delay a 1000-byte reply would get now,
	// (1/d_i − 1/Â)·1000 s, at least 0; 0 when Rejecting.
	DelayPerKB float64 `json:"delay_per_kb_seconds"`
	// Rejecting is true when d_i = 0: every request is rejected.
	Rejecting bool `json:"rejecting"`
	// LastDelay is the last delay computed for the client.
	LastDelay float64 `json:"last_delay_seconds"`
	// Active is the client's active flag (a request admitted since the
	// last manager step).
	Active bool `json:"active"`
	// Held is true while cluster mode counts the client active because
	// it sends elsewhere in the cluster (Shares.HoldActive).
	Held bool `json:"held_active,omitempty"`
	// Standby is the number of standby slots in use.
	Standby int `json:"standby"`
	// LastReply is the now of the client's last Done (zero before).
	LastReply time.Time `json:"last_reply"`
	// Arrivals counts the client's requests, admitted or rejected (its
	// demand).
	Arrivals uint64 `json:"arrivals"`
	// Replies and Bytes count completed replies and their body bytes.
	Replies uint64 `json:"replies"`
	Bytes   uint64 `json:"bytes"`
	// Rejections counts rejected requests by reason: standby,
	// no_bandwidth, max_delay.
	Rejections map[string]uint64 `json:"rejections"`
	// Cancellations counts requests whose client went away while delayed.
	Cancellations uint64 `json:"cancellations"`
}

// RejectionsTotal returns the sum of Rejections.
func (c ClientSnapshot) RejectionsTotal() uint64 {
	var n uint64
	for _, v := range c.Rejections {
		n += v
	}
	return n
}

var reasons = []Reason{RejectStandby, RejectNoBandwidth, RejectMaxDelay}

// Snapshot returns the current state. It allocates; call it for /state or
// a scrape, not per request.
func (s *Shares) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Snapshot{
		TotalBandwidth: s.total,
		MaxMeasured:    s.ahat,
		Utilized:       s.sum,
		Unsatisfied:    s.unsat > 0,
		Ticks:          s.ticks,
		LastTick:       s.lastTick,
		Clients:        make([]ClientSnapshot, len(s.clients)),
	}
	for i := range s.clients {
		c := &s.clients[i]
		d := s.available(i)
		cs := ClientSnapshot{
			Name:          s.names[i],
			Share:         s.shares[i],
			Allocation:    c.b,
			Measured:      c.avg,
			Available:     d,
			Rejecting:     d <= 0,
			LastDelay:     c.lastDelay.Seconds(),
			Active:        c.active,
			Held:          c.held,
			Standby:       c.wait,
			LastReply:     c.lastReply,
			Arrivals:      c.arrivals,
			Replies:       c.replies,
			Bytes:         c.bytes,
			Cancellations: c.cancelled,
			Rejections:    make(map[string]uint64, len(reasons)),
		}
		if d > 0 {
			cs.DelayPerKB = s.delaySeconds(d, 1000)
		}
		for _, r := range reasons {
			cs.Rejections[r.String()] = c.rejects[r]
		}
		out.Clients[i] = cs
	}
	return out
}

// shareMetric is one of the metrics, sluice_share_*: its descriptor,
// its type, and its value in a client's snapshot (the per-client
// metrics, label client) or in the whole snapshot (the others).
type shareMetric[S any] struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(S) float64
}

// The client label takes the configured names plus "others", so the
// label set is bounded by the configuration.
var clientLabel = []string{"client"}

// clientMetrics are the per-client metrics but the rejections, which
// carry a reason label as well (descRejections).
var clientMetrics = []shareMetric[ClientSnapshot]{
	{prometheus.NewDesc("sluice_share_allocation_ratio", "Configured share of the total bandwidth B, as a fraction.", clientLabel, nil),
		prometheus.GaugeValue, func(c ClientSnapshot) float64 { return c.Share / 100 }},
	{prometheus.NewDesc("sluice_share_allocated_bytes_per_second", "Allocated bandwidth b_i.", clientLabel, nil),
		prometheus.GaugeValue, func(c ClientSnapshot) float64 { return c.Allocation }},
	{prometheus.NewDesc("sluice_share_measured_bytes_per_second",
		"Measured bandwidth avg_i (EWMA of bytes/response time per reply).", clientLabel, nil),
		prometheus.GaugeValue, func(c ClientSnapshot) float64 { return c.Measured }},
	{prometheus.NewDesc("sluice_share_available_bytes_per_second",
		"Available bandwidth d_i as computed at scrape time (0: requests are rejected).", clientLabel, nil),
		prometheus.GaugeValue, func(c ClientSnapshot) float64 { return c.Available }},
	{prometheus.NewDesc("sluice_share_delay_per_kb_seconds",
		"Delay a 1000-byte reply would get at scrape time, (1/d_i - 1/Â)*1000; +Inf when d_i = 0.", clientLabel, nil),
		prometheus.GaugeValue, func(c ClientSnapshot) float64 {
			if c.Rejecting {
				return math.Inf(1)
			}
			return c.DelayPerKB
		}},
	{prometheus.NewDesc("sluice_share_last_delay_seconds", "Last delay computed for the client.", clientLabel, nil),
		prometheus.GaugeValue, func(c ClientSnapshot) float64 { return c.LastDelay }},
	{prometheus.NewDesc("sluice_share_standby", "Standby slots in use (requests waiting in the share mechanism).", clientLabel, nil),
		prometheus.GaugeValue, func(c ClientSnapshot) float64 { return float64(c.Standby) }},
	{prometheus.NewDesc("sluice_share_replies_total", "Completed replies.", clientLabel, nil),
		prometheus.CounterValue, func(c ClientSnapshot) float64 { return float64(c.Replies) }},
	{prometheus.NewDesc("sluice_share_bytes_total", "Body bytes of completed replies.", clientLabel, nil),
		prometheus.CounterValue, func(c ClientSnapshot) float64 { return float64(c.Bytes) }},
	{prometheus.NewDesc("sluice_share_cancellations_total", "Requests whose client went away while delayed.", clientLabel, nil),
		prometheus.CounterValue, func(c ClientSnapshot) float64 { return float64(c.Cancellations) }},
}

// descRejections is the per-client, per-reason count of rejections.
var descRejections = prometheus.NewDesc("sluice_share_rejections_total",
	"Rejected requests by reason (standby, no_bandwidth, max_delay).", []string{"client", "reason"}, nil)

// totalMetrics are the metrics of the whole mechanism (no labels).
var totalMetrics = []shareMetric[Snapshot]{
	{prometheus.NewDesc("sluice_share_total_bytes_per_second", "Configured total bandwidth B.", nil, nil),
		prometheus.GaugeValue, func(s Snapshot) float64 { return s.TotalBandwidth }},
	{prometheus.NewDesc("sluice_share_max_measured_bytes_per_second", "Maximum measured bandwidth Â = max(Â, sum of avg_j).", nil, nil),
		prometheus.GaugeValue, func(s Snapshot) float64 { return s.MaxMeasured }},
	{prometheus.NewDesc("sluice_share_utilized_bytes_per_second", "Sum of the measured bandwidths avg_j.", nil, nil),
		prometheus.GaugeValue, func(s Snapshot) float64 { return s.Utilized }},
	{prometheus.NewDesc("sluice_share_unsatisfied", "1 when some active client is below its allocation, else 0.", nil, nil),
		prometheus.GaugeValue, func(s Snapshot) float64 {
			if s.Unsatisfied {
				return 1
			}
			return 0
		}},
}

// Collector reports a Shares' state as Prometheus metrics (names
// sluice_share_*). It registers nothing itself: pass it to a registry.
type Collector struct{ s *Shares }

// NewCollector returns a collector of s.
func NewCollector(s *Shares) *Collector { return &Collector{s: s} }

// Register registers a collector of s with reg.
func Register(reg prometheus.Registerer, s *Shares) (*Collector, error) {
	c := NewCollector(s)
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Describe sends the descriptors of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range clientMetrics {
		ch <- m.desc
	}
	ch <- descRejections
	for _, m := range totalMetrics {
		ch <- m.desc
	}
}

// Collect sends the current values, taken from one Snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.Snapshot()
	for _, cl := range snap.Clients {
		for _, m := range clientMetrics {
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(cl), cl.Name)
		}
		for _, r := range reasons {
			ch <- prometheus.MustNewConstMetric(descRejections, prometheus.CounterValue, float64(cl.Rejections[r.String()]), cl.Name, r.String())
		}
	}
	for _, m := range totalMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(snap))
	}
}
