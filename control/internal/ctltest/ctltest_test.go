// SPDX-License-Identifier: Apache-2.0

package ctltest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/testkit"
)

// recorder is a testkit.TB whose Fatal and Fatalf record the failure and
// stop the helper (by panicking with errFailed), so that a test can check
// that a helper fails. The helpers call no other method of TB; the
// embedded nil TB stands for them (calling one panics).
type recorder struct {
	testkit.TB
	failed string
}

var errFailed = errors.New("failed")

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	panic(errFailed)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(errFailed)
}

// fails runs f with a recorder and returns its failure message ("" if f
// did not fail).
func fails(f func(t testkit.TB)) (msg string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil && p != errFailed {
			panic(p)
		}
		msg = r.failed
	}()
	f(r)
	return ""
}

// config is a configuration whose one field, "limit", must be ≥ 1.
type config struct{ limit int }

func (c *config) Validate() error {
	return fielderr.If(c.limit < 1, "limit", c.limit, "must be ≥ 1")
}

func (c *config) New() (sluice.Controller, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return nil, nil
}

func TestCheckFieldErrors(t *testing.T) {
	def := func() config { return config{limit: 2} }
	if msg := fails(func(t testkit.TB) {
		CheckFieldErrors(t, def, []FieldCase[config]{{Field: "limit", Edit: func(c *config) { c.limit = 0 }}})
	}); msg != "" {
		t.Errorf("a refused field failed the check: %s", msg)
	}
	if msg := fails(func(t testkit.TB) {
		CheckFieldErrors(t, def, []FieldCase[config]{{Field: "limit", Edit: func(c *config) { c.limit = 5 }}})
	}); msg != "limit: accepted" {
		t.Errorf("an accepted config: failure %q, want %q", msg, "limit: accepted")
	}
	if msg := fails(func(t testkit.TB) {
		CheckFieldErrors(t, def, []FieldCase[config]{{Field: "period", Edit: func(c *config) { c.limit = 0 }}})
	}); msg != `error names "limit", want "period": limit: 0 is invalid: must be ≥ 1` {
		t.Errorf("another field refused: failure %q", msg)
	}
}

func TestNearAndBuild(t *testing.T) {
	if msg := fails(func(t testkit.TB) { Near(t, "x", 1+1e-7, 1) }); msg != "" {
		t.Errorf("within tolerance: %s", msg)
	}
	if msg := fails(func(t testkit.TB) { Near(t, "x", 1.01, 1) }); msg != "x: got 1.01, want 1" {
		t.Errorf("beyond tolerance: failure %q", msg)
	}
	if got := At(3); got != T0.Add(3*time.Second) {
		t.Errorf("At(3) = %v", got)
	}
	newFn := func(c config) (int, error) { return c.limit, c.Validate() }
	if got := Build(t, config{limit: 1}, func(c *config) { c.limit = 7 }, newFn); got != 7 {
		t.Errorf("Build with an edit = %d, want 7", got)
	}
	if msg := fails(func(t testkit.TB) { Build(t, config{}, nil, newFn) }); msg != "limit: 0 is invalid: must be ≥ 1" {
		t.Errorf("Build of a refused config: failure %q", msg)
	}
}
