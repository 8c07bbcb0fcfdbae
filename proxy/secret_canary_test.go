// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/internal/testkit"
	"github.com/sluicehq/sluice/proxy/admin"
)

// Secrets for the tests: every one unlike any other text, so that
// finding it anywhere means it leaked.
const (
	canaryToken   = "canary-admin-token-7f3e9b1d2c4a"
	canaryHeader  = "canary-otlp-key-5b8e0d2f6a1c"
	canaryKeyA    = "canary-share-key-a-9d4c2b7e1f03"
	canaryKeyB    = "canary-share-key-b-3a6f8c0e5d27"
	canaryRedisU  = "canary-redis-user-1c7a9e3b5f80"
	canaryRedisPw = "canary-redis-pass-8e2d4f6a0b19"
)

// canarySetup is a configuration with a secret in every secret field,
// half of them through their file form, and the files.
type canarySetup struct {
	dir   string
	files map[string]string // name in dir → content
	text  string            // the configuration, BACKEND and COLLECTOR to fill
}

func newCanarySetup(t *testing.T) *canarySetup {
	c := &canarySetup{dir: t.TempDir(), files: map[string]string{
		"admin.token":    canaryToken + "\n",
		"otlp.headers":   "# the collector's key\napi-key=" + canaryHeader + "\n",
		"keys-a":         canaryKeyA + "\n",
		"redis.password": canaryRedisPw + "\n",
	}}
	for name, body := range c.files {
		must(t, os.WriteFile(c.path(name), []byte(body), 0o600))
	}
	c.text = `listeners:
  - addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
  token_file: ` + c.path("admin.token") + `
  pprof: true
backends:
  servers:
    - url: BACKEND
stages:
  - name: api
    match: {path_prefix: /api/}
    controller: seda
    params: {target: 1s, rate_max: 1000000, initial_rate: 1000000}
shares:
  total_bandwidth: 100MB
  clients:
    - {name: a, share: 10, api_keys_file: ` + c.path("keys-a") + `}
    - {name: b, share: 10, api_keys: [` + canaryKeyB + `]}
telemetry:
  otlp:
    endpoint: COLLECTOR
    traces: true
    metrics: true
    interval: 1s
    headers_file: ` + c.path("otlp.headers") + `
cluster:
  addrs: [ADDR]
  instance: canary
  period: 100ms
  username: ` + canaryRedisU + `
  password_file: ` + c.path("redis.password") + `
`
	return c
}

func (c *canarySetup) path(name string) string { return filepath.Join(c.dir, name) }

// collector is an OTLP/HTTP receiver that records the api-key header of
// every export.
type collector struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys []string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.keys = append(c.keys, r.Header.Get("Api-Key"))
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// saw reports whether an export carried key.
func (c *collector) saw(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.keys, key)
}

// startLogged writes cfg to a file and serves it with every log line, at
// debug level, in logs.
func startLogged(t *testing.T, cfg string, logs io.Writer) *running {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return startProxyWith(t, cfg, Options{Logger: log, Registerer: prometheus.NewRegistry()})
}

// leakCheck finds any of a configuration's secret values, as they are or
// hex or base64 encoded, in a text. Its check is safe for concurrent use.
type leakCheck struct {
	t       *testing.T
	secrets []string
	checked atomic.Int64
}

