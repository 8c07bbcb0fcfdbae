// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"fmt"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/tlsconf"
)

// TLSConfig is the TLS of a client listener or of the admin listener
// (package tlsconf): the certificates it serves, chosen by SNI and
// re-read when their files change, and the verification of client
// certificates (mutual TLS).
type TLSConfig = tlsconf.Config

// CertKeyConfig names a PEM certificate chain and its private key.
type CertKeyConfig = tlsconf.CertKeyConfig

// UpstreamTLSConfig is how the proxy speaks TLS to https:// servers
// (package tlsconf).
type UpstreamTLSConfig = tlsconf.UpstreamConfig

// Defaults of TLSConfig and UpstreamTLSConfig (package tlsconf).
const (
	// DefaultTLSWatch is how often the files of a TLS setting are read to
	// see whether they changed.
	DefaultTLSWatch = tlsconf.DefaultWatch
	// DefaultTLSMinVersion is the oldest TLS version accepted.
	DefaultTLSMinVersion = tlsconf.DefaultMinVersion
)

// The values of TLSConfig.ClientAuth (package tlsconf).
const (
	ClientAuthNone    = tlsconf.ClientAuthNone
	ClientAuthRequest = tlsconf.ClientAuthRequest
	ClientAuthRequire = tlsconf.ClientAuthRequire
)

// validateClientCertKeys checks that a policy keying on the client
// certificate's identity (a class rule's client_cert, a stage's
// tenants.key client-cert) has a listener that verifies client
// certificates: without one every request would lack an identity.
func (c *Config) validateClientCertKeys() error {
	for _, l := range c.Listeners {
		if l.TLS.VerifiesClients() {
			return nil
		}
	}
	const why = "needs a listener whose tls verifies client certificates (client_ca with client_auth request or require): without one no request has a certificate identity"
	for i, r := range c.Classes.Rules {
		if r.ClientCert != nil {
			return fieldErr(fmt.Sprintf("classes.rules[%d].client_cert", i), "%s", why)
		}
	}
	for i, s := range c.Stages {
		if s.Tenants.Key == policy.TenantKeyClientCert {
			return fieldErr(fmt.Sprintf("stages[%d].tenants.key", i), "%q %s", s.Tenants.Key, why)
		}
	}
	return nil
}
