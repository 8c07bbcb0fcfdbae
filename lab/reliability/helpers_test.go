// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"context"
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

// testTimeout bounds every wait; it is generous (machines are noisy) and
// only reached when something hangs.
const testTimeout = 30 * time.Second

// sluice is an in-process proxy serving a configuration on real sockets.
type sluice struct {
	srv   *proxy.Server
	addr  string // the first listener, host:port
	admin string // http://host:port
}

// startSluice loads cfg (BACKEND replaced by backendURL) from a file and
// serves it until the test ends.
func startSluice(t *testing.T, cfg string) *sluice {
	t.Helper()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := proxy.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(c, proxy.Options{ConfigFile: file, Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(testTimeout):
			t.Error("Serve did not return")
		}
	})
	return &sluice{srv: srv, addr: srv.Addrs()[0].String(), admin: "http://" + srv.AdminAddr().String()}
}

// httpClient bounds every request and keeps no idle connection after a
// test (goleak).
func httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: testTimeout, Transport: tr}
}

func fetch(t *testing.T, c *http.Client, url string) (int, string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
