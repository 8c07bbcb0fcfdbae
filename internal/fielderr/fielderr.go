// SPDX-License-Identifier: Apache-2.0

// Package fielderr builds and places sluice.FieldError, the one
// configuration error of every sluice package: the setting's YAML path,
// what is wrong with it, and its line when known.
package fielderr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
)

// Errorf returns a *sluice.FieldError at path with a formatted message.
func Errorf(path, format string, args ...any) *sluice.FieldError {
	return &sluice.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Invalid returns "path: value is invalid: want" as a *sluice.FieldError;
// want says what a valid value looks like.
func Invalid(path string, value any, want string) *sluice.FieldError {
	return &sluice.FieldError{Path: path, Msg: fmt.Sprintf("%v is invalid: %s", value, want)}
}

// If returns Invalid(path, value, want) when bad holds and nil otherwise:
// one row of a Validate written as a table (see First).
func If(bad bool, path string, value any, want string) error {
	if !bad {
		return nil
	}
	return Invalid(path, value, want)
}

// First returns the first non-nil error of errs, or nil. A configuration's
// Validate lists its checks in order — If rows and the errors of shared
// check functions — and reports the first invalid field, as a chain of
// if statements would; every row is evaluated, so a row must not depend on
// an earlier row having passed to be safe to compute.
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Path returns the path of the *sluice.FieldError in err's chain, or "".
func Path(err error) string {
	var fe *sluice.FieldError
	if errors.As(err, &fe) {
		return fe.Path
	}
	return ""
}

// Under places a *sluice.FieldError at the top of err's chain under prefix
// ("params" and "target" give "params.target"; an index path such as
// "[2].url" is appended as is) and returns it; any other error is wrapped
// as a *sluice.FieldError at prefix. A nil err stays nil.
func Under(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var fe *sluice.FieldError
	if !errors.As(err, &fe) {
		return &sluice.FieldError{Path: prefix, Msg: err.Error()}
	}
	out := *fe
	switch {
	case prefix == "":
	case out.Path == "":
		out.Path = prefix
	case strings.HasPrefix(out.Path, "["):
		out.Path = prefix + out.Path
	default:
		out.Path = prefix + "." + out.Path
	}
	return &out
}
