// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/lru"
	"github.com/sluicehq/sluice/internal/netprefix"
)

// limitState is a compiled SourceLimit: a GCRA ("virtual scheduling")
// token bucket. A bucket of rate r and size b admits a connection at t iff
// tat − t ≤ τ, where tat is its theoretical arrival time, T = 1/r the
// emission interval and τ = (b−1)·T; an admission sets
// tat = max(tat, t) + T. This is exactly a token bucket of b tokens
// refilled at r per second (a bucket with tat ≤ t is full), kept in one
// int64 so that per-address state is small and reusable.
type limitState struct {
	deny, exempt bool
	perAddress   bool
	interval     int64 // T, in nanoseconds
	tolerance    int64 // τ = (b−1)·T, in nanoseconds
	tat          int64 // the shared bucket of a prefix rule (!perAddress)
}

func compileLimit(l SourceLimit, perAddress bool) limitState {
	s := limitState{perAddress: perAddress}
	switch {
	case l.Rate == 0:
		s.deny = true
	case math.IsInf(l.Rate, 1):
		s.exempt = true
	default:
		s.interval = int64(math.Round(1e9 / l.Rate))
		s.tolerance = int64(l.Burst-1) * s.interval
		s.tat = math.MinInt64 / 2 // full
	}
	return s
}

// take admits one connection at t (nanoseconds since the table's base) if
// the bucket whose theoretical arrival time is *tat allows it.
func (s *limitState) take(tat *int64, t int64) bool {
	t0 := max(*tat, t)
	if t0-t > s.tolerance {
		return false
	}
	*tat = t0 + s.interval
	return true
}

// sourceTable is the per-source part of a Policer. The per-address buckets
// (each its GCRA theoretical arrival time) live in an LRU map of at most
// maxTracked entries with least-recently-seen replacement: it never grows
// beyond that, and a replacement reuses the slot without allocating.
type sourceTable struct {
	mu         sync.Mutex
	base       time.Time
	m          *netprefix.Table[int] // rule prefixes → rule index
	rules      []limitState
	def        limitState
	hasDefault bool

	tats *lru.Map[netip.Addr, int64] // per-address buckets; nil when no rule needs them

	evictions      uint64 // replaced entries
	lossyEvictions uint64 // replaced entries whose bucket was not full
}

func newSourceTable(c *SourceConfig, m *netprefix.Table[int], now time.Time) *sourceTable {
	t := &sourceTable{base: now, m: m}
	for _, r := range c.Rules {
		t.rules = append(t.rules, compileLimit(r.limit(), r.PerAddress))
	}
	if c.Default != nil {
		t.def = compileLimit(*c.Default, true)
		t.hasDefault = true
	}
	if c.usesTable() {
		// Start small; the map grows on demand up to MaxTracked.
		t.tats = lru.New[netip.Addr, int64](c.MaxTracked, min(c.MaxTracked, 1024))
	}
	return t
}

// admit reports whether the source a may open a connection at now. An
// invalid a (the source is unknown, as on a Unix socket) is not policed
// per source.
func (t *sourceTable) admit(now time.Time, a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.Unmap().WithZone("")
	t.mu.Lock()
	defer t.mu.Unlock()
	var l *limitState
	if i, ok := t.m.Match(a); ok {
		l = &t.rules[i]
	} else if t.hasDefault {
		l = &t.def
	} else {
		return true
	}
	switch {
	case l.deny:
		return false
	case l.exempt:
		return true
	}
	ns := int64(now.Sub(t.base))
	if !l.perAddress {
		return l.take(&l.tat, ns)
	}
	return l.take(t.lookup(a, ns), ns)
}

// lookup returns the bucket (theoretical arrival time) of a, creating it
// full if needed (replacing the least recently seen address when the
// table is full), and makes it the most recently seen. Called with mu
// held.
func (t *sourceTable) lookup(a netip.Addr, ns int64) *int64 {
	if tat := t.tats.Get(a); tat != nil {
		return tat
	}
	tat, _, old, evicted := t.tats.Put(a, ns) // tat ≤ now: a full bucket
	if evicted {
		t.evictions++
		if old > ns {
			t.lossyEvictions++
		}
	}
	return tat
}

// stats returns the number of tracked addresses and the eviction counts.
func (t *sourceTable) stats() (tracked int, evictions, lossy uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tats == nil {
		return 0, t.evictions, t.lossyEvictions
	}
	return t.tats.Len(), t.evictions, t.lossyEvictions
}
