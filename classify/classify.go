// SPDX-License-Identifier: Apache-2.0

// Package classify assigns HTTP requests to a stage and a request class
// with compiled rules: stages by path prefix, path regular expression,
// method and host; classes by header, cookie, client address and the
// identity of a verified client certificate (ClientCertIdentity).
//
// Client addresses and class headers are only believed from trusted
// proxies. The direct peer (the request's RemoteAddr) is the client unless
// it is a trusted proxy; then X-Forwarded-For is read right to left,
// skipping trusted hops, and the first untrusted address is the client. A
// class header or cookie whose rule requires trust is ignored (the request
// is classified as if it did not carry it) unless the direct peer is a
// trusted proxy; such proxies must remove or overwrite those headers when
// they come from their own clients.
//
// The same trust decides the headers that travel from hop to hop
// (ClassifyHop): a priority header gives the request's class, and with the
// tenant header it is believed only from a trusted proxy.
//
// A compiled Classifier is immutable and safe for concurrent use; its
// request methods do not allocate, but for a client certificate rule
// tried on a certificate whose identity is a URI.
package classify

import (
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// MaxForwardedHops is the number of X-Forwarded-For entries read at most;
// the walk stops there as it does at a malformed entry.
const MaxForwardedHops = 32

// StageRule selects the requests of one stage; every condition that is set
// must hold, and a rule with no condition matches every request.
type StageRule struct {
	// Path, when set, must equal the request path (r.URL.Path): a gRPC
	// method's full name, "/pkg.Service/Method".
	Path string
	// PathPrefix matches request paths (r.URL.Path) that start with it.
	PathPrefix string
	// PathRegex, when non-nil, must match r.URL.Path (unanchored unless the
	// expression anchors itself).
	PathRegex *regexp.Regexp
	// Methods lists the accepted methods, compared case-sensitively
	// ("GET"); empty accepts every method.
	Methods []string
	// Host is compared case-insensitively with the request's host, without
	// its port; empty accepts every host.
	Host string
}

// Match matches a header or a cookie.
type Match struct {
	// Name is the header name (any case) or the cookie name (exact).
	Name string
	// Value is the exact value; empty matches any non-empty value.
	Value string
	// Trusted makes the condition hold only when the direct peer is a
	// trusted proxy; from any other peer the header or cookie is treated as
	// absent.
	Trusted bool
}

// ClassRule gives requests that meet every set condition the class Class.
type ClassRule struct {
	// Class is the class index (0 is the highest priority).
	Class int
	// Header, when set, must match a request header.
	Header *Match
	// Cookie, when set, must match a request cookie.
	Cookie *Match
	// CIDRs, when non-empty, must contain the client address (ClientIP).
	CIDRs []netip.Prefix
	// ClientCert, when set, must match the identity of the request's
	// verified client certificate (ClientCertIdentity).
	ClientCert *CertMatch
}

// CertMatch matches the identity of a verified client certificate.
type CertMatch struct {
	// Value is the exact identity; empty matches any verified
	// certificate.
	Value string
}

// Config is the input of New.
type Config struct {
	// Stages are tried in order; the first match wins.
	Stages []StageRule
	// Rules are tried in order; the first match gives the class.
	Rules []ClassRule
	// DefaultClass is the class of requests no rule matches.
	DefaultClass int
	// TrustedProxies are the peers whose X-Forwarded-For and trusted class
	// headers and cookies are believed.
	TrustedProxies []netip.Prefix
	// Hop says how ClassifyHop reads the headers that travel from hop to
	// hop (nil: it reads none).
	Hop *HopConfig
}

// HopConfig names the headers that carry a request's priority, tenant
// and remaining time from one hop to the next (sluice.PriorityHeader,
// sluice.TenantHeader, sluice.TimeoutHeader by default in the policy),
// and how they are read. The priority and the tenant are believed only
// from trusted proxies, as class headers are; the timeout from any peer,
// since a deadline only shortens the life of the sender's own request.
type HopConfig struct {
	// PriorityHeader, TenantHeader and TimeoutHeader are the header names
	// ("" reads nothing).
	PriorityHeader, TenantHeader, TimeoutHeader string
	// Classes are the class names, highest first, onto which a priority
	// maps (sluice.PriorityClass).
	Classes []string
	// MinTimeout and MaxTimeout bound a timeout (0 ≤ MinTimeout ≤
	// MaxTimeout; MaxTimeout 0 means no upper bound): a larger one is
	// MaxTimeout, a smaller one (negative too) MinTimeout.
	MinTimeout, MaxTimeout time.Duration
}

// HopHeader identifies one of the hop headers.
type HopHeader uint8

// The hop headers, as bits of HopInfo's sets.
const (
	HopPriority HopHeader = 1 << iota
	HopTenant
	HopTimeout
)

// String returns "priority", "tenant" or "timeout".
func (h HopHeader) String() string {
	switch h {
	case HopPriority:
		return "priority"
	case HopTenant:
		return "tenant"
	case HopTimeout:
		return "timeout"
	}
	return "unknown"
}

// HopInfo is what a request's hop headers say, as ClassifyHop read them.
type HopInfo struct {
	// Priority is the priority header's value when it is believed and
	// names a class or a criticality ("" otherwise); Class its class.
	Priority string
	Class    int
	// Tenant is the tenant header's value when it is believed and valid.
	Tenant string
	// Timeout is the timeout header's value, clamped to the bounds, when
	// HasTimeout.
	Timeout    time.Duration
	HasTimeout bool
	// Invalid has the headers that were present but malformed (several
	// lines, a bad value, a priority that names no class): each is treated
	// as absent. Untrusted has the priority and tenant headers sent by a
	// peer that is not a trusted proxy: ignored.
	Invalid, Untrusted HopHeader
}

// Classifier is a compiled Config. It is immutable and safe for concurrent
// use.
type Classifier struct {
	stages  []StageRule
	rules   []rule
	def     int
	trusted []netip.Prefix
	hop     *HopConfig // canonical header names; nil reads none
}

type rule struct {
	class  int
	header *Match
	cookie *Match
	cidrs  []netip.Prefix
	cert   *CertMatch
}

// New compiles cfg. It copies the slices it keeps. A rule without any
// condition, a negative class, an empty header or cookie name or an invalid
// prefix is an error naming the rule.
func New(cfg Config) (*Classifier, error) {
	if cfg.DefaultClass < 0 {
		return nil, fmt.Errorf("classify: default class %d must be ≥ 0", cfg.DefaultClass)
	}
	c := &Classifier{def: cfg.DefaultClass}
	for _, s := range cfg.Stages {
		s.Methods = append([]string(nil), s.Methods...)
		s.Host = strings.ToLower(s.Host)
		if strings.HasPrefix(s.Host, "[") && strings.HasSuffix(s.Host, "]") {
			s.Host = s.Host[1 : len(s.Host)-1]
		}
		c.stages = append(c.stages, s)
	}
	for i, r := range cfg.Rules {
		if r.Class < 0 {
			return nil, fmt.Errorf("classify: rule %d: class %d must be ≥ 0", i, r.Class)
		}
		if r.Header == nil && r.Cookie == nil && len(r.CIDRs) == 0 && r.ClientCert == nil {
			return nil, fmt.Errorf("classify: rule %d has no condition (header, cookie, cidrs or client_cert)", i)
		}
		cr := rule{class: r.Class}
		if r.ClientCert != nil {
			m := *r.ClientCert
			cr.cert = &m
		}
		if r.Header != nil {
			if r.Header.Name == "" {
				return nil, fmt.Errorf("classify: rule %d: empty header name", i)
			}
			m := *r.Header
			m.Name = http.CanonicalHeaderKey(m.Name)
			cr.header = &m
		}
		if r.Cookie != nil {
			if r.Cookie.Name == "" {
				return nil, fmt.Errorf("classify: rule %d: empty cookie name", i)
			}
			m := *r.Cookie
			cr.cookie = &m
		}
		for j, p := range r.CIDRs {
			if !p.IsValid() {
				return nil, fmt.Errorf("classify: rule %d: cidr %d is not a valid prefix", i, j)
			}
			cr.cidrs = append(cr.cidrs, unmapPrefix(p))
		}
		c.rules = append(c.rules, cr)
	}
	for i, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("classify: trusted proxy %d is not a valid prefix", i)
		}
		c.trusted = append(c.trusted, unmapPrefix(p))
	}
	if h := cfg.Hop; h != nil {
		if h.MinTimeout < 0 || (h.MaxTimeout != 0 && h.MaxTimeout < h.MinTimeout) {
			return nil, fmt.Errorf("classify: hop timeout bounds [%v, %v] are invalid", h.MinTimeout, h.MaxTimeout)
		}
		hc := *h
		hc.Classes = append([]string(nil), h.Classes...)
		for _, name := range []*string{&hc.PriorityHeader, &hc.TenantHeader, &hc.TimeoutHeader} {
			if *name != "" {
				*name = http.CanonicalHeaderKey(*name)
			}
		}
		c.hop = &hc
	}
	return c, nil
}

