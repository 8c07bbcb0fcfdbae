// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/policy"
)

// Cluster mode in the proxy (config section cluster; package cluster).
//
// With a cluster section, every static-rate and static-concurrency
// stage's budget (except cluster.local_stages) and the client shares'
// B are global: the generation's cluster.Runner enforces this
// instance's part of each, set once per sync period through
// stage.Stage.SetStatic and share.Shares.SetAllocations. The runner is
// built with the generation and primed (1/N of every budget) before the
// generation serves; it runs beside the policy's runners and stops with
// them (a reload starts the next one, which keeps what the previous one
// knew of the cluster); a shutdown first tells the other instances that
// this one left. Nothing on the request path talks to Redis.

// validateCluster checks the cluster section, naming cluster.<field>.
func (c *Config) validateCluster() error {
	cc := c.Cluster
	if cc == nil {
		return nil
	}
	if err := cc.Validate(); err != nil {
		return fielderr.Under("cluster", err)
	}
	for i, name := range cc.LocalStages {
		j := slices.IndexFunc(c.Stages, func(s policy.StageConfig) bool { return s.Name == name })
		if j < 0 {
			return fieldErr(fmt.Sprintf("cluster.local_stages[%d]", i), "%q is invalid: no stage has that name", name)
		}
		ctl := c.Stages[j].Controller
		if cc, err := control.NewConfig(ctl); err != nil || !control.NeedsOf(cc).SplitBudget {
			return fieldErr(fmt.Sprintf("cluster.local_stages[%d]", i), "%q is invalid: stage %q has controller %q; only %s budgets are split, the others are always local",
				name, name, ctl, control.NamesWhereText(func(n control.Needs) bool { return n.SplitBudget }))
		}
	}
	return nil
}

// newClusterRunner builds the runner of a generation with a cluster
// section, primed at now: its targets are the policy's static stages
// with their configured (global) budgets, and the generation's shares.
func (s *Server) newClusterRunner(g *generation, prev *generation, now time.Time) (*cluster.Runner, error) {
	cfg := g.cfg
	t, err := cluster.PolicyTargets(g.pol, g.shares, cfg.Cluster.LocalStages)
	if err != nil {
		return nil, err
	}
	opts := cluster.Options{Logger: s.log, Metrics: s.clusterMetrics()}
	if prev != nil {
		opts.Previous = prev.cluster
	}
	r, err := cluster.NewRunner(*cfg.Cluster, t, opts)
	if err != nil {
		return nil, fielderr.Under("cluster", err)
	}
	r.Prime(now)
	return r, nil
}

// clusterMetrics returns the server's cluster metrics, registering them
// the first time a configuration has a cluster section (nil without a
// registry: Check).
func (s *Server) clusterMetrics() *cluster.Metrics {
	if s.reg == nil {
		return nil
	}
	if s.clm == nil {
		m, err := cluster.NewMetrics(s.reg)
		if err != nil {
			s.log.Error("cluster metrics", "err", err)
			return nil
		}
		s.clm = m
	}
	return s.clm
}
