// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

// A stage's Poll is its controller's period, or MaxPoll for a
// sample-triggered one; Runner.Step steps it at the given now and shows
// OnStep only the steps that took a decision.
func TestRunnerStepsStage(t *testing.T) {
	rate := control.DefaultStaticRateConfig()
	rate.Rate = 10
	s := newStage(t, Options{Name: "r", Controller: &rate}, t0)
	if s.Poll() != s.Period() {
		t.Errorf("poll %v, want the period %v", s.Poll(), s.Period())
	}
	if st := sedaStage(t, nil, false); st.Poll() != MaxPoll {
		t.Errorf("SEDA stage polls every %v, want MaxPoll", st.Poll())
	}
	var seen []time.Time
	r := Runner{Stepper: s, OnStep: func(now time.Time, ds []sluice.Decision) {
		if len(ds) != 1 || !ds[0].At.Equal(now) {
			t.Errorf("OnStep at %v: %+v", now, ds)
		}
		seen = append(seen, now)
	}}
	if ds := r.Step(t0.Add(s.Period() / 2)); len(ds) != 0 {
		t.Fatalf("a step half a period in: %+v", ds)
	}
	if ds := r.Step(t0.Add(s.Period())); len(ds) != 1 {
		t.Fatalf("a step after a period: %+v", ds)
	}
	if len(seen) != 1 || !seen[0].Equal(t0.Add(s.Period())) {
		t.Errorf("OnStep saw %v", seen)
	}
}
