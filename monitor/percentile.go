// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"math"
	"slices"
)

// Rank returns the 1-based nearest rank of the p-quantile among n ≥ 1
// sorted samples,
//
//	k = ⌈p·n⌉, clamped to [1, n],
//
// the rank every percentile in sluice uses (the windows behind the
// controllers, the simulator's and the live experiments' analyses). The
// product p·n is taken a hair low (by a relative 10⁻¹²) before rounding up
// so that a product that is an integer in exact arithmetic stays that
// integer: 0.9·10 is rank 9, never 10 through a rounding error.
func Rank(p float64, n int) int {
	x := p * float64(n)
	k := int(math.Ceil(x - math.Abs(x)*1e-12))
	return min(max(k, 1), n)
}

// Percentile returns the exact p-quantile (nearest rank, see Rank; p in
// (0, 1]) of the finite values of xs, or NaN if there are none or p is out
// of range. xs is not modified.
func Percentile(xs []float64, p float64) float64 {
	if !(p > 0 && p <= 1) {
		return math.NaN()
	}
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[Rank(p, len(v))-1]
}
