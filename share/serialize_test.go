// SPDX-License-Identifier: Apache-2.0

package share

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Four clients with 10/20/30/40 % of B = 1000 B/s, each keeping four
// requests of 100-byte replies in flight for 600 s of virtual time (the
// handler answers at once). Serialised (the default), each client's
// replies take turns, so the aggregate stays near B. With Parallel, as the
// paper's children did, each reply is delayed independently and the four
// in flight multiply the aggregate.
func TestSerializedAggregateTracksB(t *testing.T) {
	run := func(parallel bool) (total float64, per [4]float64) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig()
			cfg.Parallel = parallel
			cfg.InitialMaxBandwidth = 4000 // 4·B, see docs/algorithms.md §3
			s := mustNew(t, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			go func() { _ = s.Run(ctx) }()
			names := []string{"a", "b", "c", "d"}
			var bytes [4]atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			const dur = 600 * time.Second
			for i, n := range names {
				c := id(t, s, n)
				h := Middleware(s, func(*http.Request) ClientID { return c })(bodyHandler(100, 100, true))
				for w := 0; w < 4; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for time.Since(start) < dur {
							rec := httptest.NewRecorder()
							h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
							if rec.Code == http.StatusOK && time.Since(start) > 100*time.Second {
								bytes[i].Add(int64(rec.Body.Len()))
							}
							if rec.Code != http.StatusOK {
								time.Sleep(100 * time.Millisecond)
							}
						}
					}()
				}
			}
			wg.Wait()
			cancel()
			for i := range per {
				per[i] = float64(bytes[i].Load()) / (dur - 100*time.Second).Seconds()
				total += per[i]
			}
		})
		return total, per
	}
	total, per := run(false)
	if total < 850 || total > 1150 {
		t.Fatalf("serialised: aggregate %.0f B/s (per client %.0f), want within 15%% of B = 1000", total, per)
	}
	for i, want := range []float64{0.1, 0.2, 0.3, 0.4} {
		if got := per[i] / total; got < want-0.03 || got > want+0.03 {
			t.Errorf("serialised: client %d share %.3f, want %.2f ± 0.03 (%v)", i, got, want, per)
		}
	}
	t.Logf("serialised: total %.0f B/s, per client %.0f", total, per)
	ptotal, pper := run(true)
	t.Logf("parallel: total %.0f B/s, per client %.0f", ptotal, pper)
	if ptotal < 2*total {
		t.Fatalf("parallel: aggregate %.0f B/s (%v) should be a multiple of the serialised %.0f", ptotal, pper, total)
	}
}
