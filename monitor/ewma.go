// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"fmt"
	"math"
)

// EWMA is an exponentially weighted moving average in SEDA's notation:
//
//	v ← α·v + (1−α)·x
//
// where α is the weight of the OLD value (α = 0.7 in SEDA: a new sample
// moves the average 30% of the way towards it) and x is the new sample. The
// first sample initialises v to x. α = 0 makes the average follow the last
// sample exactly.
//
// Samples that are NaN or ±Inf are ignored (the average holds), so one
// corrupt reading cannot poison it forever. The unit of v is the unit of
// the samples.
//
// EWMA is a small state machine and is not safe for concurrent use; its
// single caller (a controller runner) serialises Update calls. The zero
// value is not usable; create one with NewEWMA.
type EWMA struct {
	alpha float64
	v     float64
	n     int
}

// NewEWMA returns an empty average with old-value weight alpha. It returns
// an error if alpha is NaN or outside [0, 1) (α = 1 would never move).
func NewEWMA(alpha float64) (*EWMA, error) {
	if math.IsNaN(alpha) || alpha < 0 || alpha >= 1 {
		return nil, fmt.Errorf("monitor: EWMA alpha %v out of range [0, 1)", alpha)
	}
	return &EWMA{alpha: alpha}, nil
}

// Alpha returns the weight of the old value.
func (e *EWMA) Alpha() float64 { return e.alpha }

// Update folds sample x into the average and returns the new value. The
// first finite sample sets the value to x; non-finite samples are ignored
// and the current value is returned.
func (e *EWMA) Update(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return e.v
	}
	if e.n == 0 {
		e.v = x
	} else {
		e.v = e.alpha*e.v + (1-e.alpha)*x
	}
	e.n++
	return e.v
}

// Value returns the current average and whether any sample has been folded
// in since construction or the last Reset. Before the first sample it
// returns (0, false).
func (e *EWMA) Value() (v float64, ok bool) { return e.v, e.n > 0 }

// Count returns the number of samples folded in since construction or the
// last Reset.
func (e *EWMA) Count() int { return e.n }

// Reset forgets every sample; the next Update initialises the average
// again.
func (e *EWMA) Reset() { e.v, e.n = 0, 0 }
