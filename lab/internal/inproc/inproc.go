// SPDX-License-Identifier: Apache-2.0

// Package inproc runs the sluice proxy inside a test's process, on real
// loopback sockets, as a program embedding the proxy package would: the
// lab's tests of the dashboard and of the proxy's reliability start it
// this way.
package inproc

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/proxy"
)

// stopTimeout bounds the wait for Serve to return once the test ends; it
// is generous (machines are noisy) and only reached when something hangs.
const stopTimeout = 30 * time.Second

// Start writes the configuration cfg to a file in the test's temporary
// folder, loads it, and serves it, logs discarded and metrics in a
// registry of its own, until the test ends. Any error fails the test.
func Start(t testing.TB, cfg string) *proxy.Server {
	t.Helper()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := proxy.LoadFile(file)
	if err != nil {
		t.Fatalf("config: %v", err)
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
		case <-time.After(stopTimeout):
			t.Error("Serve did not return after the test")
		}
	})
	return srv
}
