// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestScheduleAt(t *testing.T) {
	s, err := ParseSchedule("0s:300,50s:850,70s:300")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		at   time.Duration
		want float64
	}{
		{0, 300}, {time.Second, 300}, {50*time.Second - 1, 300}, {50 * time.Second, 850},
		{70*time.Second - 1, 850}, {70 * time.Second, 300}, {1000 * time.Hour, 300},
	}
	for _, tc := range cases {
		if got := s.At(tc.at); got != tc.want {
			t.Errorf("At(%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
	if got := s.String(); got != "0s:300,50s:850,1m10s:300" {
		t.Errorf("String() = %q", got)
	}
	back, err := ParseSchedule(s.String())
	if err != nil || back.String() != s.String() {
		t.Errorf("round trip: %v, %v", back, err)
	}
	if next, ok := s.NextChange(50 * time.Second); !ok || next != 70*time.Second {
		t.Errorf("NextChange(50s) = %v, %v", next, ok)
	}
	if _, ok := s.NextChange(70 * time.Second); ok {
		t.Error("NextChange after the last segment reported a change")
	}
	if s.Max() != 850 {
		t.Errorf("Max() = %v", s.Max())
	}
}

func TestScheduleLateStartAndConstant(t *testing.T) {
	s, err := ParseSchedule("10s:5, 20:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{{0, 0}, {10*time.Second - 1, 0}, {10 * time.Second, 5}, {20 * time.Second, 0}} {
		if got := s.At(tc.at); got != tc.want {
			t.Errorf("At(%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
	c, err := ParseSchedule("300")
	if err != nil || c.At(0) != 300 || c.At(time.Hour) != 300 {
		t.Errorf("constant schedule: %v, %v", c, err)
	}
	var zero Schedule
	if zero.At(time.Second) != 0 || zero.String() != "0" {
		t.Errorf("zero schedule: At = %v, String = %q", zero.At(time.Second), zero.String())
	}
}

func TestScheduleErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "empty"},
		{"abc", "expected a rate"},
		{"-3", "expected a rate"},
		{"0s:300,abc", `entry 2 "abc": expected OFFSET:RATE`},
		{"0s:300,50s:x", `entry 2 "50s:x": rate "x"`},
		{"0s:300,50s:-1", `rate "-1"`},
		{"0s:300,xs:10", `offset "xs"`},
		{"-1s:300", "is negative"},
		{"0s:300,50s:850,40s:300", `entry 3 "40s:300": offset 40s is not after the previous offset 50s`},
		{"0s:1,0s:2", "not after"},
		{"0s:300,", `entry 2 ""`},
		{"1e30s:1", `offset "1e30s"`},
		{"1e30:1", "too large"},
	}
	for _, tc := range cases {
		_, err := ParseSchedule(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSchedule(%q) error %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
	if _, err := NewSchedule(Segment{Start: time.Second, Rate: 1}, Segment{Start: time.Second, Rate: 2}); err == nil || !strings.Contains(err.Error(), "segment 2") {
		t.Errorf("NewSchedule with equal starts: %v", err)
	}
}

func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"0s:300,50s:850,70s:300", "300", "10s:5,20:0", "0:1e308"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sch, err := ParseSchedule(s)
		if err != nil {
			return
		}
		segs := sch.Segments()
		for i, sg := range segs {
			if sg.Start < 0 || sg.Rate < 0 || !finite(sg.Rate) || (i > 0 && sg.Start <= segs[i-1].Start) {
				t.Fatalf("%q parsed to invalid segments %v", s, segs)
			}
		}
		if _, err := ParseSchedule(sch.String()); err != nil {
			t.Fatalf("%q: String() %q does not parse: %v", s, sch.String(), err)
		}
		r := rand.New(rand.NewPCG(1, 1))
		for _, a := range []Arrivals{Poisson{Rate: sch}, Constant{Rate: sch}} {
			if next := a.Next(r, 0); next <= 0 {
				t.Fatalf("%q: %T.Next(0) = %v", s, a, next)
			}
		}
	})
}
