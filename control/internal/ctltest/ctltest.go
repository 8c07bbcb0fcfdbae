// SPDX-License-Identifier: Apache-2.0

// Package ctltest holds the test helpers that the tests of the
// controllers' packages (control and control/auto) share: the start of
// their virtual clock, a tolerant comparison of numbers, building a
// controller from an edited configuration, and checking that an invalid
// configuration is refused with an error that names its field. It is
// imported by _test.go files only.
package ctltest

import (
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/testkit"
)

// T0 is the start of every test's virtual clock: 2026-01-01 00:00 UTC.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// At returns T0 + k seconds.
func At(k int) time.Time { return T0.Add(time.Duration(k) * time.Second) }

// Near fails t unless got is within 1e-6 of want, relative to the larger
// of 1 and |want|; what names the value in the failure.
func Near(t testkit.TB, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s: got %.9g, want %.9g", what, got, want)
	}
}

// Build returns the controller newFn makes of cfg after edit (nil: cfg as
// it is), failing t if it refuses the configuration.
func Build[C, T any](t testkit.TB, cfg C, edit func(*C), newFn func(C) (T, error)) T {
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

// Config is a controller's configuration (control.Config).
type Config interface {
	Validate() error
	New() (sluice.Controller, error)
}

// CheckFieldError fails t unless cfg is rejected, by Validate and by New,
// with an error that names field: its FieldError path is field and its
// message begins "field:".
func CheckFieldError(t testkit.TB, cfg Config, field string) {
	t.Helper()
	err := cfg.Validate()
	if err == nil {
		t.Fatalf("%s: accepted", field)
	}
	if fielderr.Path(err) != field || !strings.HasPrefix(err.Error(), field+":") {
		t.Fatalf("error names %q, want %q: %v", fielderr.Path(err), field, err)
	}
	if _, err := cfg.New(); err == nil {
		t.Fatalf("%s: New accepted an invalid config", field)
	}
}

// FieldCase is one invalid configuration: Edit breaks Field.
type FieldCase[C any] struct {
	Field string
	Edit  func(*C)
}

// CheckFieldErrors applies each case's edit to a fresh def() and checks
// that the result is rejected naming the case's field (CheckFieldError).
func CheckFieldErrors[C any, P interface {
	*C
	Config
}](t testkit.TB, def func() C, cases []FieldCase[C]) {
	t.Helper()
	for _, tc := range cases {
		cfg := def()
		tc.Edit(&cfg)
		CheckFieldError(t, P(&cfg), tc.Field)
	}
}
