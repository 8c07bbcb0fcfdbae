// SPDX-License-Identifier: Apache-2.0

package classify

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"testing"

	"github.com/sluicehq/sluice/internal/netprefix"
)

func mustPrefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		p, err := netprefix.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func req(method, target, remote string, hdr map[string][]string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = remote
	for k, v := range hdr {
		r.Header[http.CanonicalHeaderKey(k)] = v
	}
	return r
}

func TestStageMatching(t *testing.T) {
	c, err := New(Config{Stages: []StageRule{
		{PathPrefix: "/api/", Methods: []string{"POST", "PUT"}},
		{PathRegex: regexp.MustCompile(`^/img/[0-9]+\.png$`)},
		{Host: "Static.Example.com"},
		{Host: "[::1]"},
		{PathPrefix: "/api/"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, target, host string
		want                 int
	}{
		{"POST", "/api/x", "a", 0},
		{"GET", "/api/x", "a", 4},
		{"post", "/api/x", "a", 4}, // methods are case-sensitive
		{"GET", "/img/12.png", "a", 1},
		{"GET", "/img/12.png.bak", "a", -1},
		{"GET", "/other", "static.example.COM:8443", 2},
		{"GET", "/other", "static.example.com", 2},
		{"GET", "/other", "[::1]:80", 3},
		{"GET", "/other", "example.com", -1},
		{"GET", "/apix", "a", -1},
	} {
		r := req(tc.method, tc.target, "192.0.2.1:1", nil)
		r.Host = tc.host
		if got := c.Stage(r); got != tc.want {
			t.Errorf("%s %s host %s: stage %d, want %d", tc.method, tc.target, tc.host, got, tc.want)
		}
	}
}

func TestHostName(t *testing.T) {
	for in, want := range map[string]string{
		"example.com": "example.com", "example.com:80": "example.com", "[::1]:8080": "::1",
		"[::1]": "::1", "::1": "::1", "10.0.0.1:3": "10.0.0.1", "": "", "[bad": "[bad",
	} {
		if got := HostName(in); got != want {
			t.Errorf("HostName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The trusted proxy is 10.0.0.0/8; class "gold" (0) comes from a trusted
// header, "partner" (1) from a cookie any client may send, "internal" (2)
// from the client address 192.168.0.0/16, default class 3.
func classifier(t testing.TB) *Classifier {
	c, err := New(Config{
		Rules: []ClassRule{
			{Class: 0, Header: &Match{Name: "x-priority", Value: "gold", Trusted: true}},
			{Class: 1, Cookie: &Match{Name: "plan", Value: "partner"}},
			{Class: 2, CIDRs: mustPrefixes(t, "192.168.0.0/16")},
			{Class: 0, Cookie: &Match{Name: "vip", Trusted: true}},
		},
		DefaultClass:   3,
		TrustedProxies: mustPrefixes(t, "10.0.0.0/8", "2001:db8::/32"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClassSpoofing(t *testing.T) {
	c := classifier(t)
	for _, tc := range []struct {
		name   string
		remote string
		hdr    map[string][]string
		want   int
	}{
		{"trusted header from trusted proxy", "10.1.2.3:5000", map[string][]string{"X-Priority": {"gold"}}, 0},
		{"spoofed header from untrusted peer", "203.0.113.9:5000", map[string][]string{"X-Priority": {"gold"}}, 3},
		{"spoofed header, untrusted peer, XFF naming a trusted hop", "203.0.113.9:5000",
			map[string][]string{"X-Priority": {"gold"}, "X-Forwarded-For": {"10.0.0.1"}}, 3},
		{"wrong value", "10.1.2.3:5000", map[string][]string{"X-Priority": {"silver"}}, 3},
		{"any-trust cookie from anyone", "203.0.113.9:1", map[string][]string{"Cookie": {"a=b; plan=partner"}}, 1},
		{"quoted cookie", "203.0.113.9:1", map[string][]string{"Cookie": {`plan="partner"`}}, 1},
		{"trusted cookie from untrusted peer", "203.0.113.9:1", map[string][]string{"Cookie": {"vip=1"}}, 3},
		{"trusted cookie from trusted peer", "10.0.0.2:1", map[string][]string{"Cookie": {"vip=1"}}, 0},
		{"direct internal client", "192.168.1.1:1", nil, 2},
		{"internal client through trusted proxy", "10.0.0.2:1", map[string][]string{"X-Forwarded-For": {"192.168.4.4"}}, 2},
		{"XFF from an untrusted peer is ignored", "203.0.113.9:1", map[string][]string{"X-Forwarded-For": {"192.168.4.4"}}, 3},
		{"client spoofs XFF behind a trusted proxy", "10.0.0.2:1",
			map[string][]string{"X-Forwarded-For": {"192.168.4.4, 203.0.113.9"}}, 3},
		{"IPv6 trusted proxy, IPv4-mapped client", "[2001:db8::7]:443",
			map[string][]string{"X-Forwarded-For": {"::ffff:192.168.0.9"}}, 2},
		{"no remote address", "", map[string][]string{"X-Priority": {"gold"}}, 3},
	} {
		r := req("GET", "/", tc.remote, tc.hdr)
		if got := c.Class(r); got != tc.want {
			t.Errorf("%s: class %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestClientFrom(t *testing.T) {
	c := classifier(t)
	for _, tc := range []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"untrusted peer", "203.0.113.1:9", []string{"1.1.1.1"}, "203.0.113.1"},
		{"trusted peer, one hop", "10.0.0.1:9", []string{"1.1.1.1"}, "1.1.1.1"},
		{"skips trusted hops right to left", "10.0.0.1:9", []string{"6.6.6.6, 1.1.1.1, 10.9.9.9"}, "1.1.1.1"},
		{"several header lines form one list", "10.0.0.1:9", []string{"6.6.6.6, 1.1.1.1", "10.2.2.2"}, "1.1.1.1"},
		{"all trusted: leftmost", "10.0.0.1:9", []string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3"},
		{"no XFF: the peer", "10.0.0.1:9", nil, "10.0.0.1"},
		{"malformed entry stops at last trusted", "10.0.0.1:9", []string{"1.1.1.1, garbage, 10.2.2.2"}, "10.2.2.2"},
		{"malformed rightmost: the peer", "10.0.0.1:9", []string{"1.1.1.1, unknown"}, "10.0.0.1"},
		{"empty elements skipped", "10.0.0.1:9", []string{"1.1.1.1 , ,"}, "1.1.1.1"},
		{"ports and brackets", "10.0.0.1:9", []string{"[2001:db9::1]:443"}, "2001:db9::1"},
		{"IPv4 with port", "10.0.0.1:9", []string{"1.2.3.4:80"}, "1.2.3.4"},
		{"zone stripped", "10.0.0.1:9", []string{"fe80::1%eth0"}, "fe80::1"},
		{"bracketed IPv4 is malformed", "10.0.0.1:9", []string{"[1.2.3.4]"}, "10.0.0.1"},
		{"mapped peer", "[::ffff:10.0.0.1]:9", []string{"1.1.1.1"}, "1.1.1.1"},
	} {
		r := req("GET", "/", tc.remote, map[string][]string{"X-Forwarded-For": tc.xff})
		if tc.xff == nil {
			r.Header.Del("X-Forwarded-For")
		}
		if got := c.ClientIP(r); got.String() != tc.want {
			t.Errorf("%s: client %v, want %s", tc.name, got, tc.want)
		}
	}
	// The walk is bounded.
	long := ""
	for i := 0; i < 2*MaxForwardedHops; i++ {
		long += "10.0.0.5, "
	}
	r := req("GET", "/", "10.0.0.1:9", map[string][]string{"X-Forwarded-For": {"1.1.1.1, " + long}})
	if got := c.ClientIP(r); got.String() != "10.0.0.5" {
		t.Errorf("bounded walk: %v", got)
	}
}

func TestCookieValue(t *testing.T) {
	h := http.Header{"Cookie": {"a=1; b=", ` c = 3 ;d="q"`, "a=2"}}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{{"a", "1", true}, {"b", "", true}, {"c", "", false}, {"d", "q", true}, {"e", "", false}} {
		v, ok := CookieValue(h, tc.name)
		if v != tc.want || ok != tc.ok {
			t.Errorf("%s: %q %v", tc.name, v, ok)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no condition":     {Rules: []ClassRule{{Class: 1}}},
		"negative class":   {Rules: []ClassRule{{Class: -1, CIDRs: mustPrefixes(t, "1.2.3.4")}}},
		"empty header":     {Rules: []ClassRule{{Header: &Match{}}}},
		"empty cookie":     {Rules: []ClassRule{{Cookie: &Match{}}}},
		"invalid prefix":   {Rules: []ClassRule{{CIDRs: []netip.Prefix{{}}}}},
		"invalid trusted":  {TrustedProxies: []netip.Prefix{{}}},
		"negative default": {DefaultClass: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	c, err := New(Config{
		Stages: []StageRule{{PathPrefix: "/static/"}, {PathRegex: regexp.MustCompile(`^/api/v[0-9]+/`), Methods: []string{"GET"}}},
		Rules: []ClassRule{
			{Class: 0, Header: &Match{Name: "X-Priority", Value: "gold", Trusted: true}},
			{Class: 1, Cookie: &Match{Name: "plan", Value: "partner"}},
			{Class: 1, CIDRs: mustPrefixes(t, "192.168.0.0/16")},
		},
		DefaultClass:   2,
		TrustedProxies: mustPrefixes(t, "10.0.0.0/8"),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := req("GET", "/api/v2/items", "10.0.0.1:4000", map[string][]string{
		"X-Forwarded-For": {"198.51.100.1, 10.2.2.2"}, "Cookie": {"session=abc; plan=free"}, "X-Priority": {"bronze"}})
	st, cl := c.Classify(r)
	if st != 1 || cl != 2 {
		t.Fatalf("classify = %d, %d", st, cl)
	}
	if raceEnabled {
		// The race detector drops sync.Pool entries at random, so the
		// regexp matcher pool allocates there; the plain run checks.
		t.Skip("allocation counts are not meaningful under -race")
	}
	if n := testing.AllocsPerRun(100, func() { c.Classify(r); c.ClientIP(r) }); n != 0 {
		t.Fatalf("Classify allocates %v times", n)
	}
}

func BenchmarkClassify(b *testing.B) {
	c, _ := New(Config{
		Stages: []StageRule{{PathPrefix: "/static/"}, {PathRegex: regexp.MustCompile(`^/api/v[0-9]+/`)}},
		Rules: []ClassRule{
			{Class: 0, Header: &Match{Name: "X-Priority", Value: "gold", Trusted: true}},
			{Class: 1, CIDRs: mustPrefixes(b, "192.168.0.0/16")},
		},
		DefaultClass: 2, TrustedProxies: mustPrefixes(b, "10.0.0.0/8"),
	})
	r := req("GET", "/api/v2/items", "10.0.0.1:4000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}})
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(r)
	}
}

// FuzzXFF checks that the X-Forwarded-For walk never panics and returns
// either the peer, an address of the list, or the zero Addr.
func FuzzXFF(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "1.1.1.1, 10.0.0.1", "[::1]:80, garbage", ",,,", "[", "]", "[]:",
		"1.2.3.4:", "::ffff:1.2.3.4", "fe80::1%", "\t 1.2.3.4 \t", "1.2.3.4,5.6.7.8, 10.1.1.1 ,"} {
		f.Add("10.0.0.1:80", s)
	}
	f.Add("[2001:db8::1]:1", "2001:db8::2, 1.2.3.4")
	f.Add("garbage", "1.2.3.4")
	trusted := mustPrefixes(f, "10.0.0.0/8", "2001:db8::/32")
	c, err := New(Config{TrustedProxies: trusted, Rules: []ClassRule{{Class: 0, CIDRs: mustPrefixes(f, "1.0.0.0/8")}}, DefaultClass: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {xff}}}
		got := c.ClientIP(r)
		_ = c.Class(r)
		peer, _ := ParseRemoteAddr(remote)
		if got == peer {
			return
		}
		if !c.Trusted(peer) {
			t.Fatalf("untrusted peer %v but client %v from XFF %q", peer, got, xff)
		}
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("client %v is not a clean address", got)
		}
	})
}