// HeaderNames returns the canonical names of the request headers the
// classifier reads: the hop headers, the headers of class rules, Cookie
// for cookie rules and X-Forwarded-For for address rules. A caller that
// builds a request from another protocol's metadata (gRPC's) needs to
// copy only these.
func (c *Classifier) HeaderNames() []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if h := c.hop; h != nil {
		add(h.PriorityHeader)
		add(h.TenantHeader)
		add(h.TimeoutHeader)
	}
	for _, r := range c.rules {
		if r.header != nil {
			add(r.header.Name)
		}
		if r.cookie != nil {
			add("Cookie")
		}
		if len(r.cidrs) > 0 {
			add("X-Forwarded-For")
		}
	}
	return out
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix (::ffff:10.0.0.0/104) into
// its IPv4 form so that it matches unmapped addresses.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Classify returns the index of the first stage whose rule matches r (-1
// when none does) and r's class. It does not allocate.
func (c *Classifier) Classify(r *http.Request) (stage, class int) {
	return c.Stage(r), c.Class(r)
}

// ClassifyHop is Classify that also reads r's hop headers (Config.Hop):
// a believed priority that names a class gives the class, before the
// class rules are tried. The trust of the peer is decided once, for the
// hop headers and the class rules alike. It does not allocate.
func (c *Classifier) ClassifyHop(r *http.Request) (stage, class int, h HopInfo) {
	stage = c.Stage(r)
	var pi peerInfo
	if c.hop != nil {
		h = c.readHop(r, &pi)
	}
	if h.Priority != "" {
		return stage, h.Class, h
	}
	return stage, c.class(r, &pi), h
}

