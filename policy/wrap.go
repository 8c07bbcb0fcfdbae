// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/auto"
)

// AutoStage is the name of the one stage of Auto's policy, as of the
// proxy's quick start.
const AutoStage = "all"

// Auto returns the policy of the proxy's quick start told only an SLO
// (sluice proxy --listen … --backend … --slo 250ms): one stage, "all",
// that takes every request and runs the auto controller with objective
// slo (0: auto's default, 500ms), every other setting at its default.
func Auto(slo time.Duration) Config {
	c := auto.DefaultConfig()
	if slo != 0 {
		c.SLO = slo
	}
	return Config{Stages: []StageConfig{{Name: AutoStage, Match: MatchConfig{PathPrefix: "/"}, Control: &c}}}
}

// Wrap builds the policy of cfg (New, with opts), runs its control loop
// (Run) until ctx ends, and returns h behind sluice.Middleware with the
// policy, for its metrics (Collector) and state (Stage, State). The common
// case is one call:
//
//	h, pol, err := policy.Wrap(ctx, mux, policy.Auto(250*time.Millisecond), policy.Options{})
//
// An invalid cfg is a *sluice.FieldError, as from New, and starts nothing.
func Wrap(ctx context.Context, h http.Handler, cfg Config, opts Options) (http.Handler, *Policy, error) {
	pol, err := New(cfg, opts)
	if err != nil {
		return nil, nil, err
	}
	go pol.Run(ctx)
	return sluice.Middleware(pol)(h), pol, nil
}
