// SPDX-License-Identifier: Apache-2.0

// Package testconf holds the proxy configuration texts that tests of
// several packages (proxy, its subpackages, the command line) start
// from, so that they are written once.
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

// Head is the smallest valid proxy configuration with fixed addresses:
// one listener on 127.0.0.1:8080 and one server, five lines long.
const Head = `listeners:
  - addr: 127.0.0.1:8080
backends:
  servers:
    - url: http://127.0.0.1:8081
`

// BadStageTarget is Head with two seda stages, the second with a
// negative target: its error is on line 14, at
// stages[1].params.target ("-1s is invalid"). Replacing "-1s" with "1s"
// makes it valid.
const BadStageTarget = Head + `stages:
  - name: a
    controller: seda
    params:
      target: 500ms
  - name: b
    controller: seda
    params:
      target: -1s
`
