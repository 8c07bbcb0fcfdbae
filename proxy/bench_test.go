// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/proxy/buffer"
)

// cannedTransport answers every request at once with a small 200, so
// that the benchmarks measure the proxy's own path, not the network.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/plain"}}, ContentLength: 5,
		Body: io.NopCloser(strings.NewReader("hello")), Request: r}, nil
}

func benchRequest() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://shop.example/api/items?id=7", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("User-Agent", "bench")
	r.Header.Set("Accept", "*/*")
	return r
}

// discardWriter is a minimal ResponseWriter.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}

// benchServer is a Server of the configuration text, made with opts.
func benchServer(b *testing.B, text string, opts Options) *Server {
	b.Helper()
	cfg, err := Parse("bench.yaml", []byte(text))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// cannedServer is a Server of a SEDA stage that admits everything, with
// extra added to its configuration, over a canned transport.
func cannedServer(b *testing.B, extra string) *Server {
	srv := benchServer(b, baseConfig("http://127.0.0.1:8081", sedaStage+extra), Options{Registerer: prometheus.NewRegistry()})
	srv.h.gen.Load().pool.rt = cannedTransport{}
	return srv
}

// BenchmarkHandler compares a bare httputil.ReverseProxy with sluice's
// handler (a SEDA stage that admits everything, the pool, measurement),
// both over a canned transport.
func BenchmarkHandler(b *testing.B) {
	target, _ := url.Parse("http://127.0.0.1:8081")
	bare := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: cannedTransport{}, FlushInterval: -1,
	}
	pooled := *bare
	pooled.BufferPool = buffer.NewPool(buffer.DefaultMaxMemoryBytes)
	srv := cannedServer(b, "")
	// The same with OTLP traces on (every request sampled), exported to a
	// receiver that discards them: the cost of tracing; "sluice-seda" is
	// the telemetry-off path.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer sink.Close()
	traced := cannedServer(b, "telemetry:\n  otlp: {endpoint: "+sink.URL+", traces: true}\n")
	defer func() { _ = traced.tel.Shutdown(b.Context()) }()
	// The same with the access log on (to /dev/null, its writer running):
	// every request formats its line (the bench's requests carry no
	// request id, so each gets a new one), up to max_per_second.
	logged := cannedServer(b, "access_log: {path: "+os.DevNull+", max_per_second: 0}\n")
	lctx, stopLog := context.WithCancel(b.Context())
	defer stopLog()
	go logged.h.alog.run(lctx)
	for _, c := range []struct {
		name string
		h    http.Handler
		path string
	}{{"bare-reverseproxy", bare, ""}, {"bare-reverseproxy-bufferpool", &pooled, ""}, {"sluice-seda", srv.Handler(), ""},
		// A backend probe path (health.backend_paths): past admission control.
		{"sluice-probe-path", srv.Handler(), "/healthz"},
		{"sluice-seda-otlp-traces", traced.Handler(), ""},
		{"sluice-seda-access-log", logged.Handler(), ""}} {
		b.Run(c.name, func(b *testing.B) {
			req := benchRequest()
			if c.path != "" {
				req = req.Clone(req.Context())
				req.URL.Path, req.RequestURI = c.path, c.path
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					c.h.ServeHTTP(w, req)
				}
			})
		})
	}
}

// BenchmarkUpstreamTransport compares the standard transport with the
// pool's own (h1Transport) over loopback against a trivial backend (1 KiB
// answers), 16 goroutines on the box's cores: ns/op is roughly the CPU
// per request of client and backend together, so the difference is the
// transports'.
func BenchmarkUpstreamTransport(b *testing.B) {
	body := strings.Repeat("x", 1023) + "\n"
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, body)
	}))
	defer be.Close()
	cfg := Config{Backends: BackendsConfig{Servers: []ServerConfig{{URL: be.URL}}}}
	cfg.SetDefaults()
	cfg.Backends.MaxIdleConnsPerHost = 64
	std := NewTransport(cfg.Backends)
	h1 := newH1Transport(cfg.Backends, NewTransport(cfg.Backends))
	defer std.CloseIdleConnections()
	defer h1.Close()
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"std", std}, {"h1", h1}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(8)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 32<<10)
				req, _ := http.NewRequest(http.MethodGet, be.URL+"/", nil)
				for pb.Next() {
					resp, err := c.rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					for {
						if _, err := resp.Body.Read(buf); err != nil {
							break
						}
					}
					resp.Body.Close()
				}
			})
		})
	}
}
