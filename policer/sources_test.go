// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gate"
)

func TestPerSourcePolicing(t *testing.T) {
	A, R, S := Admitted, RejectedRate, RejectedSource
	inf := math.Inf(1)
	sources := SourceConfig{
		Default: &SourceLimit{Rate: 1, Burst: 1}, // every unlisted address: 1/s
		Rules: []SourceRule{
			{Prefix: "10.0.0.0/8", Rate: 2, Burst: 2},                    // shared by all of 10/8
			{Prefix: "10.1.0.0/16", Rate: 1, Burst: 3, PerAddress: true}, // longer: each address its own
			{Prefix: "10.1.2.3", Rate: 0},                                // deny one host
			{Prefix: "192.0.2.0/24", Rate: inf},                          // exempt
			{Prefix: "2001:db8::/32", Rate: 1, Burst: 1},                 // shared IPv6 prefix
		},
		MaxTracked: 100,
	}
	tests := []struct {
		name   string
		global Config
		steps  []step
	}{
		{"default per address", Config{Rate: inf, Burst: 1}, []step{
			conn(0, "198.51.100.1", A), conn(0, "198.51.100.1", S),
			conn(0, "198.51.100.2", A), // another address, another bucket
			conn(1000, "198.51.100.1", A),
		}},
		{"shared prefix bucket", Config{Rate: inf, Burst: 1}, []step{
			conn(0, "10.9.9.9", A), conn(0, "10.200.0.1", A), conn(0, "10.3.3.3", S),
			conn(500, "10.77.0.0", A),
		}},
		{"longest match wins", Config{Rate: inf, Burst: 1}, []step{
			conn(0, "10.1.9.9", A), conn(0, "10.1.9.9", A), conn(0, "10.1.9.9", A), conn(0, "10.1.9.9", S),
			conn(0, "10.1.9.8", A),        // its own bucket within 10.1/16
			conn(0, "10.9.0.1", A),        // 10/8's shared bucket is untouched by 10.1/16
			conn(0, "10.1.2.3", S),        // the /32 deny rule beats 10.1/16
			conn(0, "::ffff:10.1.2.3", S), // matched unmapped
		}},
		{"exempt and IPv6", Config{Rate: inf, Burst: 1}, []step{
			conn(0, "192.0.2.1", A), conn(0, "192.0.2.1", A), conn(0, "192.0.2.1", A),
			conn(0, "2001:db8::1", A), conn(0, "2001:db8:ffff::2", S),
			conn(0, "2001:db9::1", A), // unlisted: default
			conn(0, "2001:db9::1", S),
		}},
		{"unknown source only global", Config{Rate: 1, Burst: 1}, []step{
			conn(0, "", A), conn(0, "", R),
		}},
		{"source refusal takes no global token", Config{Rate: 1, Burst: 2}, []step{
			conn(0, "198.51.100.1", A), conn(0, "198.51.100.1", S), conn(0, "198.51.100.1", S),
			conn(0, "198.51.100.2", A), // the global bucket still has its second token
			conn(0, "198.51.100.3", R), // now it has none
			conn(0, "192.0.2.1", R),    // exempt from source policing, not from the global bucket
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.global
			cfg.Sources = sources
			run(t, mustNew(t, cfg), tt.steps)
		})
	}
}

func TestDenyDefaultAllowList(t *testing.T) {
	cfg := Config{Rate: math.Inf(1), Burst: 1, Sources: SourceConfig{
		Default: &SourceLimit{Rate: 0},
		Rules:   []SourceRule{{Prefix: "127.0.0.0/8", Rate: math.Inf(1)}},
	}}
	run(t, mustNew(t, cfg), []step{
		conn(0, "127.0.0.1", Admitted), conn(0, "127.0.0.1", Admitted), conn(0, "8.8.8.8", RejectedSource),
	})
	if n := mustNew(t, cfg).Stats().TrackedSources; n != 0 {
		t.Errorf("TrackedSources = %d for stateless rules, want 0", n)
	}
}

// TestSourceBucketIsATokenBucket checks the GCRA per-source bucket against
// gate.TokenBucket (golang.org/x/time/rate) on random arrival times: the
// same rate and burst must give the same decisions.
func TestSourceBucketIsATokenBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, lim := range []SourceLimit{{Rate: 10, Burst: 1}, {Rate: 10, Burst: 5}, {Rate: 250, Burst: 20}, {Rate: 0.5, Burst: 3}} {
		cfg := Config{Rate: math.Inf(1), Burst: 1, Sources: SourceConfig{Default: &lim, MaxTracked: 4}}
		p := mustNew(t, cfg)
		ref, err := gate.NewTokenBucket(lim.Rate, lim.Burst)
		if err != nil {
			t.Fatal(err)
		}
		src := netip.MustParseAddr("198.51.100.7")
		// Arrivals on a grid of 1/(7·rate) offset by a quarter step, so that
		// no arrival falls exactly on a token boundary where float rounding
		// in the reference could go either way.
		step := time.Duration(float64(time.Second) / lim.Rate / 7)
		now := t0.Add(step / 4)
		agree := 0
		for i := range 5000 {
			now = now.Add(step * time.Duration(rng.IntN(4)))
			got := p.Admit(now, src) == Admitted
			want := ref.AllowAt(now)
			if got != want {
				t.Fatalf("rate %v burst %d: arrival %d at %v: source bucket %v, token bucket %v", lim.Rate, lim.Burst, i, now.Sub(t0), got, want)
			}
			if !got {
				agree++
			}
		}
		if agree == 0 {
			t.Fatalf("rate %v burst %d: no refusals in 5000 arrivals; the test exercises nothing", lim.Rate, lim.Burst)
		}
	}
}

