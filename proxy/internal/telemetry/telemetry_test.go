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

// recorder is a slog.Handler that keeps the messages and their err
// attributes.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		msg += " " + a.Key + "=" + a.Value.String()
		return true
	})
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
	return nil
}

func (r *recorder) find(sub string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			return m
		}
	}
	return ""
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
	rec := &recorder{}
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
	deadline := time.Now().Add(10 * time.Second)
	for rec.find("opentelemetry export failed") == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	m := rec.find("opentelemetry export failed")
	if m == "" {
		t.Fatalf("no warning logged; got %q", rec.msgs)
	}
	if !strings.HasPrefix(m, "WARN") || !strings.Contains(m, "endpoint="+col.URL) || !strings.Contains(m, "400") {
		t.Errorf("warning %q: want WARN, the endpoint and the collector's status", m)
	}
}
