// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/proxy/internal/proxytest"
)

const sedaStage = `stages:
  - name: api
    match: {path_prefix: /api/}
    controller: seda
    params:
      target: 1s
      rate_max: 1000000
      initial_rate: 1000000
`

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	code, _, b := proxytest.Fetch(t, client, method, url, strings.NewReader(body), nil)
	return code, b
}

func TestAdminState(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, sedaStage))
	if code, _, _ := get(t, p.url+"/api/x", nil); code != 200 {
		t.Fatalf("status %d", code)
	}
	st := p.state(t)
	if st.ConfigVersion != 1 || st.ConfigFile != p.file {
		t.Errorf("version %d file %q", st.ConfigVersion, st.ConfigFile)
	}
	if len(st.Stages) != 2 || st.Stages[0].Name != "api" || st.Stages[0].Controller != "seda" || st.Stages[1].Name != "default" {
		t.Errorf("stages: %+v", st.Stages)
	}
	if st.Stages[0].Target != "1s" {
		t.Errorf("api target %q, want 1s", st.Stages[0].Target)
	}
	if len(st.Backends.Servers) != 1 || st.Backends.Servers[0].URL != be.URL || st.Backends.Servers[0].Served != 1 {
		t.Errorf("backends: %+v", st.Backends)
	}
	if st.Backends.Queue.Max != DefaultQueueMax || st.Backends.Queue.Timeout != "1s" {
		t.Errorf("queue: %+v", st.Backends.Queue)
	}
	if code, _ := do(t, http.MethodGet, p.admin+"/state?decisions=x", ""); code != 400 {
		t.Errorf("bad decisions: %d, want 400", code)
	}
}

func TestAdminConfigRoundTrips(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, sedaStage))
	code, h, body := get(t, p.admin+"/config", nil)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/yaml") {
		t.Fatalf("GET /config: %d %s", code, h.Get("Content-Type"))
	}
	// The running configuration, defaults included, is itself valid.
	cfg, err := Parse("running.yaml", []byte(body))
	if err != nil {
		t.Fatalf("GET /config is not a valid config: %v\n%s", err, body)
	}
	if cfg.Stages[0].Name != "api" || cfg.Backends.Timeouts.Dial != DefaultDialTimeout {
		t.Errorf("round trip lost settings: %+v", cfg.Stages)
	}
	code, _, body = get(t, p.admin+"/config?format=json", nil)
	var v map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v["listeners"] == nil || v["stages"] == nil {
		t.Errorf("GET /config?format=json: %d %s", code, body)
	}
}

func TestAdminReload(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, sedaStage))
	orig, err := os.ReadFile(p.file)
	must(t, err)

	// a good change: a new stage and a new target
	good := strings.Replace(string(orig), "target: 1s", "target: 2s", 1) + `  - name: static
    match: {path_prefix: /static/}
`
	must(t, os.WriteFile(p.file, []byte(good), 0o644))
	code, body := do(t, http.MethodPost, p.admin+"/reload", "")
	if code != 200 || !strings.Contains(body, `"config_version": 2`) {
		t.Fatalf("reload: %d %s", code, body)
	}
	st := p.state(t)
	if st.ConfigVersion != 2 || len(st.Stages) != 3 || st.Stages[0].Target != "2s" {
		t.Errorf("after reload: version %d stages %d target %q", st.ConfigVersion, len(st.Stages), st.Stages[0].Target)
	}

	// a bad file: refused with file, line and field; the running config stays
	bad := strings.Replace(good, "target: 2s", "target: -1s", 1)
	must(t, os.WriteFile(p.file, []byte(bad), 0o644))
	code, body = do(t, http.MethodPost, p.admin+"/reload", "")
	if code != 400 || !strings.Contains(body, "proxy.yaml:") || !strings.Contains(body, "stages[0].params.target") {
		t.Errorf("bad reload: %d %s", code, body)
	}
	if st := p.state(t); st.ConfigVersion != 2 || st.Stages[0].Target != "2s" {
		t.Errorf("bad reload changed the running config: version %d target %q", st.ConfigVersion, st.Stages[0].Target)
	}

	// a listener change needs a restart
	moved := strings.Replace(good, "admin:\n  addr: 127.0.0.1:0", "admin:\n  addr: 127.0.0.1:1", 1)
	must(t, os.WriteFile(p.file, []byte(moved), 0o644))
	code, body = do(t, http.MethodPost, p.admin+"/reload", "")
	if code != 400 || !strings.Contains(body, "restart") {
		t.Errorf("listener change: %d %s", code, body)
	}
	if code, _, _ := get(t, p.url+"/api/", nil); code != 200 {
		t.Errorf("proxy after refused reloads: %d", code)
	}
	m := p.metricsText(t)
	for _, want := range []string{`proxy_reloads_total{result="ok"} 1`, `proxy_reloads_total{result="error"} 2`, "proxy_config_version 2"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(m, "proxy_reloads"))
		}
	}
}

