// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"strings"
	"testing"
)

// A listener's guard settings are refused with the same words and paths
// wherever their code lives: every row is a field of the listener's guard
// (package guard) with a bad value, and the error Parse gives, byte for
// byte.
func TestListenerGuardErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ set, want string }{
		{"read_header_timeout: -1s", "listeners[0].read_header_timeout: -1s is invalid: must be a positive duration or 0"},
		{"read_timeout: -2s", "listeners[0].read_timeout: -2s is invalid: must be a positive duration or 0"},
		{"read_body_timeout: -3s", "listeners[0].read_body_timeout: -3s is invalid: must be a positive duration or 0"},
		{"write_timeout: -4s", "listeners[0].write_timeout: -4s is invalid: must be a positive duration or 0"},
		{"send_timeout: -5s", "listeners[0].send_timeout: -5s is invalid: must be a positive duration or 0"},
		{"idle_timeout: -6s", "listeners[0].idle_timeout: -6s is invalid: must be a positive duration or 0"},
		{"max_header_bytes: -1", "listeners[0].max_header_bytes: -1 is invalid: must be > 0"},
		{"max_header_line_bytes: -2", "listeners[0].max_header_line_bytes: -2 is invalid: must be > 0"},
		{"max_uri_bytes: -3", "listeners[0].max_uri_bytes: -3 is invalid: must be > 0"},
		{"max_headers: -4", "listeners[0].max_headers: -4 is invalid: must be > 0"},
		{"read_body_min_rate: -2", "listeners[0].read_body_min_rate: -2 is invalid: must be a rate in bytes per second > 0, or -1 for none"},
		{"request_buffer_bytes: -1", "listeners[0].request_buffer_bytes: -1 is invalid: must be > 0"},
		{"max_request_body_bytes: -2", "listeners[0].max_request_body_bytes: -2 is invalid: must be > 0, or -1 for no limit"},
		{"request_buffer_dir: " + dir + "/missing", "listeners[0].request_buffer_dir: \"" + dir + "/missing\" is invalid: not a directory"},
		{"request_buffering: maybe", "listeners[0].request_buffering: cannot unmarshal \"maybe\" (a string) into true or false"},
	} {
		src := "listeners:\n  - addr: 127.0.0.1:8080\n  - addr: 127.0.0.1:8081\n    " + c.set +
			"\nbackends: {servers: [{url: http://127.0.0.1:9000}]}\n"
		want := "proxy.yaml:4: " + strings.Replace(c.want, "listeners[0]", "listeners[1]", 1)
		_, err := Parse("proxy.yaml", []byte(src))
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", c.set, err, want)
		}
	}
}
