// SPDX-License-Identifier: Apache-2.0

package fielderr

import (
	"errors"
	"fmt"
	"testing"
)

func TestFieldErrors(t *testing.T) {
	e := Invalid("target", "-1s", "must be positive")
	if e.Error() != "target: -1s is invalid: must be positive" {
		t.Errorf("InvalidField: %q", e.Error())
	}
	nested := Under("stages[0]", Under("params", e))
	if Path(nested) != "stages[0].params.target" || nested.Error() != "stages[0].params.target: -1s is invalid: must be positive" {
		t.Errorf("Under: %q (path %q)", nested.Error(), Path(nested))
	}
	if got := Path(Under("servers", Errorf("[1].url", "bad"))); got != "servers[1].url" {
		t.Errorf("index path: %q", got)
	}
	if got := Under("x", errors.New("plain")); Path(got) != "x" || got.Error() != "x: plain" {
		t.Errorf("a plain error: %v", got)
	}
	if Under("x", nil) != nil {
		t.Error("Under(nil) is not nil")
	}
	if Path(fmt.Errorf("wrapped: %w", e)) != "target" {
		t.Error("FieldPath does not unwrap")
	}
}

func TestIfFirst(t *testing.T) {
	if err := If(false, "a", 1, "must be ≥ 2"); err != nil {
		t.Errorf("If(false) = %v, want nil", err)
	}
	err := First(nil, If(false, "a", 1, "must be ≥ 2"), If(true, "b", 0.5, "must be ≥ 1"), If(true, "c", 3, "must be ≤ 2"))
	if err == nil || err.Error() != "b: 0.5 is invalid: must be ≥ 1" || Path(err) != "b" {
		t.Errorf("First = %v, want the first bad row, b", err)
	}
	if err := First(If(false, "a", 1, "x"), nil); err != nil {
		t.Errorf("First of passing rows = %v, want nil", err)
	}
}
