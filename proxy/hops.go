// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"cmp"

	sclient "github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/fielderr"
)

// The upstream client side (backends.client) is package client's Config:
// the adaptive throttle, retries within a budget, and the least time left
// of a request's deadline with which it is sent. The headers it stamps
// are the hops section's, and its destinations are the servers. By
// default the proxy neither throttles nor retries (throttle.enabled
// false, retry.max_attempts 1), as before it had a client side: a request
// the backend refuses gets that answer, once. Every other field has the
// client package's default.

// setUpstreamClientDefaults fills the proxy's defaults of the upstream
// client side, the hops section's headers, then the client package's
// defaults.
func (c *Config) setUpstreamClientDefaults() {
	u := &c.Backends.Client
	setPtrDefault(&u.Throttle.Enabled, false)
	u.Retry.MaxAttempts = cmp.Or(u.Retry.MaxAttempts, 1)
	u.PriorityHeader = cmp.Or(u.PriorityHeader, c.Hops.PriorityHeader)
	u.TenantHeader = cmp.Or(u.TenantHeader, c.Hops.TenantHeader)
	u.TimeoutHeader = cmp.Or(u.TimeoutHeader, c.Hops.TimeoutHeader)
	u.SetDefaults()
}

// upstreamClient returns the client configuration of the upstream calls:
// backends.client, defaults filled, with a throttle switch of its own.
func (c *Config) upstreamClient() sclient.Config {
	cc := c.Backends.Client
	if cc.Throttle.Enabled != nil {
		on := *cc.Throttle.Enabled
		cc.Throttle.Enabled = &on
	}
	cc.SetDefaults()
	return cc
}

// validateUpstreamClient checks backends.client.
func (c *Config) validateUpstreamClient() error {
	u := &c.Backends.Client
	for _, h := range []struct{ name, got, hop string }{
		{"priority_header", u.PriorityHeader, c.Hops.PriorityHeader},
		{"tenant_header", u.TenantHeader, c.Hops.TenantHeader},
		{"timeout_header", u.TimeoutHeader, c.Hops.TimeoutHeader},
	} {
		if h.got != h.hop {
			return fieldErr("backends.client."+h.name, "%q is invalid: the upstream calls stamp hops.%s (%q); set it there", h.got, h.name, h.hop)
		}
	}
	if u.MaxDestinations != sclient.DefaultMaxDestinations {
		return fieldErr("backends.client.max_destinations", "%d is invalid: the upstream destinations are backends.servers; leave it unset", u.MaxDestinations)
	}
	cc := c.upstreamClient()
	return fielderr.Under("backends.client", cc.Validate())
}
