// SPDX-License-Identifier: Apache-2.0

// Package metrictest reads metrics back from a Prometheus gatherer, for
// the tests of the packages that export them (policy, the proxy).
package metrictest

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TB is the part of testing.TB Histogram uses (so that the product's
// packages do not depend on package testing: scripts/check-lean.sh).
type TB interface {
	Helper()
	Fatal(args ...any)
}

// Histogram returns the histogram of the family name in g whose labels
// include want (a label want names and the metric lacks counts as ""), or
// nil when no metric of the family has them. It fails t if g cannot be
// gathered.
func Histogram(t TB, g prometheus.Gatherer, name string, want map[string]string) *dto.Histogram {
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
				return m.GetHistogram()
			}
		}
	}
	return nil
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
