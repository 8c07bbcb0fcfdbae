// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/proxy/internal/proxytest"
)

// The trusted load balancer is 127.0.0.1; direct clients connect from
// 127.0.0.2 (all of 127.0.0.0/8 is loopback).
const (
	ppBalancer = "127.0.0.1"
	ppDirect   = "127.0.0.2"
)

// ppV2 is a version 2 PROXY header for a TCP client src (IPv4 or IPv6).
func ppV2(src string, port uint16) []byte {
	a := netip.MustParseAddr(src)
	b := []byte("\r\n\r\n\x00\r\nQUIT\n\x21")
	if a.Is4() {
		b = append(b, 0x11, 0, 12)
		s, d := a.As4(), [4]byte{192, 0, 2, 1}
		b = append(append(b, s[:]...), d[:]...)
	} else {
		b = append(b, 0x21, 0, 36)
		s, d := a.As16(), netip.MustParseAddr("2001:db8::1").As16()
		b = append(append(b, s[:]...), d[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, port)
	return binary.BigEndian.AppendUint16(b, 443)
}

func ppV1(src string, port int) []byte {
	fam := "TCP4"
	if netip.MustParseAddr(src).Is6() {
		fam = "TCP6"
	}
	dst := map[string]string{"TCP4": "192.0.2.1", "TCP6": "2001:db8::1"}[fam]
	return fmt.Appendf(nil, "PROXY %s %s %s %d 443\r\n", fam, src, dst, port)
}

// ppGet sends header, then a GET with the extra header lines, on a new
// connection from from, and returns the answer (nil if the proxy closed
// the connection without one).
func ppGet(t *testing.T, from, addr string, header []byte, extra string) *http.Response {
	t.Helper()
	c := proxytest.DialFrom(t, from, addr)
	req := "GET /x HTTP/1.1\r\nHost: example.test\r\n" + extra + "Connection: close\r\n\r\n"
	if _, err := c.Write(append(append([]byte(nil), header...), req...)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("no answer and no close: %v", err)
		}
		return nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

const ppConfig = `listeners:
  - addr: 127.0.0.1:0
    proxy_protocol: {trusted: [` + ppBalancer + `/32]}
admin:
  addr: 127.0.0.1:0
backends:
  servers:
    - url: BACKEND
classes:
  order: [vip, rest]
  default: rest
  trusted_proxies: [10.9.0.0/16]
  rules: [{class: vip, cidrs: [203.0.113.0/24]}]
stages:
  - name: all
    match: {path_prefix: /}
    controller: none
shares:
  total_bandwidth: 100MB
  ratelimit_headers: true
  clients: [{name: vip-net, share: 50, cidrs: [203.0.113.0/24]}]
`

// The address a trusted balancer sends is the client's everywhere a
// client address counts: the class rules' cidrs, the client share,
// X-Forwarded-For, and whether the client is itself a trusted proxy
// whose X-Forwarded-For is read (the tenant: TestProxyProtocolTenants).
func TestProxyProtocolClientAddress(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, withBackend(ppConfig, be.URL))
	for _, c := range []struct {
		name              string
		from              string
		header            []byte
		extra             string
		xff, class, share string
	}{
		{"v1 ipv4", ppBalancer, ppV1("203.0.113.7", 50000), "", "203.0.113.7", "vip", "vip-net"},
		{"v2 ipv4", ppBalancer, ppV2("203.0.113.8", 50001), "", "203.0.113.8", "vip", "vip-net"},
		{"v1 ipv6", ppBalancer, ppV1("2001:db8::7", 50002), "", "2001:db8::7", "", "others"},
		{"v2 ipv6", ppBalancer, ppV2("2001:db8::8", 50003), "", "2001:db8::8", "", "others"},
		// The believed client is a trusted proxy: its X-Forwarded-For
		// names the client.
		{"trusted proxy behind", ppBalancer, ppV2("10.9.1.1", 50004), "X-Forwarded-For: 203.0.113.50\r\n",
			"203.0.113.50, 10.9.1.1", "vip", "vip-net"},
		// It is not: its X-Forwarded-For is not believed.
		{"spoofed forwarded-for", ppBalancer, ppV1("198.51.100.1", 50005), "X-Forwarded-For: 203.0.113.5\r\n",
			"198.51.100.1", "", "others"},
		// A direct client, not through the balancer, keeps its socket's
		// address (health checkers, clients inside the network).
		{"direct client", ppDirect, nil, "", ppDirect, "", "others"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := ppGet(t, c.from, p.addr, c.header, c.extra)
			if resp == nil || resp.StatusCode != 200 {
				t.Fatalf("answer %v", resp)
			}
			h := resp.Header
			if got := h.Get("X-Got-X-Forwarded-For"); got != c.xff {
				t.Errorf("X-Forwarded-For %q, want %q", got, c.xff)
			}
			if got := h.Get("X-Got-X-Sluice-Priority"); got != c.class {
				t.Errorf("class sent on %q, want %q", got, c.class)
			}
			if got := h.Get("RateLimit-Policy"); !strings.HasPrefix(got, `"`+c.share+`"`) {
				t.Errorf("client share %q, want %q", got, c.share)
			}
		})
	}
	if body := p.metricsText(t); !strings.Contains(body, `proxy_proxy_protocol_rejected_total{reason="untrusted"} 0`) {
		t.Errorf("the refusals are not exported from zero:\n%s", grepLines(body, "proxy_proxy_protocol"))
	}
}

// A stage's tenants keyed by client are the believed addresses: two
// clients behind the one balancer queue as two tenants.
func TestProxyProtocolTenants(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	p := startProxy(t, withBackend(`listeners:
  - addr: 127.0.0.1:0
    proxy_protocol: {trusted: [`+ppBalancer+`]}
admin:
  addr: 127.0.0.1:0
backends:
  servers:
    - url: BACKEND
stages:
  - name: all
    match: {path_prefix: /}
    controller: static-concurrency
    params: {limit: 1}
    queue: {max: 10, timeout: 20s}
    tenants: {fair: true, key: client}
`, be.URL))
	send := func(header []byte, path string) {
		c := proxytest.DialFrom(t, ppBalancer, p.addr)
		_, err := c.Write(append(header, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"...))
		must(t, err)
	}
	send(ppV1("203.0.113.1", 1), "/hold")
	limiter := func() StateDoc { return p.state(t) }
	eventually(t, "the first request in flight", func() bool {
		st := limiter().Stages[0].InFlightLimited
		return st != nil && st.InFlight == 1
	})
	send(ppV1("198.51.100.1", 1), "/a")
	send(ppV2("198.51.100.2", 2), "/b")
	send(ppV1("198.51.100.1", 3), "/c")
	eventually(t, "three queued requests", func() bool { return limiter().Stages[0].InFlightLimited.Queued == 3 })
	if n := limiter().Stages[0].TenantsQueued; n != 2 {
		t.Fatalf("%d tenants queued, want 2 (198.51.100.1 and 198.51.100.2)", n)
	}
}

// Refusals close the connection without an answer and are counted by
// reason; a slow header is closed after header_timeout.
func TestProxyProtocolRefusals(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, withBackend(strings.Replace(ppConfig, "/32]}", "/32], header_timeout: 50ms}", 1), be.URL))
	for _, c := range []struct {
		name   string
		from   string
		header []byte
	}{
		{"untrusted v1", ppDirect, ppV1("203.0.113.7", 1)},
		{"untrusted v2", ppDirect, ppV2("203.0.113.7", 1)},
		{"missing", ppBalancer, nil},
		{"malformed", ppBalancer, []byte("PROXY TCP4 203.0.113.7 192.0.2.1 99999 443\r\n")},
		{"oversized", ppBalancer, []byte("PROXY TCP4 " + strings.Repeat("1", 150) + "\r\n")},
	} {
		if resp := ppGet(t, c.from, p.addr, c.header, ""); resp != nil {
			t.Errorf("%s: answered %d, want the connection closed", c.name, resp.StatusCode)
		}
	}
	// Truncated: the connection ends inside the header.
	tc := proxytest.DialFrom(t, ppBalancer, p.addr)
	_, _ = tc.Write(ppV2("2001:db8::7", 1)[:30])
	must(t, tc.(*net.TCPConn).CloseWrite())
	if n, err := tc.Read(make([]byte, 64)); n != 0 || err == nil {
		t.Errorf("truncated header: read %d, %v", n, err)
	}
	// Slow: nothing within header_timeout.
	sc := proxytest.DialFrom(t, ppBalancer, p.addr)
	if n, err := sc.Read(make([]byte, 64)); n != 0 || err == nil || isTimeoutErr(err) {
		t.Errorf("silent connection: read %d, %v; want closed by the proxy", n, err)
	}
	want := map[string]string{"untrusted": "2", "missing": "1", "malformed": "3", "timeout": "1", "unsupported": "0"}
	eventually(t, "the refusals counted", func() bool {
		body := p.metricsText(t)
		for r, n := range want {
			if !strings.Contains(body, fmt.Sprintf("proxy_proxy_protocol_rejected_total{reason=%q} %s\n", r, n)) {
				return false
			}
		}
		return true
	})
	// The proxy still serves.
	if resp := ppGet(t, ppBalancer, p.addr, ppV1("203.0.113.7", 1), ""); resp == nil || resp.StatusCode != 200 {
		t.Fatalf("after the refusals: %v", resp)
	}
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// The header precedes the TLS handshake, and HTTP/2 (over TLS and h2c)
// sees the believed address too.
func TestProxyProtocolTLSAndHTTP2(t *testing.T) {
	be := backend(t, echoHeaders)
	certFile, keyFile, pool := localhostCert(t)
	tlsCfg := strings.Replace(ppConfig, "    proxy_protocol:", fmt.Sprintf("    tls: {cert: %s, key: %s}\n    proxy_protocol:", certFile, keyFile), 1)
	dial := func(header []byte) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ppBalancer)}}
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				_, err = c.Write(header)
			}
			return c, err
		}
	}
	check := func(t *testing.T, tr *http.Transport, url, wantProto, wantXFF string) {
		t.Helper()
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: testTimeout}).Get(url)
		must(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Proto != wantProto || resp.Header.Get("X-Got-X-Forwarded-For") != wantXFF {
			t.Errorf("%s: X-Forwarded-For %q, want %q over %s", resp.Proto, resp.Header.Get("X-Got-X-Forwarded-For"), wantXFF, wantProto)
		}
	}
	t.Run("tls", func(t *testing.T) {
		p := startProxy(t, withBackend(tlsCfg, be.URL))
		h1 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DialContext: dial(ppV1("203.0.113.21", 1)),
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
		check(t, h1, "https://"+p.addr+"/", "HTTP/1.1", "203.0.113.21")
		h2 := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DialContext: dial(ppV2("2001:db8::21", 1)), ForceAttemptHTTP2: true}
		check(t, h2, "https://"+p.addr+"/", "HTTP/2.0", "2001:db8::21")
	})
	t.Run("h2c", func(t *testing.T) {
		p := startProxy(t, withBackend(ppConfig, be.URL))
		var protos http.Protocols
		protos.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &protos, DialContext: dial(ppV2("203.0.113.22", 1))}
		check(t, tr, "http://"+p.addr+"/", "HTTP/2.0", "203.0.113.22")
	})
}

