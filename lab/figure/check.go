// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"strings"

	"github.com/sluicehq/sluice/lab/report"
)

// Check is one expectation of the paper (or of the simulator's figures to
// meet), evaluated on a run: the claim in words, the numbers this run
// measured, and whether they meet it. A check whose numbers are missing
// (NaN) fails.
type Check struct {
	// Claim states the expectation, e.g. "admitted p90 during the spike
	// ≤ 1.5 × target (paper Fig. 10)".
	Claim string
	// Measured gives the measured values and the bound they were held to.
	Measured string
	// Pass reports whether the measured values meet the claim.
	Pass bool
}

// Num formats a measured number for a check: three significant digits for
// small values, no exponent for ordinary magnitudes.
func Num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.IsInf(v, 0):
		return fmt.Sprint(v)
	case v != 0 && math.Abs(v) < 0.01:
		return fmt.Sprintf("%.3g", v)
	case math.Abs(v) < 10:
		return trimZeros(fmt.Sprintf("%.3f", v))
	case math.Abs(v) < 1000:
		return trimZeros(fmt.Sprintf("%.1f", v))
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	for len(s) > 1 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

// AtMost checks metric ≤ bound.
func AtMost(s *report.Summary, claim, metric string, bound float64) Check {
	v := s.Metric(metric)
	return Check{Claim: claim, Measured: fmt.Sprintf("%s = %s (must be ≤ %s)", metric, Num(v), Num(bound)), Pass: v <= bound}
}

// AtLeast checks metric ≥ bound.
func AtLeast(s *report.Summary, claim, metric string, bound float64) Check {
	v := s.Metric(metric)
	return Check{Claim: claim, Measured: fmt.Sprintf("%s = %s (must be ≥ %s)", metric, Num(v), Num(bound)), Pass: v >= bound}
}

// Within checks lo ≤ metric ≤ hi.
func Within(s *report.Summary, claim, metric string, lo, hi float64) Check {
	v := s.Metric(metric)
	return Check{Claim: claim, Measured: fmt.Sprintf("%s = %s (must be in [%s, %s])", metric, Num(v), Num(lo), Num(hi)),
		Pass: v >= lo && v <= hi}
}

// Below checks metric a < metric b × factor.
func Below(s *report.Summary, claim, a, b string, factor float64) Check {
	va, vb := s.Metric(a), s.Metric(b)
	rhs := b
	if factor != 1 {
		rhs = Num(factor) + " × " + b
	}
	return Check{Claim: claim,
		Measured: fmt.Sprintf("%s = %s, %s = %s (must be %s < %s)", a, Num(va), b, Num(vb), a, rhs),
		Pass:     va < factor*vb}
}

// MissesLess checks that metric a misses ref by less than factor times as
// much as metric b does, where a value misses ref by max(0, value − ref):
// max(0, a − ref) < factor × max(0, b − ref). It fails when b does not
// miss ref at all.
func MissesLess(s *report.Summary, claim, a, b string, ref, factor float64) Check {
	va, vb := s.Metric(a), s.Metric(b)
	return Check{Claim: claim,
		Measured: fmt.Sprintf("%s = %s, %s = %s (must be max(0, %s − %s) < %s × max(0, %s − %s))",
			a, Num(va), b, Num(vb), a, Num(ref), Num(factor), b, Num(ref)),
		Pass: math.Max(0, va-ref) < factor*math.Max(0, vb-ref)}
}

// ChecksTable lists the checks for expectations.csv.
func ChecksTable(cs []Check) *report.Table {
	t := report.NewTable("claim", "measured", "pass")
	for _, c := range cs {
		_ = t.Append(c.Claim, c.Measured, c.Pass)
	}
	return t
}
