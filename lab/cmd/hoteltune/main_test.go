// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lab/tune"
)

// The best points become figure.HotelTuned's source: gofmt'd Go, the
// scenarios in the figure's order, the peers and keys sorted.
func TestGoSource(t *testing.T) {
	src, err := goSource(map[string]map[string]tune.Point{
		"step-8": {"rajomon": {"token_interval_ms": 10, "latency_threshold_ms": 3}},
		"step-3": {"topfull": {"slo_ms": 50}, "dagor": {"alpha": 0.4}},
	}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, want := range []string{"package figure", "(-seeds 1 -refine 2;", `"latency_threshold_ms": 3, "token_interval_ms": 10`} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if i, j, k := strings.Index(s, `"step-3"`), strings.Index(s, `"step-8"`), strings.Index(s, `"dagor"`); !(i < k && k < strings.Index(s, `"topfull"`) && i < j) {
		t.Errorf("order:\n%s", s)
	}
}

// Bad arguments are errors before any run.
func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-out", t.TempDir(), "-seeds", "0"},
		{"-out", t.TempDir(), "-peers", "sluice"},
		{"-out", t.TempDir(), "-scenarios", "step-9", "-peers", ""},
		{"-out", t.TempDir(), "-set", "warm=1ms"},
	} {
		if err := run(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
