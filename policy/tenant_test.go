// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice"
)

// The tenant a stage's fair queueing sees, for each tenants.key: the hop
// tenant by default; the client address, cut to a prefix (from a trusted
// proxy, the first untrusted X-Forwarded-For entry; from anyone else, the
// peer); a named header, believed only from a trusted proxy.
func TestTenantKeys(t *testing.T) {
	const base = `
classes:
  order: [default]
  trusted_proxies: [10.0.0.0/8]
stages:
  - {name: hop, match: {path_prefix: /hop/}, controller: auto, tenants: {fair: true}}
  - {name: ip, match: {path_prefix: /ip/}, controller: auto, tenants: {fair: true, key: client}}
  - {name: net, match: {path_prefix: /net/}, controller: auto, tenants: {fair: true, key: client, ipv4_prefix: 24, ipv6_prefix: 64}}
  - {name: hdr, match: {path_prefix: /hdr/}, controller: auto, tenants: {fair: true, key: 'header:x-customer'}}
`
	p := build(t, base, Options{})
	for _, tc := range []struct {
		path, remote string
		hdr          []string
		want         string
	}{
		{"/hop/", "10.0.0.1:1", []string{sluice.TenantHeader, "acme"}, "acme"},
		{"/hop/", "192.0.2.7:1", []string{sluice.TenantHeader, "acme"}, ""},
		{"/ip/", "192.0.2.7:1", nil, "192.0.2.7"},
		{"/ip/", "10.0.0.1:1", []string{"X-Forwarded-For", "198.51.100.9, 10.0.0.2"}, "198.51.100.9"},
		{"/ip/", "192.0.2.7:1", []string{"X-Forwarded-For", "198.51.100.9"}, "192.0.2.7"},
		{"/net/", "192.0.2.7:1", nil, "192.0.2.0/24"},
		{"/net/", "[2001:db8:1:2:3:4:5:6]:1", nil, "2001:db8:1:2::/64"},
		{"/hdr/", "10.0.0.1:1", []string{"X-Customer", "globex"}, "globex"},
		{"/hdr/", "192.0.2.7:1", []string{"X-Customer", "globex"}, ""},
		{"/hdr/", "10.0.0.1:1", []string{"X-Customer", "not a token"}, ""},
		{"/hdr/", "10.0.0.1:1", []string{sluice.TenantHeader, "acme"}, ""},
	} {
		r := request("GET", tc.path+"x", tc.remote, tc.hdr...)
		if got := p.ClassifyRequest(r, t0).Tenant; got != tc.want {
			t.Errorf("%s from %s with %v: tenant %q, want %q", tc.path, tc.remote, tc.hdr, got, tc.want)
		}
	}
}

// The stage's fair queue sees the tenant the key names: with key client,
// three clients' requests waiting behind a full limit are three tenants;
// with the default key and no tenant header they are one.
func TestTenantKeyReachesTheQueue(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{{"client", 3}, {"hop", 1}} {
		synctest.Test(t, func(t *testing.T) {
			p := build(t, `
stages:
  - {name: s, controller: static-concurrency, params: {limit: 1}, queue: {max: 8, timeout: 1s}, tenants: {fair: true, key: `+tc.key+`}}
`, Options{})
			first, err := p.Admit(request("GET", "/", "192.0.2.1:1"))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			for i := range 3 {
				go func() {
					a, err := p.Admit(request("GET", "/", fmt.Sprintf("192.0.2.%d:1", 10+i)))
					if err == nil {
						a.Done(sluice.Success)
					}
					done <- struct{}{}
				}()
			}
			synctest.Wait()
			if got := p.Stage("s").Tenants(); got != tc.want {
				t.Errorf("key %s: %d tenants queued, want %d", tc.key, got, tc.want)
			}
			first.Done(sluice.Success)
			for range 3 {
				<-done
			}
		})
	}
}
