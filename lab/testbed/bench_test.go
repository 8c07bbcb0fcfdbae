// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkQueueCore measures one arrival and one completion of the queue
// state machine with 8 servers and about 8 jobs in the system.
func BenchmarkQueueCore(b *testing.B) {
	for _, ps := range []bool{false, true} {
		name := "fifo"
		if ps {
			name = "ps"
		}
		b.Run(name, func(b *testing.B) {
			c := newQueueCore(8, ps, 0, time.Second)
			now := t0
			var done []completion
			id := uint64(0)
			for b.Loop() {
				id++
				now = now.Add(time.Millisecond)
				done, _ = c.arrive(now, id, 0.008, done[:0])
			}
		})
	}
}

// BenchmarkBookstorePage measures the server side of single pages on
// SQLite at scale 1, without the network.
func BenchmarkBookstorePage(b *testing.B) {
	cfg := DefaultBookstoreConfig()
	cfg.Data = b.TempDir()
	bs, err := NewBookstore(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer bs.Close()
	for _, tt := range []struct{ name, path, quality string }{
		{"home", "/home?C_ID=5", ""},
		{"home_low_quality", "/home?C_ID=5", "0.3"},
		{"product_detail", "/product_detail?I_ID=17", ""},
		{"best_sellers", "/best_sellers?SUBJECT=ARTS", ""},
		{"new_products", "/new_products?SUBJECT=ARTS", ""},
		{"search_title", "/search_results?search_type=title&search_string=river", ""},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("GET", tt.path, nil)
				if tt.quality != "" {
					req.Header.Set(QualityHeader, tt.quality)
				}
				rec := httptest.NewRecorder()
				bs.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("%s: %d", tt.path, rec.Code)
				}
			}
		})
	}
}
