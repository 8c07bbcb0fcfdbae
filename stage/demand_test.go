// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"testing"
	"time"
)

func TestDemandRatio(t *testing.T) {
	period := func(offered, admitted float64, samples int, meanMS float64) *Period {
		return &Period{Elapsed: 2 * time.Second, Offered: offered, Admitted: admitted, Samples: samples, MeanMS: meanMS}
	}
	conc := func(limit, inFlight, queued int, classes ...ClassState) State {
		return State{Kind: "concurrency", InFlightLimited: &LimiterState{Limit: limit, InFlight: inFlight, Queued: queued}, Classes: classes}
	}
	for _, c := range []struct {
		name string
		st   State
		want float64
		ok   bool
	}{
		{"no period yet", State{Kind: "rate", Setting: 10, Classes: []ClassState{{}}}, 0, false},
		{"idle", State{Kind: "rate", Setting: 10, Classes: []ClassState{{Last: period(0, 0, 0, 0)}}}, 0, true},
		// 400 offered in 2 s is 200 req/s against a rate of 100 req/s.
		{"rate over", State{Kind: "rate", Setting: 100, Classes: []ClassState{{Last: period(400, 200, 200, 5)}}}, 2, true},
		{"rate under", State{Kind: "rate", Setting: 400, Classes: []ClassState{{Last: period(400, 400, 400, 5)}}}, 0.5, true},
		// Class rates 30 + 20 = 50 req/s; 100 + 100 offered in 2 s = 100 req/s.
		{"class rates", State{Kind: "rate", Setting: 30, ClassRates: []float64{30, 20},
			Classes: []ClassState{{Last: period(100, 60, 60, 5)}, {Last: period(100, 40, 40, 5)}}}, 2, true},
		// 100 req/s offered × 50 ms = 5 requests of concurrency over a limit of 10;
		// the mean is weighted by samples: (100·40 + 100·60)/200 = 50 ms.
		{"concurrency under", conc(10, 4, 0, ClassState{Last: period(100, 100, 100, 40)}, ClassState{Last: period(100, 100, 100, 60)}), 0.5, true},
		// 400 req/s × 50 ms = 20 over a limit of 8.
		{"concurrency over", conc(8, 8, 3, ClassState{Last: period(800, 300, 300, 50)}), 2.5, true},
		{"concurrency without samples", conc(8, 8, 4, ClassState{Last: period(10, 8, 0, 0)}), 1.5, true},
		// A drop probability of 0.75: 1/(1−0.75).
		{"drop probability", State{Kind: "drop_probability", Setting: 0.75, Classes: []ClassState{{Last: period(400, 100, 100, 5)}}}, 4, true},
		{"none", State{Kind: "none", Classes: []ClassState{{Last: period(400, 400, 400, 5)}}}, 1, true},
		{"gate off", State{Kind: "rate", Setting: 1, GateOff: true, Classes: []ClassState{{Last: period(400, 400, 400, 5)}}}, 1, true},
		{"all refused", State{Kind: "drop_probability", Setting: 1, Classes: []ClassState{{Last: period(40, 0, 0, 0)}}}, 40, true},
	} {
		got, ok := c.st.DemandRatio()
		if ok != c.ok || (ok && (got < c.want-1e-9 || got > c.want+1e-9)) {
			t.Errorf("%s: DemandRatio() = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