func TestSourceTableBounded(t *testing.T) {
	const maxTracked = 4096
	cfg := Config{Rate: math.Inf(1), Burst: 1, Sources: SourceConfig{
		Default:    &SourceLimit{Rate: 1, Burst: 1},
		MaxTracked: maxTracked,
	}}
	p := mustNew(t, cfg)
	const n = 1_000_000
	now := t0
	for i := range n {
		// 1,000,000 distinct sources within 10.0.0.0/8, 10 µs apart: each
		// is admitted (a fresh full bucket) and then owes 1 s of refill.
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if v := p.Admit(now, a); v != Admitted {
			t.Fatalf("source %d (%v): %v, want admitted", i, a, v)
		}
		now = now.Add(10 * time.Microsecond)
	}
	s := p.Stats()
	if s.TrackedSources != maxTracked || s.MaxTracked != maxTracked {
		t.Errorf("TrackedSources = %d (MaxTracked %d), want exactly %d", s.TrackedSources, s.MaxTracked, maxTracked)
	}
	if got := p.sources.tats.Len(); got != maxTracked || p.sources.tats.Cap() != maxTracked {
		t.Errorf("table holds %d of %d, want %d (internal/lru bounds its memory to its capacity)", got, p.sources.tats.Cap(), maxTracked)
	}
	if s.Evictions != n-maxTracked {
		t.Errorf("Evictions = %d, want %d", s.Evictions, n-maxTracked)
	}
	// Every replaced bucket was 40.96 ms old and owed 1 s: all lossy.
	if s.LossyEvictions != s.Evictions {
		t.Errorf("LossyEvictions = %d, want %d (every replaced bucket was still refilling)", s.LossyEvictions, s.Evictions)
	}
	// The most recent maxTracked sources are still tracked and refused.
	const lastID = n - 1
	last := netip.AddrFrom4([4]byte{10, byte(lastID >> 16), byte(lastID >> 8 & 0xff), byte(lastID & 0xff)})
	if v := p.Admit(now, last); v != RejectedSource {
		t.Errorf("most recent source after the flood: %v, want rejected (its bucket is remembered)", v)
	}
	first := netip.AddrFrom4([4]byte{10, 0, 0, 0})
	if v := p.Admit(now, first); v != Admitted {
		t.Errorf("first source after the flood: %v, want admitted (its bucket was replaced)", v)
	}
}

func TestSourceTableLRUOrder(t *testing.T) {
	cfg := Config{Rate: math.Inf(1), Burst: 1, Sources: SourceConfig{
		Default:    &SourceLimit{Rate: 1, Burst: 1},
		MaxTracked: 2,
	}}
	p := mustNew(t, cfg)
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	steps := []struct {
		ms   float64
		src  netip.Addr
		want Verdict
	}{
		{0, a, Admitted},
		{0, b, Admitted},
		{1, a, RejectedSource}, // a is now the most recently seen
		{2, c, Admitted},       // replaces b, the least recently seen
		{3, a, RejectedSource}, // a still remembered
		{4, b, Admitted},       // b was forgotten: a fresh bucket (replaces c)
		{5, c, Admitted},       // c was forgotten too (replaces a)
	}
	for i, s := range steps {
		if got := p.Admit(at(s.ms), s.src); got != s.want {
			t.Fatalf("step %d (%v at %vms): %v, want %v", i, s.src, s.ms, got, s.want)
		}
	}
	if s := p.Stats(); s.TrackedSources != 2 || s.Evictions != 3 || s.LossyEvictions != 3 {
		t.Errorf("Stats = %+v, want 2 tracked, 3 evictions, 3 lossy", s)
	}
	// After the buckets refill, replacing them loses nothing.
	p.Admit(at(5000), netip.MustParseAddr("192.0.2.4"))
	if s := p.Stats(); s.Evictions != 4 || s.LossyEvictions != 3 {
		t.Errorf("Stats = %+v, want 4 evictions, still 3 lossy", s)
	}
}

func BenchmarkAdmit(b *testing.B) {
	src := netip.MustParseAddr("198.51.100.7")
	cases := []struct {
		name string
		cfg  Config
	}{
		{"global-only", Config{Rate: 1e9, Burst: 20}},
		{"global-reject", Config{Rate: 0, Burst: 1}},
		{"per-source", Config{Rate: 1e9, Burst: 20, Sources: SourceConfig{
			Default: &SourceLimit{Rate: 1e6, Burst: 20}, MaxTracked: 1024,
			Rules: []SourceRule{{Prefix: "10.0.0.0/8", Rate: 5, Burst: 1}, {Prefix: "2001:db8::/32", Rate: 5, Burst: 1}},
		}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p, err := New(c.cfg, t0)
			if err != nil {
				b.Fatal(err)
			}
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				p.Admit(now, src)
			}
		})
	}
}
