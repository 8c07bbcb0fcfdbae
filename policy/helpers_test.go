// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// parse decodes a policy YAML document strictly, as the proxy does.
func parse(t testing.TB, src string) Config {
	t.Helper()
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("decode: %v\n%s", err, src)
	}
	return c
}

// build parses, defaults and instantiates a policy.
func build(t testing.TB, src string, opts Options) *Policy {
	t.Helper()
	p, err := New(parse(t, src), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func request(method, target, remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func trimLines(b []byte) string { return string(bytes.TrimSpace(b)) }
