// SPDX-License-Identifier: Apache-2.0

// Package settle measures how long a controlled quantity takes to settle:
// the settling rules the paper figures use, written once for both the
// simulator's control steps and the live proxy's periods.
//
// A series is a slice of Points, one per control period (or bin), in time
// order. Both rules filter per-period noise with a centred moving
// average, weighted by each point's Weight (the samples behind a mean
// response time, or 1 for a utilization reading); a point of weight 0 or
// with a NaN value adds nothing, and a window with nothing in it is
// unsettled.
package settle

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Point is one period of a series: the interval it covers, the value
// measured over it and the weight of that value.
type Point struct {
	Start, End time.Duration
	Value      float64
	Weight     float64
}

// HalfWindow returns the half-width in periods of a centred window of the
// given length over periods of length h: ⌊max(⌊window/h⌋, 1)/2⌋, so the
// window spans 2·half+1 periods.
func HalfWindow(window, h time.Duration) int {
	if h <= 0 {
		return 0
	}
	return max(int(window/h), 1) / 2
}

// mean returns the weighted mean of the finite values of ps[lo..hi] and
// their total weight.
func mean(ps []Point, lo, hi int) (float64, float64) {
	var sum, w float64
	for _, p := range ps[lo : hi+1] {
		if p.Weight > 0 && !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) {
			sum += p.Value * p.Weight
			w += p.Weight
		}
	}
	if w == 0 {
		return math.NaN(), 0
	}
	return sum / w, w
}

// Time returns the settling time of ps around ref: the end, in seconds,
// of the first point from which the centred moving average over
// 2·half+1 points stays within band of ref (|avg − ref| ≤ band) up to the
// last point with a full window; NaN if the last full window is outside
// the band or there is none. A centred average filters per-period noise
// without the lag of a trailing one. (Andersson, Kihl et al. Fig. 9: the
// utilization's step response.)
func Time(ps []Point, ref, band float64, half int) float64 {
	last := len(ps) - 1 - half
	settled := math.NaN()
	for i := last; i >= half; i-- {
		m, w := mean(ps, i-half, i+half)
		if w == 0 || math.Abs(m-ref) > band {
			break
		}
		settled = ps[i].End.Seconds()
	}
	return settled
}

// Return returns how long after from, in seconds, the series is back
// within band·ref of ref: over the points inside [from, to), the end of
// the first point whose centred moving average (over 2·half+1 points,
// clipped to the interval) is within the band after an earlier one was
// outside it. It is 0 when the average never leaves the band and NaN when
// it does not come back before to. (Kamra et al. Figs. 10–16: the mean
// response time after each wave of users.)
func Return(ps []Point, from, to time.Duration, ref, band float64, half int) float64 {
	var in []Point
	for _, p := range ps {
		if p.Start >= from && p.End <= to {
			in = append(in, p)
		}
	}
	left := false
	for j := range in {
		m, w := mean(in, max(j-half, 0), min(j+half, len(in)-1))
		inside := w > 0 && math.Abs(m-ref) <= band*ref
		switch {
		case !inside:
			left = true
		case left:
			return (in[j].End - from).Seconds()
		}
	}
	if !left {
		return 0
	}
	return math.NaN()
}

// Format writes settling times as "a/b/c" in seconds, "never" for NaN.
func Format(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		if math.IsNaN(x) {
			parts[i] = "never"
		} else {
			parts[i] = strconv.FormatFloat(x, 'g', 4, 64)
		}
	}
	return strings.Join(parts, "/")
}
