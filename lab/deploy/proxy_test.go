// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/proxy"
)

// localConfig rewrites a sluice.yaml the chart rendered so that it loads
// here: its token file (holding token) in the test's directory; and,
// with a backend URL, so that it runs here: its listeners on free
// loopback ports, its servers at backend, its temporary directories the
// test's. Nothing else changes.
func localConfig(t *testing.T, text, token, backend string) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		t.Fatalf("sluice.yaml: %v", err)
	}
	dir := t.TempDir()
	admin := cfg["admin"].(map[string]any)
	if _, ok := admin["token_file"]; ok {
		f := filepath.Join(dir, "token")
		if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		admin["token_file"] = f
	}
	for _, l := range cfg["listeners"].([]any) {
		if backend == "" {
			break
		}
		l := l.(map[string]any)
		l["addr"] = "127.0.0.1:0"
		if _, ok := l["request_buffer_dir"]; ok {
			l["request_buffer_dir"] = dir
		}
	}
	if backend != "" {
		admin["addr"] = "127.0.0.1:0"
		for _, s := range cfg["backends"].(map[string]any)["servers"].([]any) {
			s.(map[string]any)["url"] = backend
		}
		if rb, ok := cfg["response_buffering"].(map[string]any); ok && rb["temp_dir"] != nil {
			rb["temp_dir"] = dir
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// running is a proxy started from a rendered configuration on loopback.
type running struct{ url, admin, token string }

// startProxy runs the rendered sluice.yaml text in front of a local
// backend that answers "ok", with token in its token file.
func startProxy(t *testing.T, text, token string) *running {
	t.Helper()
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(be.Close)
	file := localConfig(t, text, token, be.URL)
	cfg, err := proxy.LoadFile(file)
	if err != nil {
		t.Fatalf("the ConfigMap's sluice.yaml, run here: %v", err)
	}
	srv, err := proxy.New(cfg, proxy.Options{ConfigFile: file, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &running{url: "http://" + srv.Addrs()[0].String(), admin: "http://" + srv.AdminAddr().String(), token: token}
}

var client = &http.Client{Timeout: 10 * time.Second}

// get fetches url, with the admin token when auth is set, and returns
// the status and the body.
func (p *running) get(t *testing.T, url string, auth bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}

// eventually polls f for up to 20 s.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hasMetric reports whether a /metrics body has a sample of name.
func hasMetric(body, name string) bool {
	return strings.Contains(body, "\n"+name+"{") || strings.Contains(body, "\n"+name+" ")
}