// readHop reads the hop headers of r: one map lookup each.
func (c *Classifier) readHop(r *http.Request, pi *peerInfo) (h HopInfo) {
	hc := c.hop
	switch v, n := lines(r.Header, hc.PriorityHeader); {
	case n == 0:
	case !c.trustedPeer(r, pi):
		h.Untrusted |= HopPriority
	case n > 1 || v == "":
		h.Invalid |= HopPriority
	default:
		if cl, known := sluice.PriorityClass(v, hc.Classes); known && sluice.ValidPriority(v) {
			h.Priority, h.Class = v, cl
		} else {
			h.Invalid |= HopPriority
		}
	}
	switch v, n := lines(r.Header, hc.TenantHeader); {
	case n == 0:
	case !c.trustedPeer(r, pi):
		h.Untrusted |= HopTenant
	case n == 1 && sluice.ValidTenant(v):
		h.Tenant = v
	default:
		h.Invalid |= HopTenant
	}
	switch v, n := lines(r.Header, hc.TimeoutHeader); {
	case n == 0:
	case n > 1:
		h.Invalid |= HopTimeout
	default:
		if d, valid := sluice.ParseTimeout(v); valid {
			h.Timeout, h.HasTimeout = clampDuration(d, hc.MinTimeout, hc.MaxTimeout), true
		} else {
			h.Invalid |= HopTimeout
		}
	}
	return h
}

