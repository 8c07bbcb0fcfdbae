// SPDX-License-Identifier: Apache-2.0

package fielderr

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/mathx"
)

// The checks below are the rows that the configurations' Validate methods
// (the controllers', the client's) share: each states its bound once, and
// the message is written from that bound, so the two cannot disagree.

// PositiveDuration returns Invalid(path, d, "must be a positive duration
// such as "+example) unless d > 0; example is a valid value ("1s").
func PositiveDuration(path string, d time.Duration, example string) error {
	return If(d <= 0, path, d, "must be a positive duration such as "+example)
}

// AtLeast returns Invalid(path, n, "must be ≥ lo") unless n ≥ lo.
func AtLeast(path string, n, lo int) error {
	return If(n < lo, path, n, fmt.Sprintf("must be ≥ %d", lo))
}

// Within returns an error at path unless x is finite and lies between lo
// and hi, each end open or closed as its bracket says: Within(path, x,
// '(', 0, 1, ']') accepts 0 < x ≤ 1, and otherwise says "must be within
// (0, 1]".
func Within(path string, x float64, open byte, lo, hi float64, close byte) error {
	out := !mathx.Finite(x) || x < lo || x > hi || open == '(' && x == lo || close == ')' && x == hi
	return If(out, path, x, fmt.Sprintf("must be within %c%g, %g%c", open, lo, hi, close))
}
