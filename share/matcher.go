// SPDX-License-Identifier: Apache-2.0

package share

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"sync"

	"github.com/sluicehq/sluice/internal/lru"
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

// addrCache is the address → client cache: a bounded LRU map of 16-byte
// addresses (pointer-free, so the garbage collector has nothing in it to
// scan), under its own lock.
type addrCache struct {
	mu sync.Mutex
	m  *lru.Map[[16]byte, ClientID]
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
	if cacheSize > 0 && cc.prefixes.Len() > 0 {
		m.cache = &addrCache{m: lru.New[[16]byte, ClientID](cacheSize, 0)}
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
	if !a.IsValid() || m.cc.prefixes.Len() == 0 {
		return m.others
	}
	a = a.Unmap().WithZone("")
	if m.cache == nil {
		return m.walk(a)
	}
	k := a.As16() // IPv4 as ::ffff:a.b.c.d, which matches as IPv4 anyway
	m.cache.mu.Lock()
	if c := m.cache.m.Get(k); c != nil {
		v := *c
		m.cache.mu.Unlock()
		return v
	}
	m.cache.mu.Unlock()
	c := m.walk(a) // outside the lock; another goroutine may cache it meanwhile
	m.cache.mu.Lock()
	m.cache.m.Put(k, c)
	m.cache.mu.Unlock()
	return c
}

// walk finds the longest configured prefix containing a.
func (m *Matcher) walk(a netip.Addr) ClientID {
	if c, ok := m.cc.prefixes.Match(a); ok {
		return c
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
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	return m.cache.m.Len()
}

func canonicalHeader(s string) string { return textproto.CanonicalMIMEHeaderKey(s) }
