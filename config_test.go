package sluice

import (
	"errors"
	"fmt"
	"testing"
)

func TestFieldErrors(t *testing.T) {
	e := InvalidField("target", "-1s", "must be positive")
	if e.Error() != "target: -1s is invalid: must be positive" {
		t.Errorf("InvalidField: %q", e.Error())
	}
	nested := Under("stages[0]", Under("params", e))
	if FieldPath(nested) != "stages[0].params.target" || nested.Error() != "stages[0].params.target: -1s is invalid: must be positive" {
		t.Errorf("Under: %q (path %q)", nested.Error(), FieldPath(nested))
	}
	if got := FieldPath(Under("servers", FieldErrorf("[1].url", "bad"))); got != "servers[1].url" {
		t.Errorf("index path: %q", got)
	}
	if got := Under("x", errors.New("plain")); FieldPath(got) != "x" || got.Error() != "x: plain" {
		t.Errorf("a plain error: %v", got)
	}
	if Under("x", nil) != nil {
		t.Error("Under(nil) is not nil")
	}
	if FieldPath(fmt.Errorf("wrapped: %w", e)) != "target" {
		t.Error("FieldPath does not unwrap")
	}
}
