// SPDX-License-Identifier: Apache-2.0

package design

import (
	"math"
	"testing"
	"time"
)

func TestYakshaPaperValues(t *testing.T) {
	// Hand arithmetic for Tref = 150 ms, λ0 = 50 req/s, h = 1 s, pole −0.1:
	//   Kg = λ0·Tref² = 50 · 0.0225          = 1.125 s
	//   Kp = 1/(√2·Kg) = 1/1.590990          = 0.628539
	//   Ki = 0.1·(Kp + 1/Kg) = 0.1·(0.628539 + 0.888889) = 0.151743
	//   A  = Kp + Ki·h/2 = 0.628539 + 0.075871 = 0.704410
	//   B  = Kp − Ki·h/2 = 0.628539 − 0.075871 = 0.552668
	g, err := Yaksha(150*time.Millisecond, 50, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"kg", g.Kg, 1.125},
		{"kp", g.Kp, 0.628539},
		{"ki", g.Ki, 0.151743},
		{"a", g.A, 0.704410},
		{"b", g.B, 0.552668},
	} {
		if math.Abs(c.got-c.want) > 1e-6 {
			t.Errorf("%s = %.7f, want %.6f", c.name, c.got, c.want)
		}
	}
}

// TestYakshaTustinErratum pins the ALGORITHMS.md erratum: the bilinear
// transform splits Ki·h evenly between A and B (A − B = Ki·h, A + B = 2·Kp),
// so the integral action per period scales with h.
func TestYakshaTustinErratum(t *testing.T) {
	for _, h := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second} {
		g, err := YakshaFromKg(2, h, -0.2)
		if err != nil {
			t.Fatal(err)
		}
		if d := g.A - g.B; math.Abs(d-g.Ki*h.Seconds()) > 1e-12 {
			t.Errorf("h = %v: A − B = %v, want Ki·h = %v", h, d, g.Ki*h.Seconds())
		}
		if s := g.A + g.B; math.Abs(s-2*g.Kp) > 1e-12 {
			t.Errorf("h = %v: A + B = %v, want 2·Kp = %v", h, s, 2*g.Kp)
		}
		// Ki = −pole·(Kp + 1/Kg) with Kp = 1/(√2·Kg).
		if want := 0.2 * (1/(math.Sqrt2*2) + 0.5); math.Abs(g.Ki-want) > 1e-12 {
			t.Errorf("Ki = %v, want %v", g.Ki, want)
		}
	}
}

func TestYakshaErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	yaksha := func(tref time.Duration, lambda0 float64, h time.Duration) error {
		_, err := Yaksha(tref, lambda0, h)
		return err
	}
	checkErrors(t, []errCase{
		{"zero tref", yaksha(0, 50, time.Second), "tref"},
		{"negative tref", yaksha(-time.Millisecond, 50, time.Second), "tref"},
		{"zero lambda0", yaksha(time.Second, 0, time.Second), "lambda0"},
		{"negative lambda0", yaksha(time.Second, -3, time.Second), "lambda0"},
		{"NaN lambda0", yaksha(time.Second, nan, time.Second), "lambda0"},
		{"infinite lambda0", yaksha(time.Second, inf, time.Second), "lambda0"},
		{"zero h", yaksha(time.Second, 50, 0), "h must be positive"},
		{"negative h", yaksha(time.Second, 50, -time.Second), "h must be positive"},
	})
}

func TestYakshaFromKgErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	fromKg := func(kg float64, h time.Duration, pole float64) error {
		_, err := YakshaFromKg(kg, h, pole)
		return err
	}
	checkErrors(t, []errCase{
		{"zero kg", fromKg(0, time.Second, -0.1), "kg"},
		{"NaN kg", fromKg(nan, time.Second, -0.1), "kg"},
		{"infinite kg", fromKg(inf, time.Second, -0.1), "kg"},
		{"zero h", fromKg(1, 0, -0.1), "h must"},
		{"zero pole", fromKg(1, time.Second, 0), "pole"},
		{"positive pole", fromKg(1, time.Second, 0.5), "pole"},
		{"NaN pole", fromKg(1, time.Second, nan), "pole"},
		{"infinite pole", fromKg(1, time.Second, -inf), "pole"},
	})
}

// A vanishing Kg would give infinite gains: reported as an error, never Inf.
func TestYakshaFromKgNonFinite(t *testing.T) {
	if _, err := YakshaFromKg(1e-320, time.Second, DefaultYakshaPole); err == nil {
		t.Fatal("non-finite gains accepted")
	}
}
