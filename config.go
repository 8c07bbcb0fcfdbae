package sluice

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is the one configuration error of every sluice package: the
// setting's YAML path (from the top of the section being validated, then
// placed under its parents' paths with Under), what is wrong with it, and
// its 1-based line in the YAML source when known.
type FieldError struct {
	// Path is the YAML path, e.g. "backends.servers[1].url" or "target".
	Path string
	// Msg says what is wrong, quoting the bad value.
	Msg string
	// Line is the setting's line in the source, 0 when unknown.
	Line int
}

// Error returns "path: message".
func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// FieldErrorf returns a *FieldError at path with a formatted message.
func FieldErrorf(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// InvalidField returns "path: value is invalid: want" as a *FieldError;
// want says what a valid value looks like.
func InvalidField(path string, value any, want string) *FieldError {
	return &FieldError{Path: path, Msg: fmt.Sprintf("%v is invalid: %s", value, want)}
}

// FieldPath returns the path of the *FieldError in err's chain, or "".
func FieldPath(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Path
	}
	return ""
}

// Under places a *FieldError at the top of err's chain under prefix
// ("params" and "target" give "params.target"; an index path such as
// "[2].url" is appended as is) and returns it; any other error is wrapped
// as a *FieldError at prefix. A nil err stays nil.
func Under(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		return &FieldError{Path: prefix, Msg: err.Error()}
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
