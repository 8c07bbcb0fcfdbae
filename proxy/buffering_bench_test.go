// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkLargeResponse is the cost of response buffering to a fast
// client: 1 MiB answers of a loopback backend through sluice's handler,
// response_buffering on (the default) and off, to a writer that discards.
// ns/op is the CPU of proxy and backend together on the box's cores;
// the backend's share is the same in both, so the ratio of the two
// understates the proxy's own (docs/reliability.md, "Cost to fast clients").
func BenchmarkLargeResponse(b *testing.B) {
	body := []byte(strings.Repeat("0123456789abcdef", 1<<16))
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer be.Close()
	for _, c := range []struct{ name, extra string }{
		{"buffering-on", ""}, {"buffering-off", "response_buffering:\n  enabled: false\n"}} {
		b.Run(c.name, func(b *testing.B) {
			h := benchServer(b, baseConfig(be.URL, sedaStage+c.extra), Options{Registerer: prometheus.NewRegistry()}).Handler()
			req := benchRequest()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, req)
				}
			})
		})
	}
}
