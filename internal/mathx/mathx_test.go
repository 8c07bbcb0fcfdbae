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
