// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/stage"
)

// A stage.Stage, the proxy's own admission stage, in front of a single FIFO
// server in virtual time: a static token rate of 8 req/s (bucket of 5)
// against evenly spaced arrivals at 10 req/s, the server's utilization as
// the stage's sensor, and the measurements of every control step.
func Example() {
	e := sim.New(1)
	server, _ := sim.NewFIFO(e, sim.FIFOConfig{Servers: 1})
	busy, _ := sim.NewBusy(e, server.Busy, "server")
	st, _ := stage.New(stage.Options{Name: "site", Utilization: busy,
		Controller: &control.StaticRateConfig{Rate: 8, Period: time.Second}}, e.Time())
	entry, _ := sim.NewStage(e, st, &sim.Visit{Engine: e, Station: server}, nil)
	entry.OnStep = func(now time.Duration, ds []sluice.Decision) {
		m := ds[0].Inputs // what the controller's Update saw
		fmt.Printf("t=%v offered=%v admitted=%v util=%.2f p90=%.0fms\n",
			now, m.Arrivals, m.Admitted, m.Utilization, m.P90RT*1e3)
	}

	rate, _ := dist.ParseSchedule("10")
	service, _ := dist.ParseDuration("det:50ms")
	src, _ := sim.NewOpen(e, sim.OpenConfig{Arrivals: dist.Constant{Rate: rate},
		Types: []sim.RequestType{{Name: "page", Demand: service}}, Target: entry})
	src.Start()
	e.Run(3 * time.Second)
	// The bucket's 5 tokens of credit let every arrival in for two
	// seconds (+2 a second); then the rate holds at 8.

	// Output:
	// t=1s offered=9 admitted=9 util=0.45 p90=50ms
	// t=2s offered=10 admitted=10 util=0.50 p90=50ms
	// t=3s offered=10 admitted=8 util=0.40 p90=50ms
}
