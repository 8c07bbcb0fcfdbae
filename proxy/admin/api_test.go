// SPDX-License-Identifier: Apache-2.0

package admin

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/proxy/internal/dashboard"
	"github.com/sluicehq/sluice/proxy/internal/proxytest"
)

const testToken = "0123456789abcdef-test"

// fakeServer is a Server whose admin section a test swaps, as a reload
// does, and which records the changes the API asks for.
type fakeServer struct {
	cfg atomic.Pointer[Config]

	mu      sync.Mutex
	shadow  bool
	version uint64
	targets map[string]time.Duration
	calls   int // changes asked for
}

func (f *fakeServer) Admin() *Config     { return f.cfg.Load() }
func (f *fakeServer) State(n int) any    { return map[string]int{"decisions": n} }
func (f *fakeServer) RunningConfig() any { return struct{ Admin *Config }{f.cfg.Load()} }

func (f *fakeServer) Reload() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.version++
	return f.version, nil
}

func (f *fakeServer) SetTarget(name string, d time.Duration) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	old, ok := f.targets[name]
	if !ok {
		return "", ErrNoStage
	}
	if d > time.Hour {
		return "", errors.New("target too large")
	}
	f.targets[name] = d
	return old.String(), nil
}

func (f *fakeServer) SetShadow(on bool) (bool, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	old := f.shadow
	if old != on {
		f.shadow = on
		f.version++
	}
	return old, f.version, nil
}

func (f *fakeServer) changes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type emptyView struct{}

func (emptyView) State(int) dashboard.State { return dashboard.State{} }

// serve runs the admin API of a fake server on a loopback listener.
func serve(t *testing.T, cfg *Config) (*fakeServer, string) {
	t.Helper()
	f := &fakeServer{targets: map[string]time.Duration{"api": 200 * time.Millisecond}}
	f.cfg.Store(cfg)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	api := New(f, Options{Logger: slog.New(slog.DiscardHandler), Gatherer: prometheus.NewRegistry(),
		Healthz: ok, Readyz: ok, View: emptyView{}})
	srv := httptest.NewServer(api.Handler(false))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func call(t *testing.T, method, url, body, token string) (int, http.Header, string) {
	t.Helper()
	var hdr map[string]string
	if token != "" {
		hdr = map[string]string{"Authorization": "Bearer " + token}
	}
	return proxytest.Fetch(t, http.DefaultClient, method, url, strings.NewReader(body), hdr)
}

// The guard reads the admin section the server runs now: a new section
// (a reload) that sets a token, opens an endpoint or rotates the token
// applies to the next request.
func TestGuardFollowsRunningSection(t *testing.T) {
	f, url := serve(t, &Config{Addr: DefaultAddr})
	if code, _, body := call(t, "GET", url+"/state?decisions=3", "", ""); code != 200 || !strings.Contains(body, `"decisions": 3`) {
		t.Fatalf("no token configured: %d %s", code, body)
	}
	f.cfg.Store(&Config{Addr: DefaultAddr, Token: secret.String(testToken)})
	code, h, body := call(t, "GET", url+"/state", "", "")
	if code != 401 || h.Get("WWW-Authenticate") == "" || !strings.Contains(body, "admin token") {
		t.Fatalf("token configured, none sent: %d %q %s", code, h.Get("WWW-Authenticate"), body)
	}
	if code, _, _ := call(t, "GET", url+"/state", "", testToken); code != 200 {
		t.Errorf("with the token: %d", code)
	}
	if code, _, _ := call(t, "GET", url+"/healthz", "", ""); code != 200 {
		t.Errorf("/healthz without the token: %d", code)
	}
	f.cfg.Store(&Config{Addr: DefaultAddr, Token: secret.String(testToken), Public: []string{EndpointState}})
	if code, _, _ := call(t, "GET", url+"/state", "", ""); code != 200 {
		t.Errorf("state public: %d", code)
	}
	if code, _, _ := call(t, "GET", url+"/config", "", ""); code != 401 {
		t.Errorf("config not public: %d", code)
	}
	f.cfg.Store(&Config{Addr: DefaultAddr, Token: secret.String(testToken + "-rotated")})
	if code, _, _ := call(t, "GET", url+"/state", "", testToken); code != 401 {
		t.Errorf("the old token after a rotation: %d", code)
	}
}

// Changes need the token in the header; a refused, oversized or
// misdirected change never reaches the server, and the answers say what
// the server did.
func TestChanges(t *testing.T) {
	f, url := serve(t, &Config{Addr: DefaultAddr, Token: secret.String(testToken), Public: []string{EndpointUI}})
	for _, tc := range []struct {
		method, path, body, token string
		status                    int
		want                      string
	}{
		{"PUT", "/shadow", `{"shadow":true}`, "", 401, "admin token"},
		{"PUT", "/shadow", strings.Repeat(" ", MaxBodyBytes) + `{"shadow":true}`, testToken, 413, "larger than 4096 bytes"},
		{"PUT", "/shadow", `{"shadow":1}`, testToken, 400, "body must be JSON like"},
		{"PUT", "/stages/api/target", `{"target":"-1s"}`, testToken, 400, "must be a positive duration"},
		{"POST", "/reload", "", "", 401, "admin token"},
	} {
		code, _, body := call(t, tc.method, url+tc.path, tc.body, tc.token)
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %.30q: %d %s, want %d %q", tc.method, tc.path, tc.body, code, body, tc.status, tc.want)
		}
	}
	if n := f.changes(); n != 0 {
		t.Fatalf("%d refused changes reached the server", n)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/shadow", `{"shadow":true}`, 200, `"config_version": 1`},
		{"PUT", "/stages/api/target", `{"target":"300ms"}`, 200, `"old": "200ms"`},
		{"PUT", "/stages/nosuch/target", `{"target":"300ms"}`, 404, `no stage \"nosuch\"`},
		{"PUT", "/stages/api/target", `{"target":"2h"}`, 400, "target too large"},
		{"POST", "/reload", "", 200, `"config_version": 2`},
	} {
		if code, _, body := call(t, tc.method, url+tc.path, tc.body, testToken); code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d %q", tc.method, tc.path, tc.body, code, body, tc.status, tc.want)
		}
	}
}
