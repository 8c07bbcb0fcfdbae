// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// everyOther is a Stepper that takes a decision on every other step and
// keeps the times it was stepped at.
type everyOther struct {
	poll time.Duration
	at   []time.Time
}

func (s *everyOther) Poll() time.Duration { return s.poll }

func (s *everyOther) Step(now time.Time) []sluice.Decision {
	s.at = append(s.at, now)
	if len(s.at)%2 == 0 {
		return []sluice.Decision{{At: now, New: float64(len(s.at))}}
	}
	return nil
}

// A Runner made at 50 ms steps at 50 ms + k·Poll with the engine's clock,
// OnStep sees only the steps that took a decision, and Stop ends it.
func TestRunner(t *testing.T) {
	e := New(1)
	s := &everyOther{poll: 100 * time.Millisecond}
	var r *Runner
	var seen []time.Duration
	e.Schedule(50*time.Millisecond, func() {
		var err error
		if r, err = NewRunner(e, s); err != nil {
			t.Fatal(err)
		}
		r.OnStep = func(now time.Duration, ds []sluice.Decision) {
			if len(ds) != 1 || !ds[0].At.Equal(DefaultBase.Add(now)) {
				t.Errorf("OnStep at %v: %+v", now, ds)
			}
			seen = append(seen, now)
		}
	})
	e.Schedule(460*time.Millisecond, func() { r.Stop() })
	e.Run(time.Second)
	if len(s.at) != 4 {
		t.Fatalf("stepped %d times (%v), want 4 before the stop", len(s.at), s.at)
	}
	for i, at := range s.at {
		if want := DefaultBase.Add(50*time.Millisecond + time.Duration(i+1)*100*time.Millisecond); !at.Equal(want) {
			t.Errorf("step %d at %v, want %v", i, at.Sub(DefaultBase), want.Sub(DefaultBase))
		}
	}
	if len(seen) != 2 || seen[0] != 250*time.Millisecond || seen[1] != 450*time.Millisecond {
		t.Errorf("OnStep at %v, want [250ms 450ms]", seen)
	}
	if _, err := NewRunner(e, nil); err == nil {
		t.Error("a nil stepper accepted")
	}
}
