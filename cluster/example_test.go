// SPDX-License-Identifier: Apache-2.0

package cluster_test

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/policy"
)

// A cluster runner beside a policy shares its static budgets among the
// instances of the service through Redis (it needs a Redis server, so
// this example is compiled, not run).
func ExampleNewRunner() {
	rate := control.DefaultStaticRateConfig()
	rate.Rate = 300 // req/s for the whole service
	pol, err := policy.New(policy.Config{Stages: []policy.StageConfig{{Name: "api", Control: &rate}}}, policy.Options{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	reg := prometheus.NewRegistry() // the runner's metrics (sluice_cluster_…)
	// Every field left out is at its default.
	ccfg := cluster.Config{Addrs: []string{"10.0.0.9:6379"}, Instance: "app-1", InitialInstances: 3}
	targets, err := cluster.PolicyTargets(pol, nil, nil) // static stages of pol; shares; local stages
	if err != nil {
		panic(err)
	}
	runner, err := cluster.NewRunner(ccfg, targets, cluster.Options{Registerer: reg})
	if err != nil {
		panic(err)
	}
	runner.Prime(time.Now()) // 1/N of every budget before the first sync
	go runner.Run(ctx)       // syncs every period; ends (and closes Redis) with ctx
	view := runner.View()    // mode, live instances, parts: for your own /state
	_ = view
}
