// SPDX-License-Identifier: Apache-2.0

// Package secret marks configuration values that must never be shown.
//
// A field of type String (or a map or a list of them) is a secret: the
// admin token, an OTLP exporter's headers, a Redis password, the API keys
// that name a client. The type
// is the one mark: every way Go prints or encodes a value — fmt's verbs
// (%v, %s, %q, %x, %#v), log/slog, YAML (gopkg.in/yaml.v3) and JSON —
// shows Redacted instead of the value, so GET /config, /state, the
// dashboard, logs and error messages cannot leak it, and no list of
// fields has to be kept in step. Reveal is the one way to read it, at the
// place that sends it (an Authorization header, the Redis AUTH command).
//
// Each secret field X of a configuration struct may have a sibling field
// X_file (its YAML key with the suffix "_file", a string path): Resolve
// reads every such file into its secret, at load and on every reload, so
// a mounted Kubernetes Secret is re-read when it rotates. A String's file
// holds the value on its first line; a map's file holds one "key=value"
// per line (the OTEL_EXPORTER_OTLP_HEADERS form, one pair per line); a
// list's file holds one value per line.
package secret

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Redacted is what every printed or encoded secret shows instead of its
// value. An empty secret prints as the empty string, so that a setting
// left unset still reads as unset.
const Redacted = "<redacted>"

// String is a secret string. Its zero value is the empty secret (unset).
// It decodes from YAML and JSON like a string; it prints and encodes as
// Redacted. Reveal returns the value.
type String string

// Reveal returns the secret's value. Call it only where the value is sent
// to the party it is meant for.
func (s String) Reveal() string { return string(s) }

// IsSet reports whether the secret is non-empty.
func (s String) IsSet() bool { return s != "" }

func (s String) shown() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// String returns Redacted (or "" when unset).
func (s String) String() string { return s.shown() }

// GoString returns Redacted quoted (or `""` when unset), for %#v.
func (s String) GoString() string { return fmt.Sprintf("%q", s.shown()) }

// Format prints Redacted for every verb, so that neither %x nor %q nor
// %#v can print the value.
func (s String) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", s.shown())
	case 'v':
		if f.Flag('#') {
			_, _ = fmt.Fprint(f, s.GoString())
			return
		}
		_, _ = fmt.Fprint(f, s.shown())
	default:
		_, _ = fmt.Fprint(f, s.shown())
	}
}

// LogValue returns Redacted as a log/slog value.
func (s String) LogValue() slog.Value { return slog.StringValue(s.shown()) }

// MarshalYAML encodes Redacted (gopkg.in/yaml.v3).
func (s String) MarshalYAML() (any, error) { return s.shown(), nil }

// MarshalJSON encodes Redacted.
func (s String) MarshalJSON() ([]byte, error) { return json.Marshal(s.shown()) }

// MarshalText encodes Redacted (encoding.TextMarshaler, used by map keys
// and some encoders).
func (s String) MarshalText() ([]byte, error) { return []byte(s.shown()), nil }

// UnmarshalText decodes the plain value: JSON strings and text decode as
// they are, the way YAML strings do.
func (s *String) UnmarshalText(b []byte) error {
	*s = String(b)
	return nil
}