func TestAdminSetTarget(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, sedaStage))
	cases := []struct {
		stage, body string
		status      int
		msg         string
	}{
		{"api", `{"target":"300ms"}`, 200, `"target": "300ms"`},
		{"api", `{"target":"-1s"}`, 400, "must be a positive duration"},
		{"api", `{"target":"fast"}`, 400, "invalid"},
		{"api", `{"target":300}`, 400, "JSON"},
		{"api", `{}`, 400, "target is required"},
		{"api", `{"target":"1s","x":1}`, 400, "unknown field"},
		{"nosuch", `{"target":"1s"}`, 404, "no stage"},
		{"default", `{"target":"1s"}`, 400, "no response-time target"},
	}
	for _, c := range cases {
		code, body := do(t, http.MethodPut, p.admin+"/stages/"+c.stage+"/target", c.body)
		if code != c.status || !strings.Contains(body, c.msg) {
			t.Errorf("PUT %s %s: %d %s, want %d with %q", c.stage, c.body, code, body, c.status, c.msg)
		}
	}
	if st := p.state(t); st.Stages[0].Target != "300ms" {
		t.Errorf("target after PUT: %q", st.Stages[0].Target)
	}
	if m := p.metricsText(t); !strings.Contains(m, `proxy_target_changes_total{stage="api"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(m, "target"))
	}
	if code, _ := do(t, http.MethodGet, p.admin+"/stages/api/target", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET target: %d, want 405", code)
	}
}

func TestAdminMetrics(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, sedaStage))
	for range 3 {
		get(t, p.url+"/api/x", nil)
	}
	// The proxy releases its backend slot after the client has the whole
	// response, so the in-flight gauges reach 0 a moment later: wait for it.
	var m string
	eventually(t, "in-flight gauges back to 0", func() bool {
		m = p.metricsText(t)
		return strings.Contains(m, "proxy_pool_in_flight 0") &&
			strings.Contains(m, `proxy_backend_in_flight{backend="`+be.URL+`"} 0`)
	})
	for _, want := range []string{
		`proxy_backend_in_flight{backend="` + be.URL + `"} 0`,
		`proxy_backend_max_concurrency{backend="` + be.URL + `"} 256`,
		"proxy_queue_length 0",
		"proxy_queue_max 1024",
		"proxy_pool_in_flight 0",
		"proxy_streams_in_flight 0",
		"proxy_smuggling_rejected_total 0",
		`sluice_requests_total{class="default",outcome="offered",stage="api"}`,
		`sluice_gate_setting{class="default",kind="rate",stage="api"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestAdminPprofOnlyWhenEnabled(t *testing.T) {
	be := backend(t, echoHeaders)
	off := startProxy(t, baseConfig(be.URL, ""))
	if code, _, _ := get(t, off.admin+"/debug/pprof/", nil); code != 404 {
		t.Errorf("pprof disabled: %d, want 404", code)
	}
	on := startProxy(t, strings.Replace(baseConfig(be.URL, ""), "admin:\n  addr: 127.0.0.1:0\n", "admin:\n  addr: 127.0.0.1:0\n  pprof: true\n", 1))
	if code, _, body := get(t, on.admin+"/debug/pprof/", nil); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof enabled: %d", code)
	}
	if code, _, body := get(t, on.admin+"/", nil); code != 200 || !strings.Contains(body, "/debug/pprof/") {
		t.Errorf("index: %d %s", code, body)
	}
}
