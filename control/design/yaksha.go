// SPDX-License-Identifier: Apache-2.0

package design

import (
	"fmt"
	"math"
	"time"
)

// DefaultYakshaPole is the closed-loop pole of the Yaksha design, in 1/s:
// s = −0.1, a 10 s time constant.
const DefaultYakshaPole = -0.1

// YakshaGains are the PI gains of the Yaksha controller (Kamra, Misra and
// Nahum, "Yaksha: A Self-Tuning Controller for Managing the Performance of
// 3-Tiered Web sites").
//
// The plant is an M/GI/1-PS queue, T = E[X] / (1 − pa·λ·E[X]), linearised
// around the operating point: Kg = ∂T/∂pa = λ0·Tref² (seconds). With the
// closed-loop pole at s = pole and a 45° phase margin:
//
//	Kp = 1 / (√2·Kg)
//	Ki = −pole · (Kp + 1/Kg)
//
// and, discretised with the bilinear (Tustin) transform at period h
// (ALGORITHMS.md erratum: the paper prints Ki/(2fT); with f = 1/h it is
// Ki·h/2):
//
//	A = Kp + Ki·h/2
//	B = Kp − Ki·h/2
//
// Kp and A, B are in 1/s (drop probability per second of response-time
// error); Ki is in 1/s².
type YakshaGains struct {
	Kg float64 `json:"kg"`
	Kp float64 `json:"kp"`
	Ki float64 `json:"ki"`
	A  float64 `json:"a"`
	B  float64 `json:"b"`
}

// YakshaFromKg computes the gains for a plant gain kg (seconds), control
// period h and closed-loop pole (1/s, negative).
func YakshaFromKg(kg float64, h time.Duration, pole float64) (YakshaGains, error) {
	switch {
	case !(kg > 0) || math.IsInf(kg, 0):
		return YakshaGains{}, fmt.Errorf("design: kg must be a positive finite number of seconds, got %v", kg)
	case h <= 0:
		return YakshaGains{}, fmt.Errorf("design: h must be positive, got %v", h)
	case !(pole < 0) || math.IsInf(pole, 0):
		return YakshaGains{}, fmt.Errorf("design: pole must be negative and finite, got %v", pole)
	}
	kp := 1 / (math.Sqrt2 * kg)
	ki := -pole * (kp + 1/kg)
	hs := h.Seconds()
	g := YakshaGains{Kg: kg, Kp: kp, Ki: ki, A: kp + ki*hs/2, B: kp - ki*hs/2}
	for _, x := range []float64{g.Kp, g.Ki, g.A, g.B} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return YakshaGains{}, fmt.Errorf("design: kg = %v s with h = %v gives non-finite gains; use a larger kg", kg, h)
		}
	}
	return g, nil
}

// Yaksha computes the gains from the design inputs: the response-time
// target tref, the nominal arrival rate lambda0 (req/s) and the control
// period h, with the closed-loop pole at DefaultYakshaPole.
// Kg = lambda0·tref².
func Yaksha(tref time.Duration, lambda0 float64, h time.Duration) (YakshaGains, error) {
	if tref <= 0 {
		return YakshaGains{}, fmt.Errorf("design: tref must be positive, got %v", tref)
	}
	if !(lambda0 > 0) || math.IsInf(lambda0, 0) {
		return YakshaGains{}, fmt.Errorf("design: lambda0 must be a positive finite rate in req/s, got %v", lambda0)
	}
	t := tref.Seconds()
	return YakshaFromKg(lambda0*t*t, h, DefaultYakshaPole)
}
