// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/overload"
)

func policySetDefaults(c *policy.Config) { c.SetDefaults() }

func policyValidate(c *policy.Config) error { return c.Validate() }

// buildPolicy builds the admission policy of cfg. With prev, stages whose
// configuration is unchanged are carried over with their controller
// state. Each stage is wired from what its controller needs
// (control.NeedsOf), never from its name:
//
//   - a stage bound to a resource rule (ov.byStage) gets the rule's
//     sensor: a cpu rule's utilization (and the pool's queue), a
//     bandwidth rule's normalised outgoing queue; a kihl stage with
//     tuning: auto gets the auto-tuning controller;
//   - any other stage gets the backend pool's wait queue (queue) as its
//     queue signal unless its controller reports its own (OwnQueue), and
//     the top-level utilization sensor, when there is one, if its
//     controller reads a utilization.
func buildPolicy(cfg policy.Config, prev *policy.Policy, logger *slog.Logger, queue func() float64,
	ov *overloadRun) (*policy.Policy, error) {
	ctrls, err := cfg.StageControllers()
	if err != nil {
		return nil, err
	}
	opts := policy.Options{Now: time.Now(), Logger: logger, Previous: prev, RecordsUpstream: true, Queue: map[string]func() float64{},
		Utilization: map[string]monitor.UtilizationSource{}, Controllers: map[string]control.Config{}}
	for _, st := range cfg.Stages {
		if rule := ov.byStage[st.Name]; rule != nil {
			if rule.cfg.Resource == overload.ResourceBandwidth {
				opts.Queue[st.Name] = rule.sensor.queue
				continue
			}
			opts.Queue[st.Name] = queue
			opts.Utilization[st.Name] = rule.sensor
			if rule.tune != nil {
				if kc, ok := ctrls[st.Name].(*control.KihlConfig); ok {
					rule.tune.Gains(time.Now()) // a fixed σ resolves now
					opts.Controllers[st.Name] = &control.KihlAutoConfig{Base: *kc, Tune: rule.tune}
				}
			}
			continue
		}
		needs := control.NeedsOf(ctrls[st.Name])
		if !needs.OwnQueue {
			opts.Queue[st.Name] = queue
		}
		if needs.Utilization != control.NeedNone && ov.util != nil {
			opts.Utilization[st.Name] = ov.util
		}
	}
	return policy.New(cfg, opts)
}
