// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseDurationExact(t *testing.T) {
	cases := []struct{ in, want string }{
		{"exp:20ms", "exp:0.02"},
		{"det:10ms", "det:0.01"},
		{"lognormal:20ms,1.5", "lognormal:0.02,1.5"},
		{"pareto:1ms,2s,1.2", "pareto:0.001,2,1.2"},
		{"uniform:1s,3s", "uniform:1,3"},
		{"exp:0.7s,max=7s", "exp:0.7,max=7"},
		{" EXP : 0.7 , MAX = 7s ", "exp:0.7,max=7"},
		{"det:0.25", "det:0.25"},
		{"det:1m30s", "det:90"},
		{"det:0", "det:0"},
		{"lognormal:20ms,0", "lognormal:0.02,0"},
	}
	for _, tc := range cases {
		d, err := ParseDuration(tc.in)
		if err != nil {
			t.Errorf("ParseDuration(%q): %v", tc.in, err)
			continue
		}
		if got := d.String(); got != tc.want {
			t.Errorf("ParseDuration(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Errorf("round trip of %q: %v, %v", d.String(), back, err)
		}
	}
}

func TestParseSizeExact(t *testing.T) {
	cases := []struct {
		in   string
		want float64 // mean
		str  string
	}{
		{"det:1500", 1500, "det:1500"},
		{"det:10KB", 10000, "det:10000"},
		{"det:10kb", 10000, "det:10000"},
		{"det:1MiB", 1 << 20, "det:1048576"},
		{"det:2GiB", 2 << 30, "det:2147483648"},
		{"det:3B", 3, "det:3"},
		{"det:1.5 KiB", 1536, "det:1536"},
		{"uniform:1KB,3KB", 2000, "uniform:1000,3000"},
		{"exp:10KB,max=1MB", 10000 * (1 - math.Exp(-100)), "exp:10000,max=1000000"},
	}
	for _, tc := range cases {
		d, err := ParseSize(tc.in)
		if err != nil {
			t.Errorf("ParseSize(%q): %v", tc.in, err)
			continue
		}
		if got := d.Mean(); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("ParseSize(%q).Mean() = %v, want %v", tc.in, got, tc.want)
		}
		if got := d.String(); got != tc.str {
			t.Errorf("ParseSize(%q).String() = %q, want %q", tc.in, got, tc.str)
		}
	}
	if _, err := ParseSize("det:10ms"); err == nil || !strings.Contains(err.Error(), `"10ms"`) {
		t.Errorf("ParseSize(det:10ms) error %v, want it to name the token", err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "expected KIND:PARAMS"},
		{"20ms", "expected KIND:PARAMS"},
		{"gauss:1", `unknown kind "gauss"`},
		{"exp:", "MEAN is empty"},
		{"exp:abc", `MEAN = "abc": expected a duration`},
		{"exp:-1s", "MEAN = -1"},
		{"exp:0", "MEAN = 0"},
		{"exp:1s,2s", `unexpected extra parameter "2s"`},
		{"exp:1s,max=x", `max = "x"`},
		{"exp:1s,max=0", "max = 0"},
		{"exp:1s,max=1s,max=2s", "given twice"},
		{"exp:1s,min=1s", `unknown option "min=1s"`},
		{"lognormal:20ms", "missing SIGMA"},
		{"lognormal:20ms,1.5s", `SIGMA = "1.5s": expected a plain number`},
		{"lognormal:20ms,12", "SIGMA = 12"},
		{"pareto:1ms,2s", "missing ALPHA"},
		{"pareto:2s,1ms,1", "MAX = 0.001"},
		{"uniform:3,1", "B = 1"},
		{"det:NaN", "V = \"NaN\""},
		{"det:inf", "V = +Inf"},
		{"exp:1s,max=2s,3", "options must come last"},
	}
	for _, tc := range cases {
		_, err := ParseDuration(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseDuration(%q) error %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func checkParsed(t *testing.T, s string, d Dist, err error) {
	if err != nil {
		if d != nil {
			t.Fatalf("%q: non-nil Dist with error %v", s, err)
		}
		return
	}
	m := d.Mean()
	if !finite(m) || m < 0 {
		t.Fatalf("%q parsed to %v with mean %v", s, d, m)
	}
	x := d.Sample(rand.New(rand.NewPCG(1, 2)))
	if math.IsNaN(x) || x < 0 {
		t.Fatalf("%q parsed to %v, sampled %v", s, d, x)
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"exp:20ms", "det:10ms", "lognormal:20ms,1.5", "pareto:1ms,2s,1.2",
		"exp:0.7s,max=7s", "uniform:1s,3s", "pareto:1e-300,1e300,0.01", "lognormal:1e300,10", "exp:1h,max=1ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		checkParsed(t, s, d, err)
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"det:1500", "pareto:1KB,10MB,1.1", "exp:10KiB,max=1MiB", "uniform:0,1e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseSize(s)
		checkParsed(t, s, d, err)
	})
}
