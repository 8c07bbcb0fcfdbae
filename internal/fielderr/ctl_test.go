// SPDX-License-Identifier: Apache-2.0

package fielderr

import (
	"math"
	"testing"
	"time"
)

func TestPositiveDurationAndAtLeast(t *testing.T) {
	if err := PositiveDuration("period", time.Millisecond, "1s"); err != nil {
		t.Errorf("1ms: %v", err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		err := PositiveDuration("period", d, "1s")
		if want := "period: " + d.String() + " is invalid: must be a positive duration such as 1s"; err == nil || err.Error() != want {
			t.Errorf("%v: %v, want %q", d, err, want)
		}
	}
	if err := AtLeast("nreq", 1, 1); err != nil {
		t.Errorf("1 ≥ 1: %v", err)
	}
	if err := AtLeast("nreq", 0, 1); err == nil || err.Error() != "nreq: 0 is invalid: must be ≥ 1" {
		t.Errorf("0 ≥ 1: %v", err)
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		open, close byte
		x           float64
		ok          bool
	}{
		{'(', ']', 0.5, true}, {'(', ']', 1, true}, {'(', ']', 0, false}, {'(', ']', 1.01, false},
		{'[', ')', 0, true}, {'[', ')', 1, false}, {'[', ')', -0.1, false},
		{'(', ')', 0.999, true}, {'(', ')', 0, false}, {'(', ')', 1, false},
		{'[', ']', 0, true}, {'[', ']', 1, true},
		{'[', ']', math.NaN(), false}, {'[', ']', math.Inf(1), false}, {'(', ']', math.Inf(-1), false},
	} {
		err := Within("x", c.x, c.open, 0, 1, c.close)
		if (err == nil) != c.ok {
			t.Errorf("%v in %c0, 1%c: %v, want ok %v", c.x, c.open, c.close, err, c.ok)
		}
	}
	if err := Within("high_probe", 1, '(', 1, 4, ']'); err == nil || err.Error() != "high_probe: 1 is invalid: must be within (1, 4]" {
		t.Errorf("message: %v", err)
	}
}
