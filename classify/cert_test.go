// SPDX-License-Identifier: Apache-2.0

package classify

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/testcert"
)

// withCert returns r with a TLS state whose client certificate p was
// verified (as crypto/tls leaves it with client_auth request or
// require), or only presented when verified is false.
func withCert(r *http.Request, p *testcert.Pair, ca *testcert.CA, verified bool) *http.Request {
	st := &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{p.Cert}}
	if verified {
		st.VerifiedChains = [][]*x509.Certificate{{p.Cert, ca.Cert}}
	}
	r.TLS = st
	return r
}

func TestCertIdentity(t *testing.T) {
	ca := testcert.NewCA(t, "clients")
	cases := []struct {
		leaf testcert.Leaf
		want string
	}{
		{testcert.Leaf{CommonName: "cn", DNSNames: []string{"a.svc", "b.svc"}, URIs: []string{"spiffe://corp/ns/shop/sa/api", "spiffe://other"}}, "spiffe://corp/ns/shop/sa/api"},
		{testcert.Leaf{CommonName: "cn", DNSNames: []string{"a.svc", "b.svc"}}, "a.svc"},
		{testcert.Leaf{CommonName: "billing"}, "billing"},
		{testcert.Leaf{}, ""},
	}
	for _, c := range cases {
		c.leaf.Client = true
		p := ca.Issue(t, c.leaf)
		if got := CertIdentity(p.Cert); got != c.want {
			t.Errorf("%+v: identity %q, want %q", c.leaf, got, c.want)
		}
		if got := ClientCertIdentity(withCert(req("GET", "/", "192.0.2.1:1", nil), p, ca, true)); got != c.want {
			t.Errorf("%+v: request identity %q, want %q", c.leaf, got, c.want)
		}
		if got := ClientCertIdentity(withCert(req("GET", "/", "192.0.2.1:1", nil), p, ca, false)); got != "" {
			t.Errorf("an unverified certificate gives identity %q", got)
		}
	}
	if got := ClientCertIdentity(req("GET", "/", "192.0.2.1:1", nil)); got != "" {
		t.Errorf("plaintext gives identity %q", got)
	}
}

// A client_cert rule matches the verified identity only: exactly, or
// any verified one with an empty value; a header or X-Forwarded-For
// plays no part, and an unverified certificate is no identity.
func TestClientCertRule(t *testing.T) {
	ca := testcert.NewCA(t, "clients")
	api := ca.Issue(t, testcert.Leaf{URIs: []string{"spiffe://corp/api"}, Client: true})
	batch := ca.Issue(t, testcert.Leaf{DNSNames: []string{"batch.corp"}, Client: true})
	c, err := New(Config{Rules: []ClassRule{
		{Class: 0, ClientCert: &CertMatch{Value: "spiffe://corp/api"}},
		{Class: 1, ClientCert: &CertMatch{}},
	}, DefaultClass: 2, TrustedProxies: mustPrefixes(t, "10.0.0.0/8")})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		r    *http.Request
		want int
	}{
		{"api", withCert(req("GET", "/", "192.0.2.1:1", nil), api, ca, true), 0},
		{"another verified identity", withCert(req("GET", "/", "192.0.2.1:1", nil), batch, ca, true), 1},
		{"unverified", withCert(req("GET", "/", "192.0.2.1:1", nil), api, ca, false), 2},
		{"plaintext from a trusted proxy", req("GET", "/", "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"spiffe://corp/api"}}), 2},
	}
	for _, k := range cases {
		if got := c.Class(k.r); got != k.want {
			t.Errorf("%s: class %d, want %d", k.name, got, k.want)
		}
	}
	if _, err := New(Config{Rules: []ClassRule{{Class: 0}}}); err == nil {
		t.Error("a rule without condition compiled")
	}
}
