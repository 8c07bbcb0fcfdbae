// SPDX-License-Identifier: Apache-2.0

package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Histogram finds the series whose labels include the ones asked for (any
// series of the family for none), and nil for a family or a label value
// that is not there.
func TestHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "wait_seconds", Help: "Wait."}, []string{"stage", "class"})
	reg.MustRegister(h)
	h.WithLabelValues("api", "gold").Observe(1)
	h.WithLabelValues("api", "bronze").Observe(2)
	h.WithLabelValues("api", "bronze").Observe(3)
	for _, c := range []struct {
		want  map[string]string
		count uint64
		sum   float64
	}{
		{map[string]string{"stage": "api", "class": "bronze"}, 2, 5},
		{map[string]string{"class": "gold"}, 1, 1},
		{map[string]string{"stage": "api", "class": "gold", "outcome": ""}, 1, 1},
	} {
		got := Histogram(t, reg, "wait_seconds", c.want)
		if got.GetSampleCount() != c.count || got.GetSampleSum() != c.sum {
			t.Errorf("%v: count %d sum %v, want %d %v", c.want, got.GetSampleCount(), got.GetSampleSum(), c.count, c.sum)
		}
	}
	if Histogram(t, reg, "wait_seconds", nil) == nil {
		t.Error("no labels asked: no series found")
	}
	for _, c := range []struct {
		name string
		want map[string]string
	}{
		{"wait_seconds", map[string]string{"class": "silver"}},
		{"wait_seconds", map[string]string{"outcome": "ok"}},
		{"other_seconds", nil},
	} {
		if got := Histogram(t, reg, c.name, c.want); got != nil {
			t.Errorf("%s %v: found %v", c.name, c.want, got)
		}
	}
}

// Metric finds a counter's series by its labels, and nil for a label
// value that is not there.
func TestMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hops_total", Help: "Hops."}, []string{"header"})
	reg.MustRegister(c)
	c.WithLabelValues("priority").Add(2)
	c.WithLabelValues("timeout").Inc()
	for h, want := range map[string]float64{"priority": 2, "timeout": 1} {
		if got := Metric(t, reg, "hops_total", map[string]string{"header": h}).GetCounter().GetValue(); got != want {
			t.Errorf("%s: %v, want %v", h, got, want)
		}
	}
	if m := Metric(t, reg, "hops_total", map[string]string{"header": "tenant"}); m != nil {
		t.Errorf("tenant: found %v", m)
	}
}
