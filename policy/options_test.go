// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// With Options.Registerer, New registers the policy's metrics; a policy
// that replaces it (Previous) with the same Registerer takes its place,
// and its stages are the ones scraped.
func TestOptionsRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := build(t, `stages: [{name: one, controller: static-rate, params: {rate: 10}}]`, Options{Registerer: reg})
	if n, err := testutil.GatherAndCount(reg, "sluice_gate_setting"); err != nil || n != 2 {
		t.Fatalf("sluice_gate_setting: %d series, %v; want the 2 stages (one, implicit)", n, err)
	}
	next := build(t, `stages: [{name: one, controller: static-rate, params: {rate: 10}}, {name: two, match: {path_prefix: /two/}, controller: static-rate, params: {rate: 10}}]`,
		Options{Registerer: reg, Previous: p})
	if n, err := testutil.GatherAndCount(reg, "sluice_gate_setting"); err != nil || n != 3 {
		t.Fatalf("after the reload: %d series, %v; want the new policy's 3", n, err)
	}
	if _, err := New(next.Config(), Options{Registerer: reg}); err == nil {
		t.Fatal("a second policy registered beside the first")
	}
}
