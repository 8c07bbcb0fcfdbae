// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
	"testing"
	"time"
)

// TestCPUMeter feeds a meter, created with 10 s of CPU time at t0, a
// sequence of readings (the wall clock as an offset from t0, the counter
// and the capacity) and checks each result.
func TestCPUMeter(t *testing.T) {
	type reading struct {
		at       time.Duration // after t0
		used     time.Duration
		capacity float64 // CPUs
		want     float64
		back     bool
		noTime   bool // an error wrapping ErrNoTimeElapsed
	}
	tests := []struct {
		name     string
		readings []reading
	}{
		{"first reading is against the creation's", []reading{
			{at: 2 * time.Second, used: 11 * time.Second, capacity: 1, want: 0.5},
		}},
		{"capacity divides", []reading{
			{at: 2 * time.Second, used: 12 * time.Second, capacity: 4, want: 0.25},
		}},
		{"fractional capacity", []reading{
			{at: 8 * time.Second, used: 12 * time.Second, capacity: 0.5, want: 0.5},
		}},
		{"each reading is against the one before", []reading{
			{at: time.Second, used: 10*time.Second + 250*time.Millisecond, capacity: 1, want: 0.25},
			{at: 3 * time.Second, used: 11*time.Second + 850*time.Millisecond, capacity: 1, want: 0.8},
			{at: 4 * time.Second, used: 11*time.Second + 850*time.Millisecond, capacity: 1, want: 0},
		}},
		{"above capacity clamps to 1", []reading{
			{at: time.Second, used: 13 * time.Second, capacity: 2, want: 1},
		}},
		{"same instant keeps the previous reading", []reading{
			{at: 0, used: 11 * time.Second, capacity: 1, noTime: true},
			{at: 2 * time.Second, used: 11 * time.Second, capacity: 1, want: 0.5},
		}},
		{"clock went backwards keeps the previous reading", []reading{
			{at: 4 * time.Second, used: 12 * time.Second, capacity: 1, want: 0.5},
			{at: 3 * time.Second, used: 13 * time.Second, capacity: 1, noTime: true},
			{at: 6 * time.Second, used: 13 * time.Second, capacity: 1, want: 0.5},
		}},
		{"counter went backwards becomes the baseline", []reading{
			{at: time.Second, used: 2 * time.Second, capacity: 1, back: true},
			{at: 5 * time.Second, used: 5 * time.Second, capacity: 1, want: 0.75},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := cpuMeter{used: 10 * time.Second, at: t0}
			for i, r := range tc.readings {
				u, back, err := m.next(r.used, t0.Add(r.at), r.capacity)
				if r.noTime {
					if !errors.Is(err, ErrNoTimeElapsed) {
						t.Errorf("reading %d: err = %v, want ErrNoTimeElapsed", i, err)
					}
					continue
				}
				if err != nil || back != r.back || !near(u, r.want) {
					t.Errorf("reading %d: next = %v, back %v, %v; want %v, back %v", i, u, back, err, r.want, r.back)
				}
			}
		})
	}
}
