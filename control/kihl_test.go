// SPDX-License-Identifier: Apache-2.0

package control

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Paper parameters K = 20, Ti = 2.8 s, h = 1 s, ρ_ref = 0.8, I(0) = 0.
// K·h/Ti = 20/2.8 = 7.142857143.
func TestKihlTimeline(t *testing.T) {
	k := build(t, DefaultKihlConfig(), nil, NewKihl)
	runTimeline(t, k, []step{
		// e = 0.8; u = 20·0.8 + 0 = 16; I = 0 + 7.142857143·0.8 = 5.714285714
		{sluice.Measurements{Utilization: 0, Arrivals: 100}, 16, true},
		// e = 0.44; u = 8.8 + 5.714285714 = 14.514285714; I = 5.714285714 + 3.142857143 = 8.857142857
		{sluice.Measurements{Utilization: 0.36, Arrivals: 100}, 14.514285714, true},
		// e = −0.2; u = −4 + 8.857142857 = 4.857142857; I = 8.857142857 − 1.428571429 = 7.428571429
		{sluice.Measurements{Utilization: 1, Arrivals: 100}, 4.857142857, true},
		// utilization 1.3 is read as 1: e = −0.2; u = −4 + 7.428571429 = 3.428571429
		{sluice.Measurements{Utilization: 1.3, Arrivals: 100}, 3.428571429, true},
		// NaN utilization: hold at 3.428571429, integrator untouched (I = 6)
		{sluice.Measurements{Utilization: nan(), Arrivals: 100}, 3.428571429, false},
		// e = 0; u = I = 7.428571429 − 1.428571429 = 6
		{sluice.Measurements{Utilization: 0.8, Arrivals: 100}, 6, true},
	})
	near(t, "integral", k.Integral(), 6)
}

// Anti-windup at u = 0: with I(0) = 0 and ρ = 1 the output saturates at 0
// and the integrator must not go negative; without anti-windup I would be
// −1.428571429·3 = −4.285714286 and the first step at ρ = 0 would give
// 16 − 4.285714286 = 11.714285714 instead of 16.
func TestKihlAntiWindupAtZero(t *testing.T) {
	k, _ := NewKihl(DefaultKihlConfig())
	sat := sluice.Measurements{Utilization: 1, Arrivals: 100}
	runTimeline(t, k, []step{{sat, 0, true}, {sat, 0, true}, {sat, 0, true},
		{sluice.Measurements{Utilization: 0, Arrivals: 100}, 16, true}})
}

// Anti-windup at the arrivals: u = 12 ≥ 5 arrivals, the gate is not
// binding, so the integrator stays at 0 however long the light load lasts
// (the field notes' "windup after low traffic").
func TestKihlAntiWindupAtArrivals(t *testing.T) {
	k, _ := NewKihl(DefaultKihlConfig())
	light := sluice.Measurements{Utilization: 0.2, Arrivals: 5}
	// e = 0.6: u = 12 + 0 each step.
	runTimeline(t, k, []step{{light, 12, true}, {light, 12, true}, {light, 12, true}})
	near(t, "integral", k.Integral(), 0)
}

// Saturation at max_rate: MaxRate 10/s, h = 1 s → u ≤ 10; the integrator
// is held while saturated high with a positive error.
func TestKihlAntiWindupAtMax(t *testing.T) {
	cfg := DefaultKihlConfig()
	cfg.MaxRate = 10
	k, _ := NewKihl(cfg)
	runTimeline(t, k, []step{
		{sluice.Measurements{Utilization: 0, Arrivals: 100}, 10, true},
		{sluice.Measurements{Utilization: 0, Arrivals: 100}, 10, true},
	})
	near(t, "integral", k.Integral(), 0)
}

// With h = 2 s the decision is a rate u/h: e = 0.8, u = 16 per period →
// 8 req/s; I = 0 + 20·2/2.8·0.8 = 11.428571429.
func TestKihlRateIsUOverH(t *testing.T) {
	cfg := DefaultKihlConfig()
	cfg.Period = 2 * time.Second
	k, _ := NewKihl(cfg)
	d := k.Update(at(2), sluice.Measurements{Elapsed: 2 * time.Second, Utilization: 0, Arrivals: 100})
	near(t, "rate", d.New, 8)
	near(t, "integral", k.Integral(), 11.428571429)
	if k.Period() != 2*time.Second {
		t.Fatal("period")
	}
}
