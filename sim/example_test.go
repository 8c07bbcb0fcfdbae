package sim_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/dist"
	"github.com/sluicehq/sluice/sim"
)

// A gate in front of a single FIFO server, driven by evenly spaced
// arrivals, with a controller hook run at the end of every 1 s period.
func Example() {
	e := sim.New(1)
	server, _ := sim.NewFIFO(e, sim.FIFOConfig{Servers: 1})
	rec, _ := sim.NewRecorder(e, sim.RecorderConfig{Busy: server.Busy})

	limit := 8 // admissions per period; a real controller would set this
	admitted := 0
	gate := &sim.Gate{Engine: e, Recorder: rec, Next: &sim.Visit{Engine: e, Station: server},
		Admitter: sim.AdmitFunc(func(now time.Time, r *sim.Request) bool {
			admitted++
			return admitted <= limit
		})}

	rate, _ := dist.ParseSchedule("10")
	service, _ := dist.ParseDuration("det:50ms")
	src, _ := sim.NewOpen(e, sim.OpenConfig{Arrivals: dist.Constant{Rate: rate},
		Types: []sim.RequestType{{Name: "page", Demand: service}}, Target: gate})

	_ = rec.Start(time.Second, func(w sim.Row) {
		m := w.Measurements() // what a controller's Update takes
		fmt.Printf("t=%v offered=%v admitted=%v util=%.2f p90=%.0fms\n",
			w.End, m.Arrivals, m.Admitted, m.Utilization, m.P90RT*1e3)
		admitted = 0
	})
	src.Start()
	e.Run(3 * time.Second)
	// Output:
	// t=1s offered=9 admitted=8 util=0.40 p90=50ms
	// t=2s offered=10 admitted=8 util=0.40 p90=50ms
	// t=3s offered=10 admitted=8 util=0.40 p90=50ms
}
