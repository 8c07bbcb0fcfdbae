// SPDX-License-Identifier: Apache-2.0

// Package mathx holds the numeric helpers sluice's packages share.
package mathx

import "math"

// Finite reports whether x is neither NaN nor ±Inf.
func Finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Clamp returns x limited to [lo, hi]; a NaN x stays NaN.
func Clamp(x, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, x))
}

// Usable reports whether a measured quantity is finite and not negative.
func Usable(x float64) bool { return Finite(x) && x >= 0 }