func TestProxyProtocolConfig(t *testing.T) {
	head := "listeners:\n  - addr: 127.0.0.1:8080\n    proxy_protocol:\n"
	tail := "backends:\n  servers:\n    - url: http://127.0.0.1:8081\n"
	cfg, err := Parse("p.yaml", []byte(head+"      trusted: [10.0.0.0/8, 192.0.2.7]\n"+tail))
	must(t, err)
	if got := cfg.Listeners[0].ProxyProtocol.HeaderTimeout; got != DefaultProxyProtocolHeaderTimeout {
		t.Errorf("header_timeout default %v", got)
	}
	for _, c := range []struct {
		body string
		line int
		path string
		msg  string
	}{
		{"      header_timeout: 1s\n", 3, "listeners[0].proxy_protocol.trusted", "at least one"},
		{"      trusted: [10.0.0.0/8, 10.1.2.3/8]\n", 4, "listeners[0].proxy_protocol.trusted[1]", "did you mean 10.0.0.0/8"},
		{"      trusted: [lb.internal]\n", 4, "listeners[0].proxy_protocol.trusted[0]", "not a CIDR or address"},
		{"      trusted: [0.0.0.0/0]\n", 4, "listeners[0].proxy_protocol.trusted[0]", "trusts every address"},
		{"      trusted: [10.0.0.1]\n      header_timeout: -1s\n", 5, "listeners[0].proxy_protocol.header_timeout", "positive"},
		{"      trusted: [10.0.0.1]\n      optional: true\n", 5, "listeners[0].proxy_protocol.optional", "unknown field"},
	} {
		_, err := Parse("p.yaml", []byte(head+c.body+tail))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Path != c.path || !strings.Contains(ce.Msg, c.msg) || ce.Line != c.line {
			t.Errorf("%q: %v; want line %d, %s: …%s…", c.body, err, c.line, c.path, c.msg)
		}
	}
}

// Turning the PROXY protocol on or changing its trust is a listener
// change: a reload refuses it.
func TestProxyProtocolNeedsRestart(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, withBackend(ppConfig, be.URL))
	changed, err := Parse("p.yaml", []byte(withBackend(strings.Replace(ppConfig, ppBalancer+"/32", "10.0.0.0/8", 1), be.URL)))
	must(t, err)
	changed.Listeners[0].Addr, changed.Admin.Addr = p.srv.Config().Listeners[0].Addr, p.srv.Config().Admin.Addr
	if err := p.srv.Apply(changed); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("Apply with another trust list: %v, want a refusal that asks for a restart", err)
	}
}
