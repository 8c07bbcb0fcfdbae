package policer

import (
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// matcher finds the longest configured prefix containing an address: one
// map lookup per distinct prefix length of the address's family, longest
// first (at most 33 for IPv4, 129 for IPv6; in practice a handful).
type matcher struct {
	byPrefix   map[netip.Prefix]int // prefix → rule index
	len4, len6 []int                // distinct prefix lengths, longest first
}

func (m *matcher) addLength(is4 bool, bits int) {
	l := &m.len6
	if is4 {
		l = &m.len4
	}
	if slices.Contains(*l, bits) {
		return
	}
	*l = append(*l, bits)
	slices.Sort(*l)
	slices.Reverse(*l)
}

// match returns the index of the rule with the longest prefix containing a
// (an unmapped address without zone), or -1.
func (m *matcher) match(a netip.Addr) int {
	lens := m.len6
	if a.Is4() {
		lens = m.len4
	}
	for _, bits := range lens {
		p, err := a.Prefix(bits)
		if err != nil {
			continue
		}
		if i, ok := m.byPrefix[p]; ok {
			return i
		}
	}
	return -1
}

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

// entry is the bucket of one tracked source address, a node of the LRU
// list (indices into sourceTable.ents; -1 ends the list).
type entry struct {
	addr       netip.Addr
	tat        int64
	prev, next int32
}

// sourceTable is the per-source part of a Policer. The per-address buckets
// live in a table of at most maxTracked entries with least-recently-seen
// replacement: the map and the entry slice never grow beyond it, and a
// replacement reuses the slot without allocating.
type sourceTable struct {
	mu         sync.Mutex
	base       time.Time
	m          *matcher
	rules      []limitState
	def        limitState
	hasDefault bool

	maxTracked int
	idx        map[netip.Addr]int32
	ents       []entry
	head, tail int32 // most and least recently seen; -1 when empty

	evictions      uint64 // replaced entries
	lossyEvictions uint64 // replaced entries whose bucket was not full
}

func newSourceTable(c *SourceConfig, m *matcher, now time.Time) *sourceTable {
	t := &sourceTable{base: now, m: m, maxTracked: c.MaxTracked, head: -1, tail: -1}
	for _, r := range c.Rules {
		t.rules = append(t.rules, compileLimit(r.limit(), r.PerAddress))
	}
	if c.Default != nil {
		t.def = compileLimit(*c.Default, true)
		t.hasDefault = true
	}
	if c.usesTable() {
		// Start small; the map and slice grow on demand up to maxTracked.
		n := min(c.MaxTracked, 1024)
		t.idx = make(map[netip.Addr]int32, n)
		t.ents = make([]entry, 0, n)
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
	if i := t.m.match(a); i >= 0 {
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
	e := t.lookup(a, ns)
	return l.take(&e.tat, ns)
}

// lookup returns the entry of a, creating it with a full bucket if needed
// (replacing the least recently seen entry when the table is full), and
// makes it the most recently seen. Called with mu held.
func (t *sourceTable) lookup(a netip.Addr, ns int64) *entry {
	if i, ok := t.idx[a]; ok {
		t.toFront(i)
		return &t.ents[i]
	}
	var i int32
	if len(t.ents) < t.maxTracked {
		i = int32(len(t.ents))
		t.ents = append(t.ents, entry{prev: -1, next: -1})
	} else {
		i = t.tail
		old := &t.ents[i]
		t.evictions++
		if old.tat > ns {
			t.lossyEvictions++
		}
		delete(t.idx, old.addr)
		t.unlink(i)
	}
	t.ents[i] = entry{addr: a, tat: ns, prev: -1, next: -1}
	t.idx[a] = i
	t.pushFront(i)
	return &t.ents[i]
}

func (t *sourceTable) unlink(i int32) {
	e := &t.ents[i]
	if e.prev >= 0 {
		t.ents[e.prev].next = e.next
	} else {
		t.head = e.next
	}
	if e.next >= 0 {
		t.ents[e.next].prev = e.prev
	} else {
		t.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (t *sourceTable) pushFront(i int32) {
	e := &t.ents[i]
	e.prev, e.next = -1, t.head
	if t.head >= 0 {
		t.ents[t.head].prev = i
	}
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
}

func (t *sourceTable) toFront(i int32) {
	if t.head == i {
		return
	}
	t.unlink(i)
	t.pushFront(i)
}

// stats returns the number of tracked addresses and the eviction counts.
func (t *sourceTable) stats() (tracked int, evictions, lossy uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idx), t.evictions, t.lossyEvictions
}
