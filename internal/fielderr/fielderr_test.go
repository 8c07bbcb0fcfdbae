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
