// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/sluicehq/sluice/lab/dist"
)

// FluidConfig configures the discrete-time fluid model.
type FluidConfig struct {
	// Arrivals is the distribution of α(k), the requests arriving in one
	// period (for Poisson arrivals at λ: dist.NewPoissonCount(λh)).
	// Required.
	Arrivals dist.Dist
	// Departures is the distribution of σ(k), the most requests the
	// server can finish in one period (for service rate μ:
	// dist.NewPoissonCount(μh)). Required.
	Departures dist.Dist
	// Queue is the initial backlog x(0) in requests; ≥ 0.
	Queue float64
}

// Validate reports the first invalid field, or nil.
func (c FluidConfig) Validate() error {
	if c.Arrivals == nil {
		return fmt.Errorf("sim: FluidConfig.Arrivals is nil")
	}
	if c.Departures == nil {
		return fmt.Errorf("sim: FluidConfig.Departures is nil")
	}
	if !(c.Queue >= 0) || math.IsInf(c.Queue, 0) {
		return fmt.Errorf("sim: FluidConfig.Queue = %v: must be a finite number ≥ 0", c.Queue)
	}
	return nil
}

// FluidStep is the record of one period of the fluid model.
type FluidStep struct {
	// K is the period index, from 0.
	K int
	// U is the admissions the controller asked for; UBar what was used,
	// clamp(U, 0, Alpha).
	U, UBar float64
	// Alpha and Sigma are the period's arrivals and maximum departures.
	Alpha, Sigma float64
	// X is the backlog at the start of the period, XNext at its end.
	X, XNext float64
	// Rho is the period's utilization.
	Rho float64
}

// Fluid is the discrete-time fluid model of a token-bucket-gated server
// (Kihl et al., ALGORITHMS.md §4). In period k, with backlog x(k), α(k)
// arrivals and at most σ(k) departures, a controller allows u(k)
// admissions and
//
//	ū(k)   = clamp(u(k), 0, α(k))
//	ρ(k)   = min((ū(k) + x(k)) / σ(k), 1)
//	x(k+1) = max(0, x(k) + ū(k) − σ(k))
//
// with ρ(k) = 1 when σ(k) = 0 and there is work, and 0 when there is none.
// α(k) and σ(k) are drawn independently each period.
type Fluid struct {
	cfg  FluidConfig
	rng  *rand.Rand
	x    float64
	k    int
	last FluidStep
}

// NewFluid returns the model with backlog cfg.Queue, drawing from r.
func NewFluid(cfg FluidConfig, r *rand.Rand) (*Fluid, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("sim: NewFluid: nil *rand.Rand")
	}
	return &Fluid{cfg: cfg, rng: r, x: cfg.Queue}, nil
}

// Step runs one period with u admissions allowed and returns its
// utilization ρ(k). A NaN u counts as 0 and +Inf as "admit all".
func (f *Fluid) Step(u float64) float64 {
	alpha := f.cfg.Arrivals.Sample(f.rng)
	sigma := f.cfg.Departures.Sample(f.rng)
	ubar := u
	switch {
	case math.IsNaN(u) || u < 0:
		ubar = 0
	case u > alpha:
		ubar = alpha
	}
	work := ubar + f.x
	var rho float64
	switch {
	case sigma > 0:
		rho = math.Min(work/sigma, 1)
	case work > 0:
		rho = 1
	}
	next := math.Max(0, f.x+ubar-sigma)
	f.last = FluidStep{K: f.k, U: u, UBar: ubar, Alpha: alpha, Sigma: sigma, X: f.x, XNext: next, Rho: rho}
	f.x = next
	f.k++
	return rho
}

// Queue returns the current backlog x(k).
func (f *Fluid) Queue() float64 { return f.x }

// Last returns the record of the most recent Step (the zero FluidStep
// before the first).
func (f *Fluid) Last() FluidStep { return f.last }
