// SPDX-License-Identifier: Apache-2.0

package control

import (
	"cmp"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/internal/ctltest"
)

// The test helpers that control's and control/auto's tests share are in
// ctltest; control's tests call them by these short names.
var (
	t0              = ctltest.T0
	at              = ctltest.At
	near            = ctltest.Near
	checkFieldError = ctltest.CheckFieldError
)

// fieldCase is one invalid configuration of a checkFieldErrors table.
type fieldCase[C any] = ctltest.FieldCase[C]

// build returns the controller newFn makes of cfg after edit (ctltest.Build).
func build[C, T any](t *testing.T, cfg C, edit func(*C), newFn func(C) (T, error)) T {
	t.Helper()
	return ctltest.Build(t, cfg, edit, newFn)
}

// checkFieldErrors checks that each case's configuration is refused naming
// its field (ctltest.CheckFieldErrors).
func checkFieldErrors[C any, P interface {
	*C
	Config
}](t *testing.T, def func() C, cases []fieldCase[C]) {
	t.Helper()
	ctltest.CheckFieldErrors[C, P](t, def, cases)
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
