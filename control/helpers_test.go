// SPDX-License-Identifier: Apache-2.0

package control

import (
	"cmp"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns t0 + k seconds.
func at(k int) time.Time { return t0.Add(time.Duration(k) * time.Second) }

// near fails the test unless got is within 1e-6 (relative to 1) of want.
func near(t *testing.T, step string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s: got %.9g, want %.9g", step, got, want)
	}
}

// step describes one Update call of a timeline and the setting expected.
type step struct {
	m     sluice.Measurements
	want  float64
	acted bool
}

// runTimeline feeds steps to c one second apart and checks New and Acted.
func runTimeline(t *testing.T, c sluice.Controller, steps []step) []sluice.Decision {
	t.Helper()
	var out []sluice.Decision
	for i, s := range steps {
		s.m.Elapsed = cmp.Or(s.m.Elapsed, time.Second)
		d := c.Update(at(i+1), s.m)
		near(t, "step "+strconv.Itoa(i+1)+" ("+d.Reason+")", d.New, s.want)
		if d.Acted != s.acted {
			t.Fatalf("step %d: acted = %v, want %v (%s)", i+1, d.Acted, s.acted, d.Reason)
		}
		if d.Reason == "" {
			t.Fatalf("step %d: empty reason", i+1)
		}
		if c.Current().New != d.New {
			t.Fatalf("step %d: Current().New %v != decision %v", i+1, c.Current().New, d.New)
		}
		out = append(out, d)
	}
	return out
}

func nan() float64 { return math.NaN() }

// build returns the controller newFn makes of cfg after edit (nil: cfg as
// it is), failing t if it refuses the configuration.
func build[C, T any](t *testing.T, cfg C, edit func(*C), newFn func(C) (T, error)) T {
	t.Helper()
	if edit != nil {
		edit(&cfg)
	}
	c, err := newFn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkFieldError fails unless cfg is rejected, by Validate and New, with
// an error that names field.
func checkFieldError(t *testing.T, cfg Config, field string) {
	t.Helper()
	err := cfg.Validate()
	if err == nil {
		t.Fatalf("%s: accepted", field)
	}
	if FieldOf(err) != field || !strings.HasPrefix(err.Error(), field+":") {
		t.Fatalf("error names %q, want %q: %v", FieldOf(err), field, err)
	}
	if _, err := cfg.New(); err == nil {
		t.Fatalf("%s: New accepted an invalid config", field)
	}
}

// fieldCase is one invalid configuration: edit breaks field.
type fieldCase[C any] struct {
	field string
	edit  func(*C)
}

// checkFieldErrors applies each case's edit to a fresh def() and checks
// that the result is rejected naming the case's field (checkFieldError).
func checkFieldErrors[C any, P interface {
	*C
	Config
}](t *testing.T, def func() C, cases []fieldCase[C]) {
	t.Helper()
	for _, tc := range cases {
		cfg := def()
		tc.edit(&cfg)
		checkFieldError(t, P(&cfg), tc.field)
	}
}
