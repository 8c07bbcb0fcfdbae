// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// window accumulates the measurements of one window: first it settles
// (the number in service reaches the window's limit), then it measures
// until it is complete (Auto.measure) and is judged by its phase.
type window struct {
	limit    float64 // the window's limit
	settled  bool    // the settling part is over: measuring
	elapsed  float64 // s
	done     float64 // successful completions
	inFlight float64 // ∫ n dt, request·s
	samples  float64 // service-time samples
	sumR     float64 // Σ samples·mean service time, s
	p50n     float64 // service-time samples behind sumP50
	sumP50   float64 // Σ samples·median service time of each step, s
	par      float64 // the largest Parallel of its steps (0: none)
	shareSum float64 // Σ completions·BackendShare over the steps that measured it
	shareN   float64 // the completions behind shareSum
	peak     float64 // the largest MaxInFlight of its steps
}

// x is the window's throughput X of successful completions, in req/s.
func (w window) x() float64 { return w.done / w.elapsed }

// meanN is the window's mean number in service n̄.
func (w window) meanN() float64 { return w.inFlight / w.elapsed }

// meanR is the window's mean service time R, in s.
func (w window) meanR() float64 { return w.sumR / w.samples }

// add accumulates one measuring step of el seconds; a measurement that
// is not a finite number ≥ 0 is left out.
func (w *window) add(m sluice.Measurements, el float64) {
	w.elapsed += el
	if mathx.Usable(m.InFlight) {
		w.inFlight += m.InFlight * el
	}
	ok := m.Completed - math.Max(m.Failed, 0) // successful completions
	if mathx.Usable(ok) {
		w.done += ok
	}
	if mathx.Usable(m.Parallel) && m.Parallel > w.par {
		w.par = m.Parallel
	}
	if mathx.Usable(m.BackendShare) && m.BackendShare > 0 && mathx.Usable(ok) && ok > 0 {
		w.shareSum += ok * m.BackendShare
		w.shareN += ok
	}
	if mathx.Usable(m.MaxInFlight) && m.MaxInFlight > w.peak {
		w.peak = m.MaxInFlight
	}
	if n := m.ServiceSamples; n > 0 && mathx.Usable(m.ServiceMean) {
		w.samples += n
		w.sumR += n * m.ServiceMean
	}
	if n := m.ServiceSamples; n > 0 && mathx.Usable(m.ServiceP50) {
		w.p50n += n
		w.sumP50 += n * m.ServiceP50
	}
}
