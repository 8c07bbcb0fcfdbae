// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"math"
	"strings"
	"testing"
)

func TestEWMA(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name    string
		alpha   float64
		samples []float64
		want    []float64 // value after each sample
	}{
		// SEDA's α = 0.7: v = 0.7·v + 0.3·x.
		{"seda 0.7", 0.7, []float64{10, 20, 0, 100}, []float64{10, 13, 9.1, 36.37}},
		{"alpha 0 follows", 0, []float64{5, 1, 9}, []float64{5, 1, 9}},
		{"alpha 0.5", 0.5, []float64{0, 8, 8, 8}, []float64{0, 4, 6, 7}},
		{"non-finite ignored", 0.5, []float64{nan, 4, inf, -inf, 8}, []float64{0, 4, 4, 4, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEWMA(tc.alpha)
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := e.Value(); ok || v != 0 {
				t.Fatalf("empty Value() = %v, %v; want 0, false", v, ok)
			}
			for i, x := range tc.samples {
				got := e.Update(x)
				if math.Abs(got-tc.want[i]) > 1e-12 {
					t.Fatalf("after sample %d (%v): Update = %v, want %v", i, x, got, tc.want[i])
				}
				if v, _ := e.Value(); v != got {
					t.Fatalf("Value() = %v, Update returned %v", v, got)
				}
			}
		})
	}
}

func TestEWMAResetAndCount(t *testing.T) {
	e, err := NewEWMA(0.7)
	if err != nil {
		t.Fatal(err)
	}
	e.Update(10)
	e.Update(math.NaN())
	e.Update(20)
	if e.Count() != 2 {
		t.Errorf("Count() = %d, want 2 (NaN is not counted)", e.Count())
	}
	e.Reset()
	if v, ok := e.Value(); ok || v != 0 || e.Count() != 0 {
		t.Errorf("after Reset: Value() = %v, %v, Count() = %d", v, ok, e.Count())
	}
	if got := e.Update(50); got != 50 {
		t.Errorf("first Update after Reset = %v, want 50 (initialises)", got)
	}
	if e.Alpha() != 0.7 {
		t.Errorf("Alpha() = %v", e.Alpha())
	}
}

func TestNewEWMAErrors(t *testing.T) {
	for _, a := range []float64{-0.1, 1, 1.5, math.NaN(), math.Inf(-1)} {
		_, err := NewEWMA(a)
		if err == nil {
			t.Fatalf("NewEWMA(%v) succeeded", a)
		}
		if !strings.Contains(err.Error(), "alpha") {
			t.Errorf("NewEWMA(%v) error %q does not name alpha", a, err)
		}
	}
}
