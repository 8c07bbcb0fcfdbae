// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/proxy/internal/proxytest"
)

func TestNewNeedsASignal(t *testing.T) {
	if _, err := New(t.Context(), Options{Endpoint: "http://127.0.0.1:4318", ServiceName: "s"}); err == nil {
		t.Fatal("no error with neither traces nor metrics")
	}
	var off *Telemetry
	if off.Tracing() {
		t.Error("a nil Telemetry traces")
	}
	if err := off.Shutdown(t.Context()); err != nil {
		t.Errorf("nil Shutdown: %v", err)
	}
}

// A collector that refuses the exports: the failure reaches the proxy's
// logger as a warning naming the endpoint, not the standard log package.
func TestExportErrorsGoToTheLogger(t *testing.T) {
	var posts sync.WaitGroup
	posts.Add(1)
	var once sync.Once
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(posts.Done)
		http.Error(w, "no", http.StatusBadRequest) // not retryable
	}))
	defer col.Close()
	rec := &proxytest.LogRecorder{}
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	reg.MustRegister(c)
	c.Inc()
	tel, err := New(t.Context(), Options{Endpoint: col.URL, Metrics: true, Interval: 20 * time.Millisecond,
		ServiceName: "sluice", Gatherer: reg, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	posts.Wait()
	proxytest.Eventually(t, "the export's failure in the log", func() bool { return rec.Find("opentelemetry export failed") != "" })
	m := rec.Find("opentelemetry export failed")
	if !strings.HasPrefix(m, "WARN") || !strings.Contains(m, "endpoint="+col.URL) || !strings.Contains(m, "400") {
		t.Errorf("warning %q: want WARN, the endpoint and the collector's status", m)
	}
}

// The conventions' forms of a request's method, protocol version and
// server address.
func TestConventionForms(t *testing.T) {
	for m, want := range map[string]string{"GET": "GET", "PATCH": "PATCH", "PROPFIND": "_OTHER", "get": "_OTHER"} {
		if got, known := Method(m); got != want || known != (got == m) {
			t.Errorf("Method(%q) = %q, %v", m, got, known)
		}
	}
	for _, c := range []struct {
		major, minor int
		want         string
	}{{1, 1, "1.1"}, {1, 0, "1.0"}, {2, 0, "2"}, {3, 0, "3"}, {0, 9, "0.9"}} {
		if got := ProtocolVersion(c.major, c.minor); got != c.want {
			t.Errorf("ProtocolVersion(%d, %d) = %q, want %q", c.major, c.minor, got, c.want)
		}
	}
	for _, c := range []struct {
		hostport, scheme, host string
		port                   int
	}{{"example.com", "http", "example.com", 80}, {"example.com", "https", "example.com", 443},
		{"example.com:8443", "https", "example.com", 8443}, {"[::1]:8080", "http", "::1", 8080}, {"[::1]", "http", "::1", 80}} {
		if host, port := hostPort(c.hostport, c.scheme); host != c.host || port != c.port {
			t.Errorf("hostPort(%q, %q) = %q, %d", c.hostport, c.scheme, host, port)
		}
	}
}

// Endpoint names where the exporters send, as they resolve it: the
// configured base, else a signal's own variable, else the general one
// with the signal's path, else the default.
func TestEndpoint(t *testing.T) {
	if got := Endpoint("http://c:4318", true, true); got != "http://c:4318" {
		t.Errorf("configured: %q", got)
	}
	if got := Endpoint("", true, true); got != "http://localhost:4318/v1/traces http://localhost:4318/v1/metrics" {
		t.Errorf("default: %q", got)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://user:key@otel.example/")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces.example/in")
	if got := Endpoint("", true, true); got != "https://traces.example/in https://otel.example/v1/metrics" {
		t.Errorf("from the environment: %q", got)
	}
}
