// SPDX-License-Identifier: Apache-2.0

package sluice

// FieldError is the one configuration error of every sluice package: the
// setting's YAML path (from the top of the section being validated, then
// placed under its parents' paths), what is wrong with it, and its 1-based
// line in the YAML source when known. Every Validate of sluice's configs
// and the policy's constructor return one (use errors.As); the proxy's
// file loader turns it into a proxy.ConfigError naming the file.
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
