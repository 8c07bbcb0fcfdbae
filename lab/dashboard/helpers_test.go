// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/proxy"
)

// testTimeout bounds every wait here; only reached when something hangs.
const testTimeout = 20 * time.Second

// uiToken is the admin token of the proxy under test.
const uiToken = "0123456789abcdef-test"

// running is a proxy started for a test through the proxy package's API,
// as a program embedding it would.
type running struct {
	url   string // http://addr of the first listener
	admin string // http://admin addr
}

// startProxy writes cfg to a file, loads it and serves it until the test
// ends.
func startProxy(t *testing.T, cfg string) *running {
	t.Helper()
	file := filepath.Join(t.TempDir(), "proxy.yaml")
	must(t, os.WriteFile(file, []byte(cfg), 0o644))
	c, err := proxy.LoadFile(file)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := proxy.New(c, proxy.Options{ConfigFile: file, Logger: logger, Registerer: prometheus.NewRegistry()})
	must(t, err)
	must(t, srv.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(testTimeout):
			t.Error("Serve did not return after cancel")
		}
	})
	return &running{url: "http://" + srv.Addrs()[0].String(), admin: "http://" + srv.AdminAddr().String()}
}

var client = &http.Client{Timeout: testTimeout}

// state fetches GET /state with the admin token.
func (r *running) state(t *testing.T) proxy.StateDoc {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, r.admin+"/state?decisions=5", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+uiToken)
	resp, err := client.Do(req)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	if resp.StatusCode != 200 {
		t.Fatalf("/state: %d %s", resp.StatusCode, body)
	}
	var st proxy.StateDoc
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("/state: %v\n%s", err, body)
	}
	return st
}

// eventually polls cond until it holds or testTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
