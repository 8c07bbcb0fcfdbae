// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lab/dist"
)

func TestFluidByHand(t *testing.T) {
	alpha, _ := dist.NewDeterministic(10)
	sigma, _ := dist.NewDeterministic(4)
	f, err := NewFluid(FluidConfig{Arrivals: alpha, Departures: sigma}, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	// α = 10, σ = 4 every period.
	steps := []struct {
		u, ubar, x, rho, next float64
	}{
		{6, 6, 0, 1, 2},          // ρ = min(6/4, 1); x = 0 + 6 − 4
		{1, 1, 2, 0.75, 0},       // ρ = (1 + 2)/4; x = max(0, 2 + 1 − 4)
		{20, 10, 0, 1, 6},        // ū clamped to α
		{-3, 0, 6, 1, 2},         // ū clamped to 0; ρ = min(6/4, 1)
		{0, 0, 2, 0.5, 0},        // ρ = 2/4
		{math.NaN(), 0, 0, 0, 0}, // NaN counts as 0
		{math.Inf(1), 10, 0, 1, 6},
	}
	for k, s := range steps {
		rho := f.Step(s.u)
		got := f.Last()
		if rho != s.rho || got.UBar != s.ubar || got.X != s.x || got.XNext != s.next || got.K != k || f.Queue() != s.next {
			t.Errorf("step %d (u=%v): %+v, want ū=%v x=%v ρ=%v x'=%v", k, s.u, got, s.ubar, s.x, s.rho, s.next)
		}
	}
}

func TestFluidZeroCapacity(t *testing.T) {
	alpha, _ := dist.NewDeterministic(1)
	f, _ := NewFluid(FluidConfig{Arrivals: alpha, Departures: dist.Deterministic{}}, rand.New(rand.NewPCG(1, 1)))
	if rho := f.Step(0); rho != 0 {
		t.Errorf("no work, no capacity: ρ = %v, want 0", rho)
	}
	if rho := f.Step(1); rho != 1 || f.Queue() != 1 {
		t.Errorf("work, no capacity: ρ = %v, x = %v; want 1, 1", rho, f.Queue())
	}
}

// TestFluidPoisson: admitting everything at λ < μ, the mean utilization
// is close to λ/μ and the queue stays small.
func TestFluidPoisson(t *testing.T) {
	a, _ := dist.NewPoissonCount(30)
	s, _ := dist.NewPoissonCount(44.4)
	f, err := NewFluid(FluidConfig{Arrivals: a, Departures: s}, rand.New(rand.NewPCG(2, 2)))
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	const n = 20000
	for range n {
		sum += f.Step(math.Inf(1))
	}
	if got, want := sum/n, 30/44.4; math.Abs(got-want) > 0.02 {
		t.Errorf("mean utilization %.4f, want about %.4f", got, want)
	}
}

func TestFluidValidate(t *testing.T) {
	d := dist.Deterministic{}
	r := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		cfg  FluidConfig
		r    *rand.Rand
		want string
	}{
		{FluidConfig{Departures: d}, r, "Arrivals is nil"},
		{FluidConfig{Arrivals: d}, r, "Departures is nil"},
		{FluidConfig{Arrivals: d, Departures: d, Queue: -1}, r, "Queue = -1"},
		{FluidConfig{Arrivals: d, Departures: d}, nil, "nil *rand.Rand"},
	} {
		if _, err := NewFluid(tc.cfg, tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewFluid error %v, want %q", err, tc.want)
		}
	}
}
