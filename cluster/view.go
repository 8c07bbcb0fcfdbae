// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// This file is what the core shows of itself: the /state view of the
// cluster and the wording of budgets in reasons and logs.

func fmtNum(v float64) string { return fmt.Sprintf("%.4g", v) }

func fmtBudget(k sluice.Kind, v float64) string {
	if k == sluice.KindConcurrency {
		return fmt.Sprintf("limit of %g", v)
	}
	return fmt.Sprintf("rate of %.4g req/s", v)
}

// View is the cluster as this instance sees it, for /state.
type View struct {
	Instance string `json:"instance"`
	Mode     Mode   `json:"mode"`
	// Reason says why the instance is not synced.
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Instances is N, the number of instances counted; Live their ids
	// (this one included), Unseen how many of N are assumed but not seen
	// (Config.InitialInstances during the first TTL).
	Instances int      `json:"instances"`
	Live      []string `json:"live"`
	Unseen    int      `json:"unseen,omitempty"`
	// LastSync is the now of the last successful sync, LastError the
	// error of the last failed one (empty once a sync succeeds).
	LastSync  time.Time `json:"last_sync,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	Syncs     uint64    `json:"syncs"`
	Failures  uint64    `json:"failures"`
	// Budgets are the global static budgets and this instance's parts.
	Budgets []BudgetView `json:"budgets,omitempty"`
	// Shares are the client shares and this instance's parts.
	Shares *SharesView `json:"shares,omitempty"`
	// Warnings name configurations that differ between instances (a
	// budget configured differently: each instance splits its own).
	Warnings []string `json:"warnings,omitempty"`
}

// BudgetView is one global budget in a View. Cluster figures sum the
// counted instances' last reports.
type BudgetView struct {
	Stage           string      `json:"stage"`
	Kind            sluice.Kind `json:"kind"`
	Global          float64     `json:"global"`
	Part            float64     `json:"part"`
	Demand          float64     `json:"demand_rps"`
	ClusterDemand   float64     `json:"cluster_demand_rps"`
	ClusterAdmitted float64     `json:"cluster_admitted_rps"`
	// ClusterParts sums the parts in force: this instance's now, the
	// others' as of their last report (one sync old).
	ClusterParts float64 `json:"cluster_parts"`
}

// SharesView is the client shares in a View (bytes per second).
type SharesView struct {
	Total   float64      `json:"total_bandwidth"`
	Part    float64      `json:"part"`
	Clients []ClientView `json:"clients"`
}

// ClientView is one client in a SharesView: its allocation b_i over the
// cluster, its part here, its demand (req/s) here and over the cluster,
// and what the cluster delivered to it (bytes/s) with the sum of its
// measured averages.
type ClientView struct {
	Name            string  `json:"name"`
	Allocation      float64 `json:"allocation"`
	Part            float64 `json:"part"`
	Demand          float64 `json:"demand_rps"`
	ClusterDemand   float64 `json:"cluster_demand_rps"`
	ClusterServed   float64 `json:"cluster_served"`
	ClusterMeasured float64 `json:"cluster_measured"`
}

// View returns the cluster as this instance sees it now.
func (c *Core) View() View {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := View{Instance: c.self, Mode: c.mode, Reason: c.reason, Since: c.since, Instances: c.n, Unseen: c.phant,
		LastSync: c.lastSync, LastError: c.lastErr, Syncs: c.syncs, Failures: c.failures,
		Warnings: append([]string(nil), c.warnings...)}
	if c.mode != ModeSynced {
		v.Unseen = 0
	}
	for id := range c.known {
		v.Live = append(v.Live, id)
	}
	sort.Strings(v.Live)
	if v.Live == nil {
		v.Live = []string{}
	}
	reps := make([]Report, 0, len(c.known)+1)
	if c.mode == ModeSynced {
		for _, id := range v.Live {
			reps = append(reps, c.known[id].rep)
		}
	} else {
		reps = append(reps, c.lastReport)
	}
	for _, s := range c.local.Stages {
		b := BudgetView{Stage: s.Name, Kind: s.Kind, Global: s.Global, Part: c.partOf(s)}
		if r, ok := c.stages[s.Name]; ok {
			b.Demand = r.demand
		}
		for _, rep := range reps {
			if sr, ok := rep.Stages[s.Name]; ok && sr.Kind == s.Kind {
				b.ClusterDemand += sr.Demand
				b.ClusterAdmitted += sr.Admitted
				if rep.Instance == c.self {
					sr.Part = b.Part // reports carry the part before the plan
				}
				b.ClusterParts += sr.Part
			}
		}
		v.Budgets = append(v.Budgets, b)
	}
	if sh := c.local.Shares; sh != nil {
		sv := &SharesView{Total: sh.Total}
		for i, cl := range sh.Clients {
			cv := ClientView{Name: cl.Name, Allocation: cl.Share / 100 * sh.Total}
			if c.shares != nil && i < len(c.shares.Alloc) {
				cv.Part = c.shares.Alloc[i]
			}
			if r, ok := c.clients[cl.Name]; ok {
				cv.Demand = r.demand
			}
			for _, rep := range reps {
				if rep.Shares != nil {
					cr := rep.Shares.Clients[cl.Name]
					cv.ClusterDemand += cr.Demand
					cv.ClusterServed += cr.Served
					cv.ClusterMeasured += cr.Measured
				}
			}
			sv.Clients = append(sv.Clients, cv)
		}
		if c.shares != nil {
			sv.Part = c.shares.Total
		}
		v.Shares = sv
	}
	return v
}

// String names the mode and N, for logs.
func (a Assignment) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d instances", a.Mode, a.Instances)
	for _, s := range a.Stages {
		fmt.Fprintf(&b, "; %s %s of %g", s.Name, fmtNum(s.Part), s.Global)
	}
	return b.String()
}
