// SPDX-License-Identifier: Apache-2.0

package testclock

import (
	"testing"
	"time"
)

func TestMs(t *testing.T) {
	for _, c := range []struct {
		n    float64
		want time.Duration
	}{{0, 0}, {1, time.Millisecond}, {0.5, 500 * time.Microsecond}, {2.25, 2250 * time.Microsecond}, {-3, -3 * time.Millisecond}} {
		if got := Ms(c.n); got != c.want {
			t.Errorf("Ms(%v) = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestT0(t *testing.T) {
	if T0.Location() != time.UTC || T0.Year() != 2026 || T0.YearDay() != 1 || T0.Hour() != 0 || T0.Minute() != 0 || T0.Nanosecond() != 0 {
		t.Errorf("T0 = %v, want 2026-01-01 00:00 UTC", T0)
	}
}
