// SPDX-License-Identifier: Apache-2.0

package live

import "testing"

// The costly figure's short form on real sockets (about 4 s): at 50×,
// with the slot share at both hops, the light API gets most of its fair
// share of the leaf's CPU, the costly one a part of the rest, and no call
// is answered after its deadline. The margins are wide: the form is
// short and the machine shared; the full form's numbers are in
// docs/experiments.md.
func TestLiveCostlyQuick(t *testing.T) {
	out := runQuick(t, "costly")
	s := out.Summary
	k := "service_time_share_x50"
	light, share := s.Metric("goodput_cpu_"+k+"_light"), s.Metric("fair_share_cpu_"+k+"_light")
	if !(light >= 0.8*share) {
		t.Errorf("light API %.2f CPU-s/s of its share %.2f: want ≥ 0.8×", light, share)
	}
	if c := s.Metric("goodput_cpu_" + k + "_costly"); !(c > 0.2) {
		t.Errorf("costly API %.2f CPU-s/s: want the rest, not zero", c)
	}
	if late := s.Metric("late_" + k); late != 0 {
		t.Errorf("%v calls answered after their deadline", late)
	}
}

// Every row's stage is a valid policy for both hops.
func TestCostlyPolicies(t *testing.T) {
	for _, row := range planCostly(&Env{}).rows {
		for _, hop := range []string{"entry", "leaf"} {
			if _, err := newCostlyPolicy(costlyStage(hop, row)); err != nil {
				t.Errorf("%s %s: %v", row, hop, err)
			}
		}
	}
}
