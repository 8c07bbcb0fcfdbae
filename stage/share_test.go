// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"fmt"
	"maps"
	"testing"
	"time"
)

// The slot share's water-filling on hand-worked cases. Limit 10, light
// asks for 3 and costly for 40: the level starts at 10/2 = 5 per tenant;
// light's 3 fits, leaving 7 for costly alone, so the level is 7 and
// costly may hold 7 (light's 3 stay free for it). Weights a 2, b and c
// 1, demands a 20, b 20, c 1, limit 10: by demand per weight c (1), a
// (10), b (20); the level starts at 10/4 = 2.5, c's 1 fits, then 9/3 =
// 3, which a (20 > 3·2) does not: caps a 6, b 3, c 3. Demands that fit
// in the limit, a 3 and b 5 of 10, cap each at its demand and the slack
// of 2, a 5 and b 7; one tenant alone is not capped.
func TestMaxMinCaps(t *testing.T) {
	w := func(m map[string]float64) func(string) float64 {
		return func(t string) float64 {
			if x, ok := m[t]; ok {
				return x
			}
			return 1
		}
	}
	for _, tc := range []struct {
		demand  map[string]int
		weights map[string]float64
		limit   int
		want    map[string]int
	}{
		{map[string]int{"light": 3, "costly": 40}, nil, 10, map[string]int{"light": 7, "costly": 7}},
		{map[string]int{"a": 20, "b": 20, "c": 1}, map[string]float64{"a": 2}, 10, map[string]int{"a": 6, "b": 3, "c": 3}},
		{map[string]int{"a": 3, "b": 5}, nil, 10, map[string]int{"a": 5, "b": 7}},
		{map[string]int{"a": 30}, nil, 10, nil},
		{map[string]int{"a": 1, "b": 1, "c": 1}, nil, 2, map[string]int{"a": 1, "b": 1, "c": 1}},
	} {
		if got := maxMinCaps(tc.demand, w(tc.weights), tc.limit); !maps.Equal(got, tc.want) {
			t.Errorf("maxMinCaps(%v, %v, %d) = %v, want %v", tc.demand, tc.weights, tc.limit, got, tc.want)
		}
	}
}

// The slot share's bookkeeping over two periods: the peak of held +
// queued, the caps it gives, and a tenant forgotten after a period with
// neither.
func TestSlotShareTrace(t *testing.T) {
	s := newSlotShare(func(string) float64 { return 1 })
	for range 4 {
		s.add(s.held, "costly", 1)
	}
	s.add(s.queued, "costly", 1)
	s.add(s.queued, "light", 1)
	s.add(s.queued, "light", -1)
	s.add(s.held, "light", 1)
	s.add(s.held, "light", -1)
	s.reshare(4) // peaks costly 5, light 1: level 3 for costly
	if got := fmt.Sprint(s.caps); got != "map[costly:3 light:3]" {
		t.Fatalf("caps %s, want costly 3, light 3", got)
	}
	if !s.atCap("costly") || s.atCap("light") {
		t.Errorf("costly at cap %v (holds 4 of 3), light %v (holds 0): want true, false", s.atCap("costly"), s.atCap("light"))
	}
	s.add(s.queued, "costly", -1)
	s.reshare(4) // peaks costly 5 (held 4 + queued 1 at its start), light 0
	if _, ok := s.peak["light"]; len(s.caps) != 0 || ok {
		t.Errorf("after a period without light: caps %v, peaks %v; want none, and light forgotten", s.caps, s.peak)
	}
}

// A tenant whose requests hold their slots for 5 s (one every 300 ms)
// and a light one (10 ms, every 20 ms) share a fair queue of limit 4.
// Without the slot share, every slot freed while the light tenant has no
// waiter goes to the costly tenant and stays with it: the light tenant's
// requests wait for the costly ones to end and are refused at the end of
// their wait. With it, the costly tenant holds at most its max-min share
// (4 less the light tenant's peak of 1) and the light tenant is served;
// the costly one keeps 3 slots, not zero.
func TestStageSlotShare(t *testing.T) {
	for _, on := range []bool{false, true} {
		_, h := costlyBesideLight(t, "slot_share", on, 5*time.Second, Tenants{Cost: CostServiceTime, SlotShare: on}, Hog{})
		if !on {
			continue
		}
		if h.ok[1] < 1485 {
			t.Errorf("light tenant served %d of 1500 (want ≥ 99 %%)", h.ok[1])
		}
		// 3 slots of 5 s each for 30 s: 18 costly requests.
		if h.ok[0] < 17 {
			t.Errorf("costly tenant served %d in 30 s, want its 3 slots' 18", h.ok[0])
		}
	}
}