// lines returns the first value of header name and its number of lines
// (0 for an empty name).
func lines(h http.Header, name string) (string, int) {
	if name == "" {
		return "", 0
	}
	v := h[name]
	if len(v) == 0 {
		return "", 0
	}
	return v[0], len(v)
}

// clampDuration limits d to [lo, hi] (hi 0: no upper bound).
func clampDuration(d, lo, hi time.Duration) time.Duration {
	if hi > 0 && d > hi {
		return hi
	}
	return max(d, lo)
}

// Stage returns the index of the first stage whose rule matches r, or -1.
func (c *Classifier) Stage(r *http.Request) int {
	for i := range c.stages {
		if c.stages[i].matches(r) {
			return i
		}
	}
	return -1
}

func (s *StageRule) matches(r *http.Request) bool {
	path := r.URL.Path
	if s.Path != "" && path != s.Path {
		return false
	}
	if s.PathPrefix != "" && !strings.HasPrefix(path, s.PathPrefix) {
		return false
	}
	if len(s.Methods) > 0 {
		found := false
		for _, m := range s.Methods {
			if m == r.Method {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if s.Host != "" && !strings.EqualFold(HostName(r.Host), s.Host) {
		return false
	}
	if s.PathRegex != nil && !s.PathRegex.MatchString(path) {
		return false
	}
	return true
}

// HostName returns host without its port and without the brackets of an
// IPv6 literal ("[::1]:80" → "::1", "example.com:8080" → "example.com").
func HostName(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			return host[1:i]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host, ':') == i {
		return host[:i]
	}
	return host
}

// peerInfo caches what Class needs about the peer across rules.
type peerInfo struct {
	done    bool
	trusted bool
	peer    netip.Addr
	client  netip.Addr
	haveCl  bool
}

// Class returns r's class: that of the first rule that matches, or the
// default class. It does not allocate.
func (c *Classifier) Class(r *http.Request) int {
	var pi peerInfo
	return c.class(r, &pi)
}

// class is Class with what is known of the peer so far.
func (c *Classifier) class(r *http.Request, pi *peerInfo) int {
	for i := range c.rules {
		if c.matchRule(&c.rules[i], r, pi) {
			return c.rules[i].class
		}
	}
	return c.def
}

func (c *Classifier) peer(r *http.Request, pi *peerInfo) {
	if !pi.done {
		pi.done = true
		pi.peer, _ = ParseRemoteAddr(r.RemoteAddr)
		pi.trusted = c.Trusted(pi.peer)
	}
}

// trustedPeer reports whether r's peer is a trusted proxy, deciding it
// once per request.
func (c *Classifier) trustedPeer(r *http.Request, pi *peerInfo) bool {
	c.peer(r, pi)
	return pi.trusted
}

func (c *Classifier) matchRule(cr *rule, r *http.Request, pi *peerInfo) bool {
	if m := cr.header; m != nil {
		if m.Trusted {
			if c.peer(r, pi); !pi.trusted {
				return false
			}
		}
		if !headerMatches(r.Header[m.Name], m.Value) {
			return false
		}
	}
	if m := cr.cookie; m != nil {
		if m.Trusted {
			if c.peer(r, pi); !pi.trusted {
				return false
			}
		}
		v, ok := CookieValue(r.Header, m.Name)
		if !ok || (m.Value == "" && v == "") || (m.Value != "" && v != m.Value) {
			return false
		}
	}
	if len(cr.cidrs) > 0 {
		if !pi.haveCl {
			c.peer(r, pi)
			pi.client = c.clientFrom(pi.peer, pi.trusted, r.Header)
			pi.haveCl = true
		}
		if !pi.client.IsValid() {
			return false
		}
		in := false
		for _, p := range cr.cidrs {
			if p.Contains(pi.client) {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	if m := cr.cert; m != nil {
		id := ClientCertIdentity(r)
		if id == "" || (m.Value != "" && id != m.Value) {
			return false
		}
	}
	return true
}

func headerMatches(values []string, want string) bool {
	for _, v := range values {
		if (want == "" && v != "") || (want != "" && v == want) {
			return true
		}
	}
	return false
}

// Trusted reports whether a is within a trusted proxy prefix. The zero
// Addr is never trusted.
func (c *Classifier) Trusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP returns r's client address: the direct peer, or, when the peer
// is a trusted proxy, the first untrusted address of X-Forwarded-For read
// right to left (see ClientFrom). It returns the zero Addr when RemoteAddr
// holds no IP address (a Unix socket, a test request without one). It does
// not allocate for IPv4 and zone-less IPv6 addresses.
func (c *Classifier) ClientIP(r *http.Request) netip.Addr {
	peer, _ := ParseRemoteAddr(r.RemoteAddr)
	return c.clientFrom(peer, c.Trusted(peer), r.Header)
}

// PeerTrusted reports whether r's direct peer is a trusted proxy.
func (c *Classifier) PeerTrusted(r *http.Request) bool {
	peer, _ := ParseRemoteAddr(r.RemoteAddr)
	return c.Trusted(peer)
}

func (c *Classifier) clientFrom(peer netip.Addr, trusted bool, h http.Header) netip.Addr {
	if !trusted {
		return peer
	}
	return ClientFrom(peer, h["X-Forwarded-For"], c.Trusted)
}

// ClientFrom walks the X-Forwarded-For header values xff (in the order
// received; several header lines are one list) right to left from the
// direct peer: while the current address is trusted, the next entry to
// the left is the address that sent the request to it. The first
// untrusted address is the client. If every address is trusted, the
// leftmost one is the client.
//
// The walk stops at the first malformed entry (not an IPv4 or IPv6
// address, optionally with a port or in brackets), or after
// MaxForwardedHops entries, and then returns the last address reached,
// which is trusted: nothing to the left of an entry a trusted proxy could
// not have written is believed. Empty list elements are skipped. Addresses
// are returned unmapped (::ffff:1.2.3.4 → 1.2.3.4) and without zone.
func ClientFrom(peer netip.Addr, xff []string, trusted func(netip.Addr) bool) netip.Addr {
	if !trusted(peer) {
		return peer
	}
	client := peer
	hops := 0
	for i := len(xff) - 1; i >= 0; i-- {
		v := xff[i]
		for end := len(v); end >= 0; {
			comma := strings.LastIndexByte(v[:end], ',')
			entry := trimOWS(v[comma+1 : end])
			end = comma
			if entry == "" {
				continue
			}
			hops++
			a, ok := ParseForwarded(entry)
			if !ok || hops > MaxForwardedHops {
				return client
			}
			if !trusted(a) {
				return a
			}
			client = a
		}
	}
	return client
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// ParseForwarded parses one X-Forwarded-For entry: an IPv4 or IPv6
// address, optionally with a port ("1.2.3.4:5678", "[2001:db8::1]:443")
// or in brackets ("[2001:db8::1]"). The address is returned unmapped and
// without zone.
func ParseForwarded(s string) (netip.Addr, bool) {
	var a netip.Addr
	var err error
	switch {
	case strings.HasPrefix(s, "["):
		if strings.HasSuffix(s, "]") {
			a, err = netip.ParseAddr(s[1 : len(s)-1])
			if err == nil && !a.Is6() {
				return netip.Addr{}, false
			}
		} else {
			var ap netip.AddrPort
			ap, err = netip.ParseAddrPort(s)
			a = ap.Addr()
		}
	case strings.Count(s, ":") == 1:
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil || !a.IsValid() {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// ParseRemoteAddr parses an http.Request's RemoteAddr ("ip:port", or a
// bare IP) into an unmapped, zone-less address.
func ParseRemoteAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// CookieValue returns the value of the first cookie called name in h's
// Cookie lines, without surrounding double quotes. Unlike
// http.Request.Cookie it does not allocate and does not validate other
// cookies.
func CookieValue(h http.Header, name string) (string, bool) {
	for _, line := range h["Cookie"] {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = trimOWS(part)
			eq := strings.IndexByte(part, '=')
			if eq < 0 || part[:eq] != name {
				continue
			}
			v := part[eq+1:]
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}
