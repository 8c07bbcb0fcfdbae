// SPDX-License-Identifier: Apache-2.0

package share

import (
	"encoding/binary"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"testing"
)

func matcherConfig() Config {
	cfg := DefaultConfig()
	cfg.TotalBandwidth = 1000
	cfg.Clients = []ClientConfig{
		{Name: "net8", Share: 10, CIDRs: []string{"10.0.0.0/8"}},
		{Name: "net24", Share: 10, CIDRs: []string{"10.1.2.0/24", "2001:db8::/32"}},
		{Name: "host", Share: 10, CIDRs: []string{"10.1.2.3"}},
		{Name: "hdr", Share: 10, HeaderValues: []string{"tenant-h"}},
		{Name: "key", Share: 10, APIKeys: []APIKey{"K-123"}},
	}
	return cfg
}

func TestMatcher(t *testing.T) {
	m, err := NewMatcher(matcherConfig())
	if err != nil {
		t.Fatal(err)
	}
	name := func(c ClientID) string {
		if c == m.Others() {
			return OthersName
		}
		return matcherConfig().Clients[c].Name
	}
	addr := netip.MustParseAddr
	cases := []struct {
		desc string
		id   Identity
		want string
	}{
		{"longest prefix: host", Identity{Addr: addr("10.1.2.3")}, "host"},
		{"longest prefix: /24", Identity{Addr: addr("10.1.2.4")}, "net24"},
		{"longest prefix: /8", Identity{Addr: addr("10.9.9.9")}, "net8"},
		{"IPv4-mapped IPv6", Identity{Addr: addr("::ffff:10.1.2.3")}, "host"},
		{"IPv6 prefix", Identity{Addr: addr("2001:db8:1::5")}, "net24"},
		{"IPv6 with zone", Identity{Addr: addr("2001:db8::1%eth0")}, "net24"},
		{"unknown address", Identity{Addr: addr("192.0.2.1")}, OthersName},
		{"no address", Identity{}, OthersName},
		{"header from trusted peer", Identity{Addr: addr("10.9.9.9"), TrustedPeer: true, Header: "tenant-h"}, "hdr"},
		{"header from untrusted peer ignored", Identity{Addr: addr("10.9.9.9"), Header: "tenant-h"}, "net8"},
		{"unknown header value falls through", Identity{Addr: addr("10.9.9.9"), TrustedPeer: true, Header: "zzz"}, "net8"},
		{"API key first", Identity{Addr: addr("10.1.2.3"), TrustedPeer: true, Header: "tenant-h", APIKey: "K-123"}, "key"},
		{"API key compared exactly", Identity{APIKey: "k-123"}, OthersName},
		{"unknown API key", Identity{APIKey: "nope"}, OthersName},
	}
	for _, tc := range cases {
		// Twice: the second lookup of an address is a cache hit.
		for range 2 {
			if got := name(m.Match(tc.id)); got != tc.want {
				t.Errorf("%s: Match = %s, want %s", tc.desc, got, tc.want)
			}
		}
	}

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.4:5555"
	r.Header.Set("x-sluice-client", "tenant-h")
	if got := name(m.MatchRequest(r, false)); got != "net24" {
		t.Errorf("request from untrusted peer = %s, want net24", got)
	}
	if got := name(m.MatchRequest(r, true)); got != "hdr" {
		t.Errorf("request from trusted peer = %s, want hdr", got)
	}
	r.Header.Set("X-Api-Key", "K-123")
	if got := name(m.MatchRequest(r, true)); got != "key" {
		t.Errorf("request with API key = %s, want key", got)
	}
	r = httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8::7]:80"
	if got := name(m.MatchRequest(r, false)); got != "net24" {
		t.Errorf("IPv6 RemoteAddr = %s, want net24", got)
	}
	r.RemoteAddr = "garbage"
	if got := name(m.MatchRequest(r, false)); got != OthersName {
		t.Errorf("bad RemoteAddr = %s, want others", got)
	}
}

// cacheHeapBound is the documented bound on heap growth of a full cache at
// the default cap: 65536 entries at ≈ 120 bytes under churn (≈ 7.4 MB
// measured), with room for the map's growth slack.
const cacheHeapBound = 12 << 20

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMillionDistinctAddressesStayBounded feeds 1,000,000 distinct source
// addresses (and as many distinct API keys and header values) through the
// matcher and checks that the cache holds at most its cap and that the
// heap grew by less than cacheHeapBound.
func TestMillionDistinctAddressesStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	cfg := matcherConfig()
	m, err := NewMatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	var b [16]byte
	b[0], b[1] = 0x20, 0x01
	keyBuf := make([]byte, 0, 32)
	for i := range 1_000_000 {
		binary.BigEndian.PutUint64(b[8:], uint64(i)*2654435761)
		if got := m.MatchAddr(netip.AddrFrom16(b)); got != m.Others() {
			t.Fatalf("unexpected match %d", got)
		}
		if i%2 == 0 { // IPv4 too, half of them inside 10.0.0.0/8
			v4 := netip.AddrFrom4([4]byte{10 + byte(i&1), byte(i >> 16), byte(i >> 8), byte(i)})
			m.MatchAddr(v4)
		}
		keyBuf = binary.AppendUvarint(keyBuf[:0], uint64(i))
		m.Match(Identity{APIKey: string(keyBuf), TrustedPeer: true, Header: string(keyBuf)})
	}
	after := heapInUse()
	if n := m.CacheLen(); n > cfg.CacheSize {
		t.Fatalf("cache holds %d entries, cap %d", n, cfg.CacheSize)
	}
	growth := int64(after) - int64(before)
	t.Logf("1,000,000 distinct keys: cache %d entries (cap %d), heap growth %.2f MB (bound %d MB)",
		m.CacheLen(), cfg.CacheSize, float64(growth)/(1<<20), cacheHeapBound>>20)
	if growth > cacheHeapBound {
		t.Fatalf("heap grew by %d bytes, bound %d", growth, cacheHeapBound)
	}
	runtime.KeepAlive(m)
}
