// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

const (
	oldToken = "rotation-token-old-0123456789"
	newToken = "rotation-token-new-9876543210"
)

// statusOf is the status of GET url with the given token ("" for none).
func statusOf(t *testing.T, url, token string) int {
	t.Helper()
	var hdr map[string]string
	if token != "" {
		hdr = map[string]string{"Authorization": "Bearer " + token}
	}
	code, _, _ := get(t, url, hdr)
	return code
}

// rotatingSetup serves a configuration whose admin token and OTLP header
// come from files in Kubernetes Secret volumes (rotated by a symlink
// swap), with extra configuration text.
func rotatingSetup(t *testing.T, extra string) (p *running, token, headers mountedFile, col *collector) {
	be := backend(t, echoHeaders)
	col = newCollector(t)
	token = newMountedFile(t, "token", oldToken+"\n")
	headers = newMountedFile(t, "headers", "api-key=key-one\n")
	cfg := strings.Replace(baseConfig(be.URL, extra+`telemetry:
  otlp:
    endpoint: `+col.srv.URL+`
    metrics: true
    interval: 1s
    headers_file: `+headers.path()+`
`), "admin:\n  addr: 127.0.0.1:0\n", "admin:\n  addr: 127.0.0.1:0\n  token_file: "+token.path()+"\n", 1)
	return startProxy(t, cfg), token, headers, col
}

// A rotated token_file (and OTLP headers_file) is applied by POST
// /reload: the old token is refused from then on, the new one accepted,
// the old session cookie too; the server is the one that started.
func TestTokenRotationOnReload(t *testing.T) {
	p, token, headers, col := rotatingSetup(t, "")
	state := p.admin + "/state"
	if statusOf(t, state, oldToken) != 200 || statusOf(t, state, "") != 401 {
		t.Fatalf("before: old token %d, none %d", statusOf(t, state, oldToken), statusOf(t, state, ""))
	}
	_, hdr, _ := get(t, p.admin+"/ui?token="+oldToken, nil)
	oldCookie := map[string]string{"Cookie": strings.Split(hdr.Get("Set-Cookie"), ";")[0]}
	eventually(t, "an export with key-one", func() bool { return col.saw("key-one") })
	addr := p.srv.AdminAddr().String()

	token.update(newToken + "\n")
	headers.update("api-key=key-two\n")
	code, body := doAuth(t, http.MethodPost, p.admin+"/reload", "", oldToken)
	if code != 200 {
		t.Fatalf("POST /reload after the rotation: %d %s", code, body)
	}
	if statusOf(t, state, oldToken) != 401 || statusOf(t, state, newToken) != 200 {
		t.Errorf("after: old token %d, new token %d", statusOf(t, state, oldToken), statusOf(t, state, newToken))
	}
	if code, _, _ := get(t, p.admin+"/ui", oldCookie); code != 401 {
		t.Errorf("the old token's session cookie after the rotation: %d, want 401", code)
	}
	if code, _ := doAuth(t, http.MethodPut, p.admin+"/shadow", `{"shadow":true}`, oldToken); code != 401 {
		t.Errorf("a change with the old token: %d", code)
	}
	eventually(t, "an export with key-two", func() bool { return col.saw("key-two") })
	if got := p.srv.AdminAddr().String(); got != addr {
		t.Errorf("the admin listener moved: %s, was %s", got, addr)
	}
	if m := p.metricsText(t); !strings.Contains(m, `proxy_reloads_total{result="ok"} 1`) {
		t.Errorf("reloads:\n%s", grepLines(m, "proxy_reloads"))
	}
}

// With watch_config, a rotated token file alone (the configuration file
// unchanged) is reloaded.
func TestTokenRotationByWatch(t *testing.T) {
	p, token, _, _ := rotatingSetup(t, "watch_config: 20ms\n")
	state := p.admin + "/state"
	if statusOf(t, state, oldToken) != 200 {
		t.Fatal("the old token before the rotation")
	}
	token.update(newToken + "\n")
	eventually(t, "the new token", func() bool { return statusOf(t, state, newToken) == 200 })
	if statusOf(t, state, oldToken) != 401 {
		t.Error("the old token after the rotation")
	}
	// No further change: no further reload.
	v := p.srv.h.gen.Load().version
	if tried, err := p.srv.watchStep(); tried || err != nil {
		t.Errorf("a watch step without a change: tried %v, %v", tried, err)
	}
	if p.srv.h.gen.Load().version != v {
		t.Error("the configuration was reloaded without a change")
	}
	// A file swapped half-written (empty) keeps the running token.
	token.update("")
	if tried, err := p.srv.watchStep(); !tried || err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Errorf("an empty token file: tried %v, %v", tried, err)
	}
	if statusOf(t, state, newToken) != 200 {
		t.Error("an empty token file replaced the running token")
	}
}

// A change that needs a restart is refused naming the field, at its
// line; the running configuration stays.
func TestReloadRefusalNamesField(t *testing.T) {
	p, _, _, _ := rotatingSetup(t, "")
	orig := mustRead(t, p.file)
	for _, tc := range []struct{ from, to, want string }{
		{"listeners:\n  - addr: 127.0.0.1:0\n", "listeners:\n  - addr: 127.0.0.1:0\n    idle_timeout: 5s\n", "proxy.yaml:3: listeners[0].idle_timeout: changing it needs a restart"},
		{"listeners:\n  - addr: 127.0.0.1:0\n", "listeners:\n  - addr: 127.0.0.2:0\n", "proxy.yaml:2: listeners[0].addr: changing it needs a restart"},
		{"  addr: 127.0.0.1:0\n  token_file", "  addr: 127.0.0.1:0\n  pprof: true\n  token_file", "proxy.yaml:5: admin.pprof: changing it needs a restart"},
		{"interval: 1s", "interval: 2s", "telemetry.otlp.interval: changing it needs a restart"},
	} {
		must(t, os.WriteFile(p.file, []byte(strings.Replace(orig, tc.from, tc.to, 1)), 0o644))
		code, body := doAuth(t, http.MethodPost, p.admin+"/reload", "", oldToken)
		if code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%q: %d %s, want 400 with %q", tc.to, code, body, tc.want)
		}
	}
	if v := p.srv.h.gen.Load().version; v != 1 {
		t.Errorf("config version %d after refused reloads", v)
	}
}

// doAuth sends a request with a bearer token and returns the status and
// body.
func doAuth(t *testing.T, method, url, body, token string) (int, string) {
	t.Helper()
	resp, b := call(t, method, url, body, http.Header{"Authorization": {"Bearer " + token}})
	return resp.StatusCode, string(b)
}
