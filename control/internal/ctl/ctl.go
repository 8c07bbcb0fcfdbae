// SPDX-License-Identifier: Apache-2.0

// Package ctl holds what the controllers of package control and its
// subpackages (control/auto) share: the fields every decision carries,
// the number formats of their reasons, and the checks of their
// configurations' fields. It is internal so that control/auto, which
// package control imports for its registry, can share them without
// importing control.
package ctl

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/fielderr"
)

// Decision fills the fields every decision carries.
func Decision(now time.Time, name string, kind sluice.Kind, m sluice.Measurements, old, new float64, acted bool, reason string) sluice.Decision {
	return sluice.Decision{
		At: now, Controller: name, Kind: kind, Class: m.Class,
		Old: old, New: new, Acted: acted, Inputs: m, Reason: reason,
	}
}

// FmtRate formats a rate in req/s for reasons.
func FmtRate(r float64) string { return fmt.Sprintf("%.4g req/s", r) }

// FmtSec formats seconds for reasons, as a duration rounded to 1µs.
func FmtSec(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

// CheckPeriod reports an error naming field unless d > 0.
func CheckPeriod(field string, d time.Duration) error {
	return fielderr.PositiveDuration(field, d, "1s")
}