// newLeakCheck takes the secret values of cfg and checks that a value was
// planted in every secret field of the configuration type (secret.Paths):
// a secret field added later fails here until this test plants one.
func newLeakCheck(t *testing.T, cfg *Config) *leakCheck {
	t.Helper()
	if got, want := secret.SetPaths(cfg), secret.Paths(&Config{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("the test's configuration sets the secrets %v, the configuration has %v: plant a canary in every one", got, want)
	}
	lc := &leakCheck{t: t}
	secret.Visit(cfg, func(_ string, v secret.String) {
		s := v.Reveal()
		lc.secrets = append(lc.secrets, s, hex.EncodeToString([]byte(s)), base64.StdEncoding.EncodeToString([]byte(s)))
	})
	return lc
}

func (lc *leakCheck) check(where, text string) {
	lc.t.Helper()
	lc.checked.Add(1)
	for _, s := range lc.secrets {
		if strings.Contains(text, s) {
			lc.t.Errorf("%s shows a secret (%.12s…):\n%.2000s", where, s, text)
			return
		}
	}
}

// response renders a response's status line, headers and body.
func response(resp *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", resp.Status)
	_ = resp.Header.Write(&b)
	b.Write(body)
	return b.String()
}

// routeURL is a request target for a route of the table: wildcards get a
// value, and the profiler's timed endpoints one second.
func routeURL(t *testing.T, rt admin.Route) string {
	p := strings.ReplaceAll(strings.ReplaceAll(rt.Path, "{name}", "api"), "{$}", "")
	if strings.Contains(p, "{") {
		t.Fatalf("route %s: the test has no value for its wildcard", rt.Path)
	}
	if strings.HasSuffix(p, "/profile") || strings.HasSuffix(p, "/trace") {
		p += "?seconds=1"
	}
	return p
}

// routeBody is a valid body for a route (the table's doc of a PUT is its
// example body).
func routeBody(rt admin.Route, method string) string {
	if method == http.MethodPut {
		return rt.Doc
	}
	return ""
}

// call sends one request and returns the response and its body (read
// for a bounded time: the event stream does not end).
func call(t *testing.T, method, url, body string, hdr http.Header) (*http.Response, []byte) {
	t.Helper()
	wait := 1500 * time.Millisecond // /debug/pprof/profile?seconds=1
	if strings.HasSuffix(url, "/ui/events") {
		wait = 300 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	must(t, err)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s with %v: %v", method, url, hdr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body) // a deadline ends the event stream: what came is checked
	return resp, b
}

// A canary in every secret field; a real server; every route of the
// table with every method it takes, without the token, with it and with
// the dashboard's cookie; reloads that succeed and reloads refused for
// every kind of error; the logs. No secret shows anywhere, and the
// secrets reach where they are sent (the collector).
func TestSecretsNeverShown(t *testing.T) {
	be := backend(t, echoHeaders)
	col := newCollector(t)
	cs := newCanarySetup(t)
	text := strings.NewReplacer("BACKEND", be.URL, "COLLECTOR", col.srv.URL, "ADDR", freeClosedAddr(t)).Replace(cs.text)
	var logs testkit.SyncBuffer
	p := startLogged(t, text, &logs)
	lc := newLeakCheck(t, p.srv.Config())
	bearer := http.Header{"Authorization": {"Bearer " + canaryToken}}

	// The page with ?token= gives the session cookie.
	resp, body := call(t, http.MethodGet, p.admin+"/ui?token="+canaryToken, "", nil)
	lc.check("GET /ui?token=", response(resp, body))
	cookie := http.Header{"Cookie": {strings.Split(resp.Header.Get("Set-Cookie"), ";")[0]}}
	if resp.StatusCode != 200 || len(cookie["Cookie"][0]) < 20 {
		t.Fatalf("GET /ui?token=: %d, cookie %q", resp.StatusCode, cookie)
	}

	routes := p.srv.adm.Routes(true)
	for _, rt := range routes {
		methods := slices.Clone(rt.Methods)
		if slices.Contains(methods, http.MethodGet) {
			methods = append(methods, http.MethodHead)
		}
		for _, m := range methods {
			for _, who := range []struct {
				name string
				hdr  http.Header
			}{{"nobody", nil}, {"the dashboard cookie", cookie}, {"the token", bearer}} {
				url := p.admin + routeURL(t, rt)
				resp, body := call(t, m, url, routeBody(rt, m), who.hdr)
				where := fmt.Sprintf("%s %s with %s", m, url, who.name)
				lc.check(where, response(resp, body))
				allowed := rt.Auth == admin.AuthNone || who.name == "the token" || (who.name != "nobody" && rt.Auth == admin.AuthUI)
				switch {
				case !allowed && resp.StatusCode != http.StatusUnauthorized:
					t.Errorf("%s: %d, want 401", where, resp.StatusCode)
				case allowed && resp.StatusCode >= 400 && !(rt.Path == "/readyz" && resp.StatusCode == 503):
					t.Errorf("%s: %d, want success: %s", where, resp.StatusCode, body)
				}
			}
		}
	}

	// GET /config shows each secret as the placeholder, or only its file.
	_, body = call(t, http.MethodGet, p.admin+"/config?format=json", "", bearer)
	for _, want := range []string{`"` + secret.Redacted + `"`, `"token_file": "` + cs.path("admin.token"), `"headers_file"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /config?format=json lacks %s:\n%s", want, body)
		}
	}
	for _, gone := range []string{`"token":`, `"headers":`} {
		if strings.Contains(string(body), gone) {
			t.Errorf("GET /config?format=json shows %s beside its file form:\n%s", gone, body)
		}
	}

	// Reloads: a good one, and one refused for each kind of error. Each
	// error, as POST /reload answers it and as Reload returns it, and
	// Parse's error for the same text.
	good := mustRead(t, p.file)
	bad := map[string]string{
		"an invalid stage":        strings.Replace(good, "target: 1s", "target: -1s", 1),
		"a moved listener":        strings.Replace(good, "  - addr: 127.0.0.1:0\nadmin", "  - addr: 127.0.0.1:1\nadmin", 1),
		"a token beside its file": strings.Replace(good, "  pprof: true\n", "  pprof: true\n  token: "+canaryToken+"x\n", 1),
		"headers as a string":     strings.Replace(good, "    headers_file: "+cs.path("otlp.headers")+"\n", "    headers: \"api-key="+canaryHeader+"\"\n", 1),
		"keys as a string":        strings.Replace(good, "api_keys: ["+canaryKeyB+"]", "api_keys: "+canaryKeyB, 1),
		"a repeated key":          strings.Replace(good, "api_keys: ["+canaryKeyB+"]", "api_keys: ["+canaryKeyA+"]", 1),
		"a bad header name":       strings.Replace(good, "headers_file: "+cs.path("otlp.headers"), "headers: {\"api key\": "+canaryHeader+"}", 1),
		"a placeholder":           strings.Replace(good, "api_keys: ["+canaryKeyB+"]", "api_keys: [\"<redacted>\"]", 1),
	}
	for name, text := range bad {
		if text == good {
			t.Fatalf("%s: the test's replacement did not apply", name)
		}
	}
	// Files that go bad under the same configuration.
	badFiles := map[string]string{
		"a token file with a short token": "short\n" + canaryToken,
		"a headers file with a bad line":  "api-key " + canaryHeader + "\n",
		"a keys file that is empty":       "# " + canaryKeyA + "\n",
	}
	fileOf := map[string]string{"a token file with a short token": "admin.token", "a headers file with a bad line": "otlp.headers",
		"a keys file that is empty": "keys-a"}
	var errs []string
	reload := func(name string, wantOK bool) {
		t.Helper()
		resp, body := call(t, http.MethodPost, p.admin+"/reload", "", bearer)
		lc.check("POST /reload with "+name, response(resp, body))
		if (resp.StatusCode == 200) != wantOK {
			t.Errorf("POST /reload with %s: %d %s", name, resp.StatusCode, body)
		}
		if err := p.srv.Reload(); (err == nil) != wantOK {
			t.Errorf("Reload with %s: %v", name, err)
		} else if err != nil {
			errs = append(errs, name+": "+err.Error())
		}
		if _, err := LoadFile(p.file); err != nil {
			errs = append(errs, name+" (LoadFile): "+err.Error())
		}
	}
	reload("the good file", true)
	for name, text := range bad {
		must(t, os.WriteFile(p.file, []byte(text), 0o644))
		reload(name, false)
	}
	must(t, os.WriteFile(p.file, []byte(good), 0o644))
	for name, body := range badFiles {
		must(t, os.WriteFile(cs.path(fileOf[name]), []byte(body), 0o600))
		if tried, err := p.srv.watchStep(); !tried || err == nil {
			t.Errorf("the watch with %s: tried %v, %v", name, tried, err)
		} else {
			errs = append(errs, name+" (watch): "+err.Error())
		}
		reload(name, false)
		must(t, os.WriteFile(cs.path(fileOf[name]), []byte(cs.files[fileOf[name]]), 0o600))
	}
	reload("the good file again", true)
	if len(errs) < len(bad)+len(badFiles) {
		t.Fatalf("only %d errors collected", len(errs))
	}
	for _, e := range errs {
		lc.check("the error of a reload with "+e[:strings.Index(e, ":")], e)
	}

	// The collector got the key (it is revealed where it is sent), and
	// the logs and /state show nothing after all that.
	eventually(t, "an export with the collector's key", func() bool { return col.saw(canaryHeader) })
	resp, body = call(t, http.MethodGet, p.admin+"/state?decisions=1000", "", bearer)
	lc.check("GET /state at the end", response(resp, body))
	lc.check("the logs", logs.String())
	if !strings.Contains(logs.String(), "reload refused") && !strings.Contains(logs.String(), "configuration applied") {
		t.Errorf("the logs were not captured:\n%.2000s", logs.String())
	}
	t.Logf("%d texts checked for %d secrets, %d routes", lc.checked.Load(), len(lc.secrets)/3, len(routes))
}

func mustRead(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	must(t, err)
	return string(b)
}
