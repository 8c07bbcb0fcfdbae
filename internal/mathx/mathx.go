// Package mathx holds the numeric helpers sluice's packages share.
package mathx

import "math"

// Finite reports whether x is neither NaN nor ±Inf.
func Finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
