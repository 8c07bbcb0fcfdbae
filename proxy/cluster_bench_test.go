// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/localredis"
)

// BenchmarkClusterAdmission is the handler's per-request cost with a
// static-rate stage (admitting everything) over a canned transport,
// without a cluster section ("local") and in cluster mode with its
// runner syncing with a real redis-server every 100 ms ("cluster"):
// cluster mode adds nothing to the request path, so the two should
// match (ns/op within noise, the same allocs/op). Without redis-server
// the cluster case is skipped.
func BenchmarkClusterAdmission(b *testing.B) {
	stages := "stages:\n  - {name: api, match: {path_prefix: /}, controller: static-rate, params: {rate: 1e9}}\n"
	for _, mode := range []string{"local", "cluster"} {
		b.Run(mode, func(b *testing.B) {
			text := baseConfig("http://127.0.0.1:8081", stages)
			if mode == "cluster" {
				if _, err := localredis.Path(); err != nil {
					b.Skip(err)
				}
				rs, err := localredis.Start()
				if err != nil {
					b.Fatal(err)
				}
				defer rs.Stop()
				text += fmt.Sprintf("cluster: {addrs: [%s], instance: bench, period: 100ms}\n", rs.Addr)
			}
			srv := benchServer(b, text, Options{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
			g := srv.h.gen.Load()
			g.pool.rt = cannedTransport{}
			if g.cluster != nil {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { g.cluster.Run(ctx); close(done) }()
				defer func() { cancel(); <-done }()
				deadline := time.Now().Add(10 * time.Second)
				for g.cluster.View().Mode != cluster.ModeSynced {
					if time.Now().After(deadline) {
						b.Fatal("the cluster runner did not sync within 10 s")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			var syncs0 uint64
			if g.cluster != nil {
				syncs0 = g.cluster.View().Syncs
			}
			began := time.Now()
			req := benchRequest()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					srv.Handler().ServeHTTP(w, req)
				}
			})
			b.StopTimer()
			if g.cluster != nil {
				v := g.cluster.View()
				if v.Mode != cluster.ModeSynced || time.Since(began) > 500*time.Millisecond && v.Syncs == syncs0 {
					b.Fatalf("the runner was not syncing during the benchmark: %+v", v)
				}
			}
		})
	}
}
