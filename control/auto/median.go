// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/internal/mathx"
)

// The median test of auto's probes (Config.MedianProbe).
//
// Above the service's parallelism W, the requests auto lets in beyond W
// queue inside the service: by Little's law the service time grows with
// the number in service, R ∝ n, while the throughput stays X = W/s. The
// throughput probes see that only as a ratio X_probe/X_base near 1, and
// behind a heavy-tailed service time that ratio is noise: a window of
// 200 lognormal σ 1.5 service times has a coefficient of variation of
// 0.2 (√((e^σ² − 1)/200)), more than the low probe's whole margin. The
// median service time is robust to the tail (the standard error of a
// sample median is √(π/2)·σ/√n in log scale for a lognormal, 0.13 for
// 200 samples of σ 1.5, and it does not depend on the tail beyond σ),
// and it moves with the queue inside: every request waits there, not
// only the unlucky ones. So with p = L_probe/L_base the probe's ratio of
// concurrency and m = median_probe/median_base (each window's median
// taken as the sample-weighted mean of its steps' medians):
//
//	low probe (p < 1),  m ≤ 1 − (1 − p)/2  ⇒  L ← L/√b
//	                                          (the base queued inside)
//	high probe (p > 1), m ≥ 1 + (p − 1)/2  ⇒  L holds
//	                                          (the probe queued inside)
//
// The thresholds are half of what pure queueing moves the median by
// (m = p), so the test is as far from a false cut below W (m ≈ 1) as
// from a missed one. A window of fewer than medianSamples samples gives
// no verdict.

// medianSamples is the least number of service-time samples a window
// (and its base) needs before the median test judges it.
const medianSamples = 50

// medianRatio returns the ratio of window w's median service time to the
// base window's, and whether both have enough samples.
func (a *Auto) medianRatio(w window) (float64, bool) {
	b := a.base
	if !a.cfg.MedianProbe || w.p50n < medianSamples || b.p50n < medianSamples || !(b.sumP50 > 0) {
		return 0, false
	}
	m := (w.sumP50 / w.p50n) / (b.sumP50 / b.p50n)
	return m, mathx.Usable(m)
}

// medianCut is the median test of a low probe w: when its median service
// time fell by at least half as much as its concurrency, the base window
// queued inside the service, and L ← L/√b.
func (a *Auto) medianCut(w window) (string, bool) {
	m, ok := a.medianRatio(w)
	p := w.limit / a.base.limit
	if !ok || !(p < 1) || m > 1-(1-p)/2 || a.limit <= a.cfg.MinLimit {
		return "", false
	}

	old := a.limit
	a.limit = mathx.Clamp(a.limit/math.Sqrt(a.cfg.LowProbe), a.cfg.MinLimit, a.cfg.MaxLimit)
	return fmt.Sprintf("L %.4g → %.4g: low probe %g: median service time ×%.3f at ×%.3f the concurrency: the base queued inside the service", old, a.limit, w.limit, m, p), true
}

// medianHeld is the median test of a high probe w: when its median
// service time rose by at least half as much as its concurrency, the
// probe only queued inside the service, and L holds.
func (a *Auto) medianHeld(w window) (string, bool) {
	m, ok := a.medianRatio(w)
	p := w.limit / a.base.limit
	if !ok || !(p > 1) || m < 1+(p-1)/2 {
		return "", false
	}
	return fmt.Sprintf("hold L %.4g: high probe %g: median service time ×%.3f at ×%.3f the concurrency: the probe queued inside the service", a.limit, w.limit, m, p), true
}
