// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"net/http"
	"net/textproto"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/classify"
	"github.com/sluicehq/sluice/internal/httpx"
)

// tenantKey is a stage's compiled tenants.key: what names a request's
// tenant for its fair queueing.
type tenantKey struct {
	kind   tenantKind
	header string // canonical name, for tenantHeader
	v4, v6 int    // prefix lengths, for tenantClient
}

type tenantKind uint8

const (
	tenantHop tenantKind = iota
	tenantClient
	tenantHeader
	tenantClientCert
	tenantPath
)

// maxPathTenant is how much of the path names a tenant under key path.
const maxPathTenant = 128

// parseTenantKey reads tenants.key with its prefix lengths; ok false
// names no key.
func parseTenantKey(key string, v4, v6 int) (tenantKey, bool) {
	switch {
	case key == TenantKeyHop:
		return tenantKey{kind: tenantHop}, true
	case key == TenantKeyClient:
		return tenantKey{kind: tenantClient, v4: v4, v6: v6}, true
	case key == TenantKeyClientCert:
		return tenantKey{kind: tenantClientCert}, true
	case key == TenantKeyPath:
		return tenantKey{kind: tenantPath}, true
	case strings.HasPrefix(key, TenantKeyHeader):
		name := key[len(TenantKeyHeader):]
		if !httpx.IsToken(name) {
			return tenantKey{}, false
		}
		return tenantKey{kind: tenantHeader, header: textproto.CanonicalMIMEHeaderKey(name)}, true
	}
	return tenantKey{}, false
}

// tenant returns r's tenant under key k, hop being the believed hop
// tenant: "" when the request names none (one tenant of the default
// weight). Only keys client (the masked address's text) and client-cert
// (a URI identity's text) allocate; path is the request's URL path (its
// first maxPathTenant bytes).
func (p *Policy) tenant(k tenantKey, r *http.Request, hop string) string {
	switch k.kind {
	case tenantClient:
		a := p.cls.ClientIP(r)
		if !a.IsValid() {
			return ""
		}
		bits := k.v6
		if a.Is4() {
			bits = k.v4
		}
		if bits < a.BitLen() {
			if pf, err := a.Prefix(bits); err == nil {
				return pf.String()
			}
		}
		return a.String()
	case tenantHeader:
		v := r.Header[k.header]
		if len(v) != 1 || !sluice.ValidTenant(v[0]) || !p.cls.PeerTrusted(r) {
			return ""
		}
		return v[0]
	case tenantClientCert:
		return classify.ClientCertIdentity(r)
	case tenantPath:
		path := r.URL.Path
		if len(path) > maxPathTenant {
			path = path[:maxPathTenant]
		}
		return path
	}
	return hop
}
