// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"time"

	sclient "github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/fielderr"
)

// UpstreamClientConfig is sluice's client side on the proxy's calls to
// its backends (package client): the adaptive throttle, retries within a
// budget, and the least time left of a request's deadline with which it
// is sent. The headers it stamps are the hops section's. By default the
// proxy neither throttles nor retries (throttle.enabled false,
// retry.max_attempts 1), as before it had a client side: a request the
// backend refuses gets that answer, once. Every other field has the
// client package's default.
type UpstreamClientConfig struct {
	// Throttle is Google's client-side adaptive throttling per server;
	// off unless enabled (docs/config.md has its fields' defaults).
	Throttle sclient.ThrottleConfig `yaml:"throttle"`
	// Retry retries safe requests; max_attempts is 1 unless set, so that
	// nothing is retried. A retry goes to the same server, and only a
	// request without a body is retried.
	Retry sclient.RetryConfig `yaml:"retry"`
	// MinRemaining is the least time left of a request's deadline with
	// which it is sent upstream (default 1ms); with less it is answered
	// 504 at once.
	MinRemaining time.Duration `yaml:"min_remaining"`
}

// setUpstreamClientDefaults fills the proxy's defaults of the upstream
// client side, then the client package's.
func (c *Config) setUpstreamClientDefaults() {
	u := &c.Backends.Client
	if u.Throttle.Enabled == nil {
		off := false
		u.Throttle.Enabled = &off
	}
	if u.Retry.MaxAttempts == 0 {
		u.Retry.MaxAttempts = 1
	}
	cc := c.upstreamClient()
	u.Throttle, u.Retry, u.MinRemaining = cc.Throttle, cc.Retry, cc.MinRemaining
}

// upstreamClient returns the client configuration of the upstream calls:
// backends.client with the hops section's headers, defaults filled.
func (c *Config) upstreamClient() sclient.Config {
	u := c.Backends.Client
	cc := sclient.Config{Throttle: u.Throttle, Retry: u.Retry, MinRemaining: u.MinRemaining,
		PriorityHeader: c.Hops.PriorityHeader, TenantHeader: c.Hops.TenantHeader, TimeoutHeader: c.Hops.TimeoutHeader}
	if cc.Throttle.Enabled != nil {
		on := *cc.Throttle.Enabled
		cc.Throttle.Enabled = &on
	}
	cc.SetDefaults()
	return cc
}

// validateUpstreamClient checks backends.client.
func (c *Config) validateUpstreamClient() error {
	cc := c.upstreamClient()
	return fielderr.Under("backends.client", cc.Validate())
}
