// Package testconf holds the configuration texts the proxy's tests and
// the tests of its subpackages start from, so that they are written once.
package testconf

import "strings"

// WithBackend replaces the BACKEND placeholder of a configuration text
// with url.
func WithBackend(cfg, url string) string { return strings.ReplaceAll(cfg, "BACKEND", url) }

// Base is a minimal proxy configuration on free ports (one listener, the
// admin listener, one server at backendURL) followed by extra. It is
// seven lines long, so extra starts on line 8.
func Base(backendURL, extra string) string {
	return WithBackend(`listeners:
  - addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
backends:
  servers:
    - url: BACKEND
`, backendURL) + extra
}
