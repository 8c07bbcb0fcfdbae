package share

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"sync"
)

// Identity is what a request says about its client.
type Identity struct {
	// Addr is the peer's address (the TCP source). The zero Addr matches
	// no prefix.
	Addr netip.Addr
	// TrustedPeer says whether the peer may name the client with the
	// client header; the caller decides (for example, the peer is one of
	// the configured front proxies). Header is ignored when false.
	TrustedPeer bool
	// Header is the value of Config.ClientHeader, "" when absent.
	Header string
	// APIKey is the value of Config.APIKeyHeader, "" when absent.
	APIKey string
}

// Matcher maps a request identity to a configured client: by API key
// first, then by the client header if the peer is trusted, then by the
// peer address (the longest matching prefix wins). Anything else, an
// unknown key or header value included, belongs to others.
//
// API keys and header values are looked up in maps built from the
// configuration, so unknown values are never stored and cannot grow
// memory. Address lookups go through a bounded LRU cache of
// address→client results (Config.CacheSize entries, default 65536, about
// 120 bytes each under churn, so ≈ 7.4 MB at the default): a million
// distinct source addresses leave at most CacheSize entries behind.
//
// A Matcher is safe for concurrent use.
type Matcher struct {
	cc     *compiled
	others ClientID
	cache  *addrCache // nil: no cache
}

// NewMatcher validates cfg and returns its matcher. Shares.Matcher returns
// the one built by New; use NewMatcher when only identification is needed.
func NewMatcher(cfg Config) (*Matcher, error) {
	cc, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	return newMatcher(cc, cfg.CacheSize), nil
}

func newMatcher(cc *compiled, cacheSize int) *Matcher {
	m := &Matcher{cc: cc, others: ClientID(len(cc.names) - 1)}
	if cacheSize > 0 && len(cc.prefixes) > 0 {
		m.cache = newAddrCache(cacheSize)
	}
	return m
}

// Others returns the ClientID of others.
func (m *Matcher) Others() ClientID { return m.others }

// Match returns the client of id.
func (m *Matcher) Match(id Identity) ClientID {
	if id.APIKey != "" {
		if c, ok := m.cc.apiKeys[id.APIKey]; ok {
			return c
		}
	}
	if id.TrustedPeer && id.Header != "" {
		if c, ok := m.cc.headers[id.Header]; ok {
			return c
		}
	}
	return m.MatchAddr(id.Addr)
}

// MatchAddr returns the client whose longest prefix contains a, or others.
// An IPv4-mapped IPv6 address matches as IPv4; a zone is ignored.
func (m *Matcher) MatchAddr(a netip.Addr) ClientID {
	if !a.IsValid() || len(m.cc.prefixes) == 0 {
		return m.others
	}
	a = a.Unmap().WithZone("")
	if m.cache == nil {
		return m.walk(a)
	}
	k := a.As16() // IPv4 as ::ffff:a.b.c.d, which matches as IPv4 anyway
	if c, ok := m.cache.get(k); ok {
		return c
	}
	c := m.walk(a)
	m.cache.put(k, c)
	return c
}

// walk finds the longest configured prefix containing a.
func (m *Matcher) walk(a netip.Addr) ClientID {
	lengths := m.cc.lengths6
	if a.Is4() {
		lengths = m.cc.lengths4
	}
	for _, l := range lengths {
		p, err := a.Prefix(l)
		if err != nil {
			continue
		}
		if c, ok := m.cc.prefixes[p]; ok {
			return c
		}
	}
	return m.others
}

// MatchRequest returns the client of r: the API key and client headers
// named in the configuration and the address in r.RemoteAddr ("ip:port" or
// a bare ip). trustedPeer says whether the client header may be believed.
func (m *Matcher) MatchRequest(r *http.Request, trustedPeer bool) ClientID {
	return m.Match(m.Identity(r, trustedPeer))
}

// Identity extracts the identity of r (see MatchRequest).
func (m *Matcher) Identity(r *http.Request, trustedPeer bool) Identity {
	id := Identity{TrustedPeer: trustedPeer}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		id.Addr = ap.Addr()
	} else if a, err := netip.ParseAddr(r.RemoteAddr); err == nil {
		id.Addr = a
	}
	if v := r.Header[m.cc.apiKeyH]; len(v) > 0 {
		id.APIKey = v[0]
	}
	if trustedPeer {
		if v := r.Header[m.cc.clientH]; len(v) > 0 {
			id.Header = v[0]
		}
	}
	return id
}

// CacheLen returns the number of entries in the address cache.
func (m *Matcher) CacheLen() int {
	if m.cache == nil {
		return 0
	}
	return m.cache.len()
}

func canonicalHeader(s string) string { return textproto.CanonicalMIMEHeaderKey(s) }

// addrCache is a fixed-capacity LRU map from a 16-byte address to client.
// Entries live in one slice (grown up to the capacity, then reused) linked
// into a recency list by index, so a hit or an eviction allocates nothing,
// and nothing in it holds a pointer for the garbage collector to scan.
type addrCache struct {
	mu         sync.Mutex
	capacity   int
	index      map[[16]byte]int32
	ents       []cacheEntry
	head, tail int32 // most and least recently used; -1 when empty
}

type cacheEntry struct {
	key        [16]byte
	val        ClientID
	prev, next int32
}

func newAddrCache(capacity int) *addrCache {
	return &addrCache{capacity: capacity, index: make(map[[16]byte]int32), head: -1, tail: -1}
}

func (c *addrCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}

func (c *addrCache) get(k [16]byte) (ClientID, bool) {
	c.mu.Lock()
	i, ok := c.index[k]
	if !ok {
		c.mu.Unlock()
		return 0, false
	}
	c.toFront(i)
	v := c.ents[i].val
	c.mu.Unlock()
	return v, true
}

func (c *addrCache) put(k [16]byte, v ClientID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[k]; ok { // another goroutine inserted it meanwhile
		c.ents[i].val = v
		c.toFront(i)
		return
	}
	var i int32
	if len(c.ents) < c.capacity {
		i = int32(len(c.ents))
		c.ents = append(c.ents, cacheEntry{prev: -1, next: -1})
	} else { // evict the least recently used entry and reuse its slot
		i = c.tail
		c.unlink(i)
		delete(c.index, c.ents[i].key)
	}
	c.ents[i].key, c.ents[i].val = k, v
	c.index[k] = i
	c.pushFront(i)
}

func (c *addrCache) unlink(i int32) {
	e := &c.ents[i]
	if e.prev >= 0 {
		c.ents[e.prev].next = e.next
	} else {
		c.head = e.next
	}
	if e.next >= 0 {
		c.ents[e.next].prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (c *addrCache) pushFront(i int32) {
	e := &c.ents[i]
	e.prev, e.next = -1, c.head
	if c.head >= 0 {
		c.ents[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

func (c *addrCache) toFront(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
}
