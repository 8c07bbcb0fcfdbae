// SPDX-License-Identifier: Apache-2.0

// Package metrictest reads metrics back from a Prometheus gatherer, for
// the tests of the packages that export or serve them (policy, the proxy,
// grpcsluice).
package metrictest

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/testkit"
)

// Metric returns the series of the family name in g whose labels include
// want (a label want names and the series lacks counts as ""), or nil
// when no series of the family has them. It fails t if g cannot be
// gathered.
func Metric(t testkit.TB, g prometheus.Gatherer, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, want) {
				return m
			}
		}
	}
	return nil
}

// Histogram is Metric's histogram, or nil.
func Histogram(t testkit.TB, g prometheus.Gatherer, name string, want map[string]string) *dto.Histogram {
	t.Helper()
	return Metric(t, g, name, want).GetHistogram()
}

// hasLabels reports whether each label of want has its value in m.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
