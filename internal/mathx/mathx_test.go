// SPDX-License-Identifier: Apache-2.0

package mathx

import (
	"math"
	"testing"
)

func TestFinite(t *testing.T) {
	for x, want := range map[float64]bool{0: true, -1e308: true, math.MaxFloat64: true, math.Inf(1): false, math.Inf(-1): false} {
		if Finite(x) != want {
			t.Errorf("Finite(%v) = %v", x, !want)
		}
	}
	if Finite(math.NaN()) {
		t.Error("Finite(NaN)")
	}
}

func TestClamp(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{{-1, 0}, {0.5, 0.5}, {3, 2}, {math.Inf(1), 2}} {
		if got := Clamp(c.x, 0, 2); got != c.want {
			t.Errorf("Clamp(%v, 0, 2) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := Clamp(math.NaN(), 0, 2); !math.IsNaN(got) {
		t.Errorf("Clamp(NaN, 0, 2) = %v, want NaN", got)
	}
}

func TestUsable(t *testing.T) {
	for x, want := range map[float64]bool{0: true, 1: true, -1e-9: false, math.Inf(1): false} {
		if Usable(x) != want {
			t.Errorf("Usable(%v) = %v", x, !want)
		}
	}
	if Usable(math.NaN()) {
		t.Error("Usable(NaN)")
	}
}
