// SPDX-License-Identifier: Apache-2.0

package share

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func benchShares(b *testing.B, cacheSize int) (*Shares, []netip.Addr) {
	cfg := paperConfig(0)
	cfg.CacheSize = cacheSize
	addrs := make([]netip.Addr, len(cfg.Clients))
	for i := range cfg.Clients {
		addrs[i] = netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
		cfg.Clients[i].CIDRs = []string{addrs[i].String(), "10.1." + string(rune('0'+i)) + ".0/24"}
	}
	cfg.Clients[0].CIDRs = append(cfg.Clients[0].CIDRs, "10.0.0.0/8", "2001:db8::/32")
	return mustNew(b, cfg), addrs
}

// BenchmarkShareOverhead is the per-request cost of the share logic on the
// hot path: client lookup by address (cache hit), Begin (standby slot,
// active flag), Delay (d_i and the delay), Release and Done (EWMA and Σ).
func BenchmarkShareOverhead(b *testing.B) {
	s, addrs := benchShares(b, DefaultCacheSize)
	m := s.Matcher()
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := m.MatchAddr(addrs[i&3])
		r, err := s.Begin(now, c)
		if err != nil {
			b.Fatal(err)
		}
		d, err := r.Delay(now, 10000)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
		r.Done(now.Add(d+time.Millisecond), 10000)
	}
}

// BenchmarkShareOverheadParallel is BenchmarkShareOverhead from every
// processor at once (one mutex shared by all).
func BenchmarkShareOverheadParallel(b *testing.B) {
	s, addrs := benchShares(b, DefaultCacheSize)
	m := s.Matcher()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := t0
		for i := 0; pb.Next(); i++ {
			c := m.MatchAddr(addrs[i&3])
			r, err := s.Begin(now, c)
			if err != nil {
				b.Error(err)
				return
			}
			d, _ := r.Delay(now, 10000)
			r.Release()
			r.Done(now.Add(d+time.Millisecond), 10000)
		}
	})
}

// BenchmarkMatchAddr compares an address lookup through the LRU cache
// (hit) with the longest-prefix walk alone.
func BenchmarkMatchAddr(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"cached", DefaultCacheSize}, {"walk", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := benchShares(b, bc.size)
			m := s.Matcher()
			a := netip.MustParseAddr("10.200.0.9") // matches the /8 after 3 misses
			b.ReportAllocs()
			for b.Loop() {
				m.MatchAddr(a)
			}
		})
	}
}

// BenchmarkMiddleware is one request through the middleware with a zero
// delay and an in-memory response writer: identification, buffering a
// 10 KB reply, Begin/Delay/Done.
func BenchmarkMiddleware(b *testing.B) {
	cfg := paperConfig(0)
	cfg.TotalBandwidth = 1e12 // d ≥ Â: no delay
	s := mustNew(b, cfg)
	body := make([]byte, 10000)
	h := Middleware(s, func(*http.Request) ClientID { return 0 })(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	req := httptest.NewRequest("GET", "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Body.Len() != len(body) {
			b.Fatal("short reply")
		}
	}
}
