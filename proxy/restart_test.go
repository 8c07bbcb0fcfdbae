// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// restartField names the first restart-only field that differs, and lets
// through what a reload applies: secrets, their files, admin.public.
func TestRestartField(t *testing.T) {
	dir := t.TempDir()
	tok1, tok2 := filepath.Join(dir, "t1"), filepath.Join(dir, "t2")
	must(t, os.WriteFile(tok1, []byte("0123456789abcdef-one\n"), 0o600))
	must(t, os.WriteFile(tok2, []byte("0123456789abcdef-two\n"), 0o600))
	hdr := filepath.Join(dir, "h")
	must(t, os.WriteFile(hdr, []byte("api-key=k2\n"), 0o600))
	const otlp = "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    traces: true\n"
	base := goodHead + "admin:\n  addr: 127.0.0.1:9901\n  token_file: " + tok1 + "\n" + otlp + "    headers: {api-key: k1}\n"
	parse := func(text string) *Config {
		t.Helper()
		c, err := Parse("p.yaml", []byte(text))
		if err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		return c
	}
	a := parse(base)
	for _, tc := range []struct {
		name, text, want string
	}{
		{"same", base, ""},
		{"a stage", base + "stages:\n  - name: x\n", ""},
		{"rotated token file", strings.Replace(base, tok1, tok2, 1), ""},
		{"token inline", strings.Replace(base, "token_file: "+tok1, "token: 0123456789abcdef-three", 1), ""},
		{"public", strings.Replace(base, "  addr: 127.0.0.1:9901\n", "  addr: 127.0.0.1:9901\n  public: [metrics]\n", 1), ""},
		{"otlp headers file", strings.Replace(base, "    headers: {api-key: k1}\n", "    headers_file: "+hdr+"\n", 1), ""},
		{"listener address", strings.Replace(base, "8080", "8090", 1), "listeners[0].addr"},
		{"a listener more", strings.Replace(base, "  - addr: 127.0.0.1:8080\n", "  - addr: 127.0.0.1:8080\n  - addr: 127.0.0.1:8082\n", 1), "listeners[1]"},
		{"listener timeout", strings.Replace(base, "  - addr: 127.0.0.1:8080\n", "  - addr: 127.0.0.1:8080\n    idle_timeout: 5s\n", 1), "listeners[0].idle_timeout"},
		{"admin address", strings.Replace(base, "9901", "9902", 1), "admin.addr"},
		{"pprof", strings.Replace(base, "  addr: 127.0.0.1:9901\n", "  addr: 127.0.0.1:9901\n  pprof: true\n", 1), "admin.pprof"},
		{"otlp endpoint", strings.Replace(base, "4318", "4319", 1), "telemetry.otlp.endpoint"},
		{"policer", base + "policer: {rate: 10}\n", "policer"},
		{"max_client_connections", base + "max_client_connections: 100\n", "max_client_connections"},
		{"utilization", base + "utilization: {source: pool-busy}\n", "utilization.source"},
	} {
		if got := restartField(a, parse(tc.text)); got != tc.want {
			t.Errorf("%s: restartField = %q, want %q", tc.name, got, tc.want)
		}
	}
	err := restartNeeded(a, parse(strings.Replace(base, "8080", "8090", 1)))
	if err == nil || !strings.HasPrefix(err.Error(), "listeners[0].addr: changing it needs a restart") {
		t.Errorf("restartNeeded = %v", err)
	}
}

func TestAnyIndex(t *testing.T) {
	for in, want := range map[string]string{"": "", "admin.addr": "admin.addr", "listeners[0].tls": "listeners[].tls",
		"a[12].b[3]": "a[].b[]", "a[1": "a[1"} {
		if got := anyIndex(in); got != want {
			t.Errorf("anyIndex(%q) = %q, want %q", in, got, want)
		}
	}
	if p := firstDiff("l", reflect.ValueOf([]ListenerConfig{{Addr: "a"}}), reflect.ValueOf([]ListenerConfig{{Addr: "b"}}),
		map[string]bool{"l[].addr": true}); p != "" {
		t.Errorf("a skipped path differs: %q", p)
	}
}
