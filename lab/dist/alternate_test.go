// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestAlternate checks that the arrivals follow the process in force:
// evenly spaced in the constant segments, irregular in the Poisson ones,
// with the rate of each, none straddling a switch, and that bad switches
// are refused.
func TestAlternate(t *testing.T) {
	rate, err := ConstantSchedule(1000)
	if err != nil {
		t.Fatal(err)
	}
	sw := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	a, err := NewAlternate(Constant{Rate: rate}, Poisson{Rate: rate}, sw...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		t    time.Duration
		want int
	}{{0, 0}, {time.Second - 1, 0}, {time.Second, 1}, {2*time.Second - 1, 1}, {2 * time.Second, 0}, {3 * time.Second, 1}, {time.Hour, 1}} {
		if got := a.In(c.t); got != c.want {
			t.Errorf("In(%v) = %d, want %d", c.t, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	var count [4]int
	var gaps [4][]time.Duration
	prev := time.Duration(0)
	for at := a.Next(r, 0); at < 4*time.Second; at = a.Next(r, at) {
		if at <= prev {
			t.Fatalf("arrival %v not after %v", at, prev)
		}
		seg := int(at / time.Second)
		if pseg := int(prev / time.Second); pseg == seg && prev > 0 {
			gaps[seg] = append(gaps[seg], at-prev)
		}
		count[seg]++
		prev = at
	}
	for seg, n := range count {
		if n < 900 || n > 1100 {
			t.Errorf("segment %d: %d arrivals, want about 1000", seg, n)
		}
		spread := time.Duration(0)
		for _, g := range gaps[seg] {
			spread = max(spread, g-time.Millisecond, time.Millisecond-g)
		}
		constant := seg%2 == 0
		if constant && spread > time.Microsecond {
			t.Errorf("constant segment %d: gaps off 1 ms by up to %v", seg, spread)
		}
		if !constant && spread < time.Millisecond {
			t.Errorf("Poisson segment %d: gaps within %v of 1 ms, want exponential ones", seg, spread)
		}
	}
	// The constant process restarts at a switch: its first arrival is one
	// gap after it.
	if got := a.Next(r, 2*time.Second-time.Nanosecond); got <= 2*time.Second || got > 2*time.Second+time.Millisecond {
		t.Errorf("first arrival after the switch at 2 s: %v", got)
	}
	for _, bad := range [][]time.Duration{{0}, {time.Second, time.Second}, {2 * time.Second, time.Second}} {
		if _, err := NewAlternate(Constant{Rate: rate}, Poisson{Rate: rate}, bad...); err == nil {
			t.Errorf("switches %v accepted", bad)
		}
	}
	if _, err := NewAlternate(nil, Poisson{Rate: rate}); err == nil {
		t.Error("nil process accepted")
	}
}
