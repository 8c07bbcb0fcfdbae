package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
	pooled.BufferPool = newBufferPool()
	cfg, err := Parse("bench.yaml", []byte(baseConfig("http://127.0.0.1:8081", sedaStage)))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(cfg, Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	srv.h.gen.Load().pool.rt = cannedTransport{}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare-reverseproxy", bare}, {"bare-reverseproxy-bufferpool", &pooled}, {"sluice-seda", srv.Handler()}} {
		b.Run(c.name, func(b *testing.B) {
			req := benchRequest()
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
