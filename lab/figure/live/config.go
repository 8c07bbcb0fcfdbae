// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy"
)

// This file builds the proxy configurations of the experiments as typed
// values (proxy.Config, policy.Config), the way a program embeds sluice,
// rather than as YAML text: a field that moves or is renamed is then a
// compile error here, not a parse error at run time.

// proxyConfig is the proxy of an experiment: one listener and the admin
// API on free loopback ports (admin on adminAddr when it is set), one
// backend server with maxConcurrency upstream connections, and a pool
// that never rejects by itself (a queue of 100 000 with a 120 s timeout,
// 120 s to the response header): in every experiment the admission
// policy pol is the only control.
func proxyConfig(backendURL string, maxConcurrency int, pol policy.Config, adminAddr string) *proxy.Config {
	if adminAddr == "" {
		adminAddr = anyPort
	}
	queueMax := 100000
	return &proxy.Config{
		Listeners:    []proxy.ListenerConfig{{Addr: anyPort}},
		Admin:        proxy.AdminConfig{Addr: adminAddr},
		DrainTimeout: time.Second,
		Backends: proxy.BackendsConfig{
			Servers:  []proxy.ServerConfig{{URL: backendURL, MaxConcurrency: maxConcurrency}},
			Queue:    proxy.PoolQueueConfig{Max: &queueMax, Timeout: 120 * time.Second},
			Timeouts: proxy.TimeoutsConfig{ResponseHeader: 120 * time.Second},
		},
		Config: pol,
	}
}

// mainPolicy is a policy with one stage, mainStage, on every path, run
// by the controller configured by ctrl.
func mainPolicy(ctrl control.Config) policy.Config {
	st := policy.StageConfig{Name: mainStage, Match: policy.MatchConfig{PathPrefix: "/"}, Control: ctrl}
	return policy.Config{Stages: []policy.StageConfig{st}}
}

// startProxy sets the configuration's defaults, validates it (an error
// names the field, as for a file) and serves it in this process.
func startProxy(ctx context.Context, cfg *proxy.Config) (*liveProxy, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("proxy configuration: %w", err)
	}
	return startProxyConfig(ctx, cfg)
}

// autoConfig is the auto controller told only its SLO.
func autoConfig(slo time.Duration) *auto.Config {
	c := auto.DefaultConfig()
	c.SLO = slo
	return &c
}

// selfTuningYaksha is the demo's self-tuning yaksha stage: mean target
// tref, a 250ms period, pole −1/s and a 2s tuning window.
func selfTuningYaksha(tref time.Duration) *control.YakshaConfig {
	c := control.DefaultYakshaConfig()
	c.Tref, c.Period, c.Pole, c.TuneWindow = tref, 250*time.Millisecond, -1, 2*time.Second
	return &c
}
