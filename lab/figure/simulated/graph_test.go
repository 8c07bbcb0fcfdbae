// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// The chain figures in virtual time, seeds 1–3, each run in well under a
// second: every expectation of the graph and graph-crowd specs holds, except
// the moonshot (no second of goodput below the reduced capacity), which
// the backend's own per-second variation rules out: its completions
// during the trigger average the reduced capacity, so some seconds fall
// below it.
func TestGraph(t *testing.T) {
	for _, name := range []string{"graph", "graph-crowd"} {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				t.Parallel()
				res := runResult(t, name, seed)
				for _, c := range res.Checks {
					if !c.Pass && !strings.Contains(c.Claim, "moonshot") {
						t.Errorf("%s: %s", c.Claim, c.Measured)
					}
				}
				if name == "graph" {
					s := res.Summary
					// Beside the checks: retry budgets and grpc-go's
					// throttling cut the amplification, and do not
					// undo the collapse.
					within(t, s, "amplification_naive", 3, 10)
					within(t, s, "amplification_budget", 1.2, 2.5)
					within(t, s, "amplification_grpc_throttle", 0.99, 1.1)
					within(t, s, "wasted_fraction_naive", 0.5, 1)
					within(t, s, "goodput_trigger_rps_grpc_throttle", 0, 20)
				}
			})
		}
	}
}

// A short variant: the quick form's timing, one sluice row.
func TestGraphShort(t *testing.T) {
	s := run(t, "graph", 1, "warm=6s", "after=8s", "rows=naive,inprocess")
	within(t, s, "collapse_s_naive", 8, 8)
	within(t, s, "recovery_s_inprocess", 0, 1)
	within(t, s, "late_calls_inprocess", 0, 0)
}

// The in-process row taken apart, in the short form (one row, 24 s of
// virtual time): with every mechanism its checks hold; without the one
// each check stands on, that check fails. This is what the chain figure
// measures, so a change that removes a mechanism fails here:
//
//   - admission (the middleware's stage at every tier) is what keeps
//     goodput during the trigger, the recovery and the waste: without
//     it, deadlines carried and the client side alone still leave the
//     backend a queue of work for callers that are gone;
//   - with per-try timeouts (a timed-out attempt sent again while the
//     backend still works on it) and no admission, the client side's
//     retry budget and throttle are what hold the amplification near 1;
//     with both off it is more than doubled.
func TestGraphAblation(t *testing.T) {
	short := []string{"warm=6s", "after=8s", "rows=inprocess"}
	failed := func(sets ...string) map[string]bool {
		t.Helper()
		res := runResult(t, "graph", 1, append(slices.Clone(short), sets...)...)
		out := map[string]bool{}
		for _, c := range res.Checks {
			if !c.Pass {
				metric, _, _ := strings.Cut(c.Measured, " ")
				out[metric] = true
			}
		}
		return out
	}
	const (
		recovery = "recovery_s_inprocess"
		trigger  = "goodput_trigger_rps_inprocess"
		amp      = "amplification_inprocess"
		wasted   = "wasted_fraction_inprocess"
		late     = "late_calls_inprocess"
		moonshot = "min_goodput_rps_inprocess"
	)
	if f := failed(); len(f) > 1 || (len(f) == 1 && !f[moonshot]) {
		t.Errorf("every mechanism on: failed %v, want none but the moonshot", slices.Sorted(maps.Keys(f)))
	}
	for _, tc := range []struct {
		sets []string
		fail []string // checks that must fail
		pass []string // checks that must still hold
	}{
		{[]string{"admission=false"}, []string{recovery, trigger, wasted}, []string{amp, late}},
		{[]string{"admission=false", "per_try=300ms"}, []string{recovery, trigger, wasted, amp}, []string{late}},
		{[]string{"admission=false", "per_try=300ms", "throttle=false", "retry_budget=false"}, []string{recovery, trigger, wasted, amp}, []string{late}},
	} {
		f := failed(tc.sets...)
		for _, m := range tc.fail {
			if !f[m] {
				t.Errorf("%v: the check on %s holds; without the mechanism it must fail", tc.sets, m)
			}
		}
		for _, m := range tc.pass {
			if f[m] {
				t.Errorf("%v: the check on %s fails", tc.sets, m)
			}
		}
	}
	// The budget and the throttle bound the retries: with per-try
	// timeouts and no admission, amplification stays near 1 with them
	// and is more than doubled without.
	with := run(t, "graph", 1, append(slices.Clone(short), "admission=false", "per_try=300ms")...)
	without := run(t, "graph", 1, append(slices.Clone(short), "admission=false", "per_try=300ms", "throttle=false", "retry_budget=false")...)
	within(t, with, amp, 1, 1.3)
	within(t, without, amp, 2, 3)
}

// graph-recover in virtual time, over HTTP and over gRPC, seeds 1–3: the
// sluice rows answer ≥ 95 % of each second's calls from the first full
// second after the crowd and after the capacity drop, while the crowd and
// the drop are still cut to what the chain serves; and the in-process
// row with the SRE book's throttle window (the clients' throttle before
// it forgot at an accept run) still refuses about a third of the calls
// in the first seconds after the crowd, for about 7 s.
func TestGraphRecover(t *testing.T) {
	for _, transport := range []string{"http", "grpc"} {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed%d", transport, seed), func(t *testing.T) {
				t.Parallel()
				// Four checks for each of proxy and inprocess; the
				// window row is for comparison.
				rows, want := "proxy,inprocess,inprocess-window", 8
				if transport == "grpc" {
					rows, want = "inprocess,inprocess-window", 4
				}
				res := runResult(t, "graph-recover", seed, "transport="+transport, "rows="+rows)
				met, total := res.Passed()
				if met != total || total != want {
					for _, c := range res.Checks {
						if !c.Pass {
							t.Errorf("%s: %s", c.Claim, c.Measured)
						}
					}
					t.Fatalf("%d of %d checks met, want %d of %d", met, total, want, want)
				}
				s := res.Summary
				within(t, s, "after_crowd_first_ratio_inprocess_window", 0.5, 0.85)
				within(t, s, "after_crowd_short_s_inprocess_window", 5, 9)
			})
		}
	}
}

// Over gRPC a rows list with a row that has no gRPC form is refused.
func TestGraphRecoverGRPCRows(t *testing.T) {
	if _, err := runErr(t, "graph-recover", 1, "transport=grpc", "rows=proxy,inprocess"); err == nil || !strings.Contains(err.Error(), "no gRPC form") {
		t.Errorf("proxy over gRPC: %v", err)
	}
}
