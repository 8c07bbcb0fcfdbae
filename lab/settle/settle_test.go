// SPDX-License-Identifier: Apache-2.0

package settle

import (
	"math"
	"testing"
	"time"
)

// points returns 1 s points with the given values and weight w.
func points(w float64, vs ...float64) []Point {
	ps := make([]Point, len(vs))
	for i, v := range vs {
		ps[i] = Point{Start: time.Duration(i) * time.Second, End: time.Duration(i+1) * time.Second, Value: v, Weight: w}
	}
	return ps
}

func TestTime(t *testing.T) {
	// Utilization from an idle server: within ±0.1 of 0.8 from the 4th
	// period on.
	ps := points(1, 0.2, 0.5, 0.65, 0.8, 0.82, 0.78, 0.8, 0.81)
	if got := Time(ps, 0.8, 0.1, 0); got != 4 {
		t.Errorf("Time, no window = %v, want 4", got)
	}
	// With a 3-period window the average around the 4th period (index 3)
	// is (0.65+0.8+0.82)/3 = 0.757, within the band; around the 3rd it is
	// (0.5+0.65+0.8)/3 = 0.65, outside: settled at the end of the 4th.
	if got := Time(ps, 0.8, 0.1, 1); got != 4 {
		t.Errorf("Time, window 3 = %v, want 4", got)
	}
	// A NaN reading adds nothing to its window; alone in its window it
	// leaves the window empty, which is unsettled.
	ps[5].Value = math.NaN()
	if got := Time(ps, 0.8, 0.1, 1); got != 4 {
		t.Errorf("Time with a NaN, window 3 = %v, want 4", got)
	}
	if got := Time(ps, 0.8, 0.1, 0); got != 7 {
		t.Errorf("Time with a NaN alone in its window = %v, want 7", got)
	}
	// Outside at the end: never settled; too short for a window: NaN.
	if got := Time(points(1, 0.8, 0.8, 0.3), 0.8, 0.1, 0); !math.IsNaN(got) {
		t.Errorf("Time ending outside = %v, want NaN", got)
	}
	if got := Time(points(1, 0.8), 0.8, 0.1, 1); !math.IsNaN(got) {
		t.Errorf("Time without a full window = %v, want NaN", got)
	}
	if HalfWindow(5*time.Second, time.Second) != 2 || HalfWindow(0, time.Second) != 0 || HalfWindow(time.Second, 0) != 0 {
		t.Error("HalfWindow")
	}
}

func TestReturn(t *testing.T) {
	// Mean RT (s) per 1 s bin: off the band for 3 bins after the wave
	// starts, then back at Tref = 0.1.
	ps := points(10, 0.1, 0.1, 0.4, 0.4, 0.4, 0.1, 0.1, 0.1, 0.1, 0.1)
	if got := Return(ps, 0, 10*time.Second, 0.1, 0.25, 0); got != 6 {
		t.Errorf("Return = %v, want 6", got)
	}
	if got := Return(ps[:2], 0, 2*time.Second, 0.1, 0.25, 0); got != 0 {
		t.Errorf("Return without leaving = %v, want 0", got)
	}
	if got := Return(ps[:4], 0, 4*time.Second, 0.1, 0.25, 0); !math.IsNaN(got) {
		t.Errorf("Return never back = %v, want NaN", got)
	}
	// Weighted: a bin of 1 sample at 0.4 between bins of 10 at 0.1 keeps
	// a 3-bin average of 0.114 inside the band.
	ps = points(10, 0.1, 0.1, 0.4, 0.1, 0.1)
	ps[2].Weight = 1
	if got := Return(ps, 0, 5*time.Second, 0.1, 0.25, 1); got != 0 {
		t.Errorf("Return weighted = %v, want 0", got)
	}
	// Measured from a later start: the interval is clipped to [from, to).
	ps = points(10, 0.4, 0.4, 0.4, 0.1, 0.1)
	if got := Return(ps, 2*time.Second, 5*time.Second, 0.1, 0.25, 0); got != 2 {
		t.Errorf("Return from 2 s = %v, want 2", got)
	}
}

func TestFormat(t *testing.T) {
	if got := Format([]float64{1.5, math.NaN(), 12}); got != "1.5/never/12" {
		t.Errorf("Format = %q", got)
	}
}
