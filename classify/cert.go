// SPDX-License-Identifier: Apache-2.0

package classify

import (
	"crypto/x509"
	"net/http"
)

// ClientCertIdentity returns the identity of the client certificate
// that r's TLS connection verified (CertIdentity of its leaf), or ""
// when r came without one: over plaintext, without a certificate, or on
// a listener that does not verify client certificates (a certificate
// sent but not verified against a CA names no one). It is the TLS peer's
// identity: X-Forwarded-For and trusted proxies play no part. It
// allocates only when the identity is a URI.
func ClientCertIdentity(r *http.Request) string {
	st := r.TLS
	if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return ""
	}
	return CertIdentity(st.PeerCertificates[0])
}

// CertIdentity returns the one identity sluice reads from a
// certificate: its first URI subject alternative name (a SPIFFE ID such
// as spiffe://example.org/ns/shop/sa/api, as service meshes issue),
// else its first DNS name, else its subject's common name ("" when it
// has none of them).
func CertIdentity(c *x509.Certificate) string {
	switch {
	case len(c.URIs) > 0 && c.URIs[0] != nil:
		return c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	}
	return c.Subject.CommonName
}
