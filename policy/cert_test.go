// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testcert"
)

// certRequest is a request whose TLS connection verified client
// certificate p of ca.
func certRequest(path string, p *testcert.Pair, ca *testcert.CA) *http.Request {
	r := request("GET", path, "192.0.2.7:1")
	r.TLS = &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{p.Cert},
		VerifiedChains: [][]*x509.Certificate{{p.Cert, ca.Cert}}}
	return r
}

// The verified client certificate's identity as a class (client_cert
// rules) and as a tenant (tenants.key client-cert); a request without
// one has neither.
func TestClientCertClassAndTenant(t *testing.T) {
	p := build(t, `
classes:
  order: [mesh, partner, default]
  rules:
    - {class: mesh, client_cert: {value: "spiffe://corp/ns/shop/sa/api"}}
    - {class: partner, client_cert: {}}
stages:
  - {name: s, controller: auto, tenants: {fair: true, key: client-cert}}
`, Options{})
	ca := testcert.NewCA(t, "clients")
	api := ca.Issue(t, testcert.Leaf{URIs: []string{"spiffe://corp/ns/shop/sa/api"}, Client: true})
	acme := ca.Issue(t, testcert.Leaf{CommonName: "acme", Client: true})
	classes := []string{"mesh", "partner", "default"}
	for _, c := range []struct {
		name        string
		r           *http.Request
		class       string
		tenant      string
		hopPriority string
	}{
		{"mesh identity", certRequest("/x", api, ca), "mesh", "spiffe://corp/ns/shop/sa/api", "mesh"},
		{"another identity", certRequest("/x", acme, ca), "partner", "acme", "partner"},
		{"no certificate", request("GET", "/x", "192.0.2.7:1"), "default", "", ""},
	} {
		got := p.ClassifyRequest(c.r, t0)
		if classes[got.Class] != c.class || got.Tenant != c.tenant || got.Hop.Priority != c.hopPriority {
			t.Errorf("%s: class %s tenant %q priority %q, want %s %q %q", c.name, classes[got.Class], got.Tenant, got.Hop.Priority, c.class, c.tenant, c.hopPriority)
		}
	}
	for _, bad := range []struct{ src, msg string }{
		{"classes: {order: [a, b], rules: [{class: a}]}\n", "header, cookie, cidrs or client_cert"},
		{"stages: [{name: s, controller: auto, tenants: {key: client-cert}}]\n", "needs fair: true"},
	} {
		c := parse(t, bad.src)
		c.SetDefaults()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%q: %v, want %q", bad.src, err, bad.msg)
		}
	}
}
