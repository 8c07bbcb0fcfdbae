package sim

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/stage"
)

// TestStageExactTrigger: a SEDA stage with nreq = 5 behind arrivals every
// 100 ms and a constant 13 ms service. The fifth sample lands at
// 0.513 s; with ExactTrigger the controller runs then, without it at the
// next poll (stage.MaxPoll = 10 ms: 0.52 s), as the live runner does.
func TestStageExactTrigger(t *testing.T) {
	for _, exact := range []bool{true, false} {
		e := New(1)
		cfg := control.DefaultSEDAConfig()
		cfg.NReq, cfg.Timeout, cfg.Target = 5, 10*time.Second, time.Second
		st, err := stage.New(stage.Options{Name: "s", Controller: &cfg}, e.Time())
		if err != nil {
			t.Fatal(err)
		}
		server, _ := NewFIFO(e, FIFOConfig{Servers: 1})
		entry, err := NewStage(e, st, &Visit{Engine: e, Station: server}, nil)
		if err != nil {
			t.Fatal(err)
		}
		entry.ExactTrigger = exact
		var at []time.Duration
		var samples []float64
		entry.OnStep = func(now time.Duration, ds []sluice.Decision) {
			for _, d := range ds {
				at = append(at, now)
				samples = append(samples, d.Inputs.Samples)
			}
		}
		rate, _ := dist.ConstantSchedule(10)
		svc, _ := dist.NewDeterministic(0.013)
		src, err := NewOpen(e, OpenConfig{Arrivals: dist.Constant{Rate: rate}, Types: []RequestType{{Demand: svc}}, Target: entry})
		if err != nil {
			t.Fatal(err)
		}
		src.Start()
		e.Run(1100 * time.Millisecond)
		want := []time.Duration{513 * time.Millisecond, 1013 * time.Millisecond}
		if !exact {
			want = []time.Duration{520 * time.Millisecond, 1020 * time.Millisecond}
		}
		if len(at) != 2 || at[0] != want[0] || at[1] != want[1] || samples[0] != 5 || samples[1] != 5 {
			t.Errorf("exact %v: steps at %v with %v samples, want at %v with 5 each", exact, at, samples, want)
		}
	}
}
