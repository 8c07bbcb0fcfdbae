// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctl"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/mathx"
)

// badField returns a validation error for field with value v; want says
// what a valid value looks like.
func badField(field string, v any, want string) error { return fielderr.Invalid(field, v, want) }

// invalidIf returns badField(field, v, want) when bad holds and nil
// otherwise: one row of a Validate written as a table (see firstError).
func invalidIf(bad bool, field string, v any, want string) error {
	return fielderr.If(bad, field, v, want)
}

// firstError returns the first non-nil error of a Validate's rows, listed
// in the order the fields are checked: the first invalid field.
func firstError(errs ...error) error { return fielderr.First(errs...) }

// FieldOf returns the name of the configuration field a validation error
// names, or "" if err is not a field error.
func FieldOf(err error) string { return fielderr.Path(err) }

// checkPositive reports an error unless x is finite and > 0.
func checkPositive(field string, x float64) error {
	return invalidIf(!mathx.Finite(x) || x <= 0, field, x, "must be a finite number > 0")
}

// checkNonNegative reports an error unless x is finite and ≥ 0.
func checkNonNegative(field string, x float64) error {
	return invalidIf(!mathx.Finite(x) || x < 0, field, x, "must be a finite number ≥ 0")
}

// checkPeriod reports an error unless d > 0.
func checkPeriod(field string, d time.Duration) error { return ctl.CheckPeriod(field, d) }

// checkPositiveDuration reports an error unless d > 0; example is a valid
// value to show, such as "10s" (fielderr.PositiveDuration).
func checkPositiveDuration(field string, d time.Duration, example string) error {
	return fielderr.PositiveDuration(field, d, example)
}

// checkAtLeast reports an error unless n ≥ lo (fielderr.AtLeast).
func checkAtLeast(field string, n, lo int) error { return fielderr.AtLeast(field, n, lo) }

// checkWithin reports an error unless x is finite and between lo and hi,
// each end open or closed as its bracket says: '(' and ')' open, '[' and
// ']' closed (fielderr.Within).
func checkWithin(field string, x float64, open byte, lo, hi float64, close byte) error {
	return fielderr.Within(field, x, open, lo, hi, close)
}

// checkRateBounds validates a [min, max] rate pair and an initial rate
// inside it.
func checkRateBounds(minField string, lo float64, maxField string, hi float64, initField string, init float64) error {
	return firstError(
		checkPositive(minField, lo),
		checkPositive(maxField, hi),
		invalidIf(hi < lo, maxField, hi, fmt.Sprintf("must be ≥ %s (%g)", minField, lo)),
		invalidIf(initField != "" && (!mathx.Finite(init) || init < lo || init > hi), initField, init,
			fmt.Sprintf("must be within [%s, %s] = [%g, %g]", minField, maxField, lo, hi)),
	)
}

// clamp returns x limited to [lo, hi].
func clamp(x, lo, hi float64) float64 { return mathx.Clamp(x, lo, hi) }

// usable reports whether a measured quantity is finite and not negative.
func usable(x float64) bool { return mathx.Usable(x) }

// perSecond converts a count over m.Elapsed (or h when Elapsed is not
// positive) into a rate per second.
func perSecond(count float64, elapsed, h time.Duration) float64 {
	if elapsed <= 0 {
		elapsed = h
	}
	return count / elapsed.Seconds()
}

// fmtRate formats a rate for reasons.
func fmtRate(r float64) string { return ctl.FmtRate(r) }

// fmtSec formats seconds for reasons.
func fmtSec(s float64) string { return ctl.FmtSec(s) }

// decision fills the fields every decision carries.
func decision(now time.Time, name string, kind sluice.Kind, m sluice.Measurements, old, new float64, acted bool, reason string) sluice.Decision {
	return ctl.Decision(now, name, kind, m, old, new, acted, reason)
}
