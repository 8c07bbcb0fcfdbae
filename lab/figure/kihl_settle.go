// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/settle"
)

// The settling rule of kihl-step (Andersson, Kihl et al. Fig. 9) filters
// per-period noise with a centred moving average. How wide that average
// must be depends on the server: the simulator's M/D/1 serves identical
// requests in identical time, while the live CPU serves identical work in
// a time that wanders by about ±12 % for seconds at a time
// (lab/NOTEBOOK.md, "Why the Kihl figures missed"). The window is
// therefore chosen from the run's own service-cost noise, the same way in
// both drivers, so that the window's mean is as sure an indicator of the
// loop's level on the live CPU as the default window is on the paper's
// model.

// KihlSettleZ is how many standard deviations of the window mean fit in
// the settling band: a window whose mean has standard deviation
// band/KihlSettleZ leaves the band around a loop that holds ρ_ref with
// probability 2·(1 − Φ(2.5)) = 1.2 %, about 5 % over the four or so
// independent windows a run has after settling.
const KihlSettleZ = 2.5

// KihlNoise estimates the per-period utilization noise that the server
// itself adds, independent of what the controller admits, from the
// periods that start at or after from: each period's cost per completed
// request c_k = ρ_k·h / completed_k (seconds of busy time per answer) has
// relative standard deviation r and lag-1 autocorrelation φ; the noise
// of ρ at the reference is σ = ρ_ref·r. An M/D/1 server has r ≈ 0 (only
// the requests that straddle a period's edges), an M/M/1 one r ≈ 1/√n
// for n answers a period, and the live CPU r ≈ 0.12 with φ ≈ 0.55 at
// h = 0.5 s. Periods with no answers or no reading are skipped; fewer
// than 4 usable periods give (0, 0).
func KihlNoise(periods []KihlPeriod, rhoRef float64, from time.Duration) (sigma, phi float64) {
	var cost []float64
	for _, p := range periods {
		if p.Start < from || p.Completed <= 0 || math.IsNaN(p.Utilization) {
			continue
		}
		cost = append(cost, p.Utilization*(p.End-p.Start).Seconds()/p.Completed)
	}
	if len(cost) < 4 {
		return 0, 0
	}
	m := report.Mean(cost)
	if !(m > 0) {
		return 0, 0
	}
	var num, den float64
	for i, c := range cost {
		d := c - m
		den += d * d
		if i > 0 {
			num += d * (cost[i-1] - m)
		}
	}
	if den > 0 {
		phi = num / den
	}
	return rhoRef * report.Std(cost) / m, phi
}

// KihlWindowMeanSD is the standard deviation of the mean of n successive
// periods of a stationary AR(1) noise with per-period standard deviation
// σ and lag-1 autocorrelation φ:
//
//	sd = σ·√(F/n),  F = 1 + 2·Σ_{k=1}^{n−1} (1 − k/n)·φ^k.
//
// A negative φ is taken as 0 (a filter that averages alternating noise
// better is not counted on).
func KihlWindowMeanSD(sigma, phi float64, n int) float64 {
	if n < 1 {
		return math.NaN()
	}
	phi = math.Min(math.Max(phi, 0), 0.99)
	f, pk := 1.0, 1.0
	for k := 1; k < n; k++ {
		pk *= phi
		f += 2 * (1 - float64(k)/float64(n)) * pk
	}
	return sigma * math.Sqrt(f/float64(n))
}

// KihlSettleWindow returns the settling window for a run whose server
// adds per-period noise (σ, φ) (KihlNoise): the shortest odd number of
// periods n whose mean has a standard deviation at most band/KihlSettleZ
// (KihlWindowMeanSD), and never shorter than the configured window min
// (the paper-time 5 s). The search stops at the first window of at least
// maxPeriods periods (the run's length): noise that needs a window as
// long as the run cannot be told apart from the loop by this rule, and
// settle.Time finds no full window (NaN: the check fails).
func KihlSettleWindow(sigma, phi, band float64, h, min time.Duration, maxPeriods int) time.Duration {
	n := max(int(min/h), 1)
	if n%2 == 0 {
		n++
	}
	for n < maxPeriods && KihlWindowMeanSD(sigma, phi, n) > band/KihlSettleZ {
		n += 2
	}
	return time.Duration(n) * h
}

// kihlUntil returns how many of periods end by until.
func kihlUntil(periods []KihlPeriod, until time.Duration) int {
	n := 0
	for n < len(periods) && periods[n].End <= until {
		n++
	}
	return n
}

// KihlCheckedSuffix is the metric suffix of the variant whose settling
// time the step figure checks: the M/D/1 variant's ("_md1") where the
// run has one, else the main run's (""). Its service-cost noise sets the
// settling window of every variant: the noise is the server's, and the
// M/D/1 variant measures it without the exponential service's own spread.
func KihlCheckedSuffix(s *report.Summary) string {
	if _, ok := s.Get("settle_noise_sd_md1"); ok {
		return "_md1"
	}
	return ""
}

// KihlSettling sets settle_window_s (once per run, from the checked
// variant's noise: KihlSettleWindow, up to the run's length) and
// settling_time_s + suffix: settle.Time over every period, band
// c.SettleBand, that window. Call it after KihlMetrics of every variant.
func KihlSettling(s *report.Summary, suffix string, periods []KihlPeriod, c KihlParams, until time.Duration) {
	window := KihlCheckedWindow(s, c)
	if _, ok := s.Get("settle_window_s"); !ok {
		cs := KihlCheckedSuffix(s)
		window = KihlSettleWindow(s.Metric("settle_noise_sd"+cs), s.Metric("settle_noise_ac1"+cs), c.SettleBand, c.H, c.SettleWindow,
			int(until/c.H))
		s.Set("settle_window_s", window.Seconds())
	}
	pts := make([]settle.Point, len(periods))
	for i, p := range periods {
		pts[i] = settle.Point{Start: p.Start, End: p.End, Value: p.Utilization, Weight: 1}
	}
	s.Set("settling_time_s"+suffix, settle.Time(pts, c.RhoRef, c.SettleBand, settle.HalfWindow(window, c.H)))
}

// KihlSettleMetric names the settling time the step figure checks.
func KihlSettleMetric(s *report.Summary) string { return "settling_time_s" + KihlCheckedSuffix(s) }

// KihlCheckedWindow is the run's settling window (settle_window_s, set
// by KihlSettling), or c.SettleWindow before it is set.
func KihlCheckedWindow(s *report.Summary, c KihlParams) time.Duration {
	if v, ok := s.Get("settle_window_s"); ok && v > 0 {
		return time.Duration(math.Round(v * float64(time.Second)))
	}
	return c.SettleWindow
}
