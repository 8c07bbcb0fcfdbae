// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
)

// A failed request that already waited longer than the target is a
// (censored) sample; a fast failure is not; a controller without a
// response-time target never samples failures.
func TestCensoredSamples(t *testing.T) {
	cfg := control.DefaultSEDAConfig()
	cfg.Target = 100 * time.Millisecond
	s := newStage(t, Options{Name: "api", Controller: &cfg}, time.Now())
	for _, c := range []struct {
		rt     time.Duration
		ok     bool
		sample bool
	}{
		{5 * time.Second, false, true},       // timed out after 5 s: sample
		{20 * time.Millisecond, false, true}, // fast 502: not a sample
		{30 * time.Millisecond, true, true},  // success: sample
		{9 * time.Second, true, false},       // a stream: never
	} {
		tk, err := s.Enter(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(tk.Arrival().Add(c.rt), Outcome{OK: c.ok, NoSample: !c.sample})
	}
	m := s.classes[0].rec.Collect(time.Now())
	if m.Samples != 2 || m.Completed != 4 {
		t.Fatalf("samples %v completed %v, want 2 and 4", m.Samples, m.Completed)
	}
	// mean of 5 s and 30 ms
	if m.MeanRT < 2.5 || m.MeanRT > 2.52 {
		t.Fatalf("mean %v", m.MeanRT)
	}
	// SetTarget moves the threshold: at 10 s the 5 s failure is no sample.
	if err := s.SetTarget(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	tk, _ := s.Enter(t.Context(), 0)
	tk.Finish(tk.Arrival().Add(5*time.Second), Outcome{OK: false})
	if m := s.classes[0].rec.Collect(time.Now()); m.Samples != 0 {
		t.Fatalf("5 s failure under a 10 s target sampled")
	}

	k, _ := New(Options{Name: "k", Controller: &control.StaticRateConfig{Rate: 1e6, Period: time.Second}}, time.Now())
	tk, _ = k.Enter(t.Context(), 0)
	tk.Finish(tk.Arrival().Add(time.Hour), Outcome{OK: false})
	if m := k.classes[0].rec.Collect(time.Now()); m.Samples != 0 {
		t.Fatal("failure sampled without a target")
	}
}

// SEDA runs after nreq response-time samples, not after nreq completions:
// fast failures (no samples) must not make it run, and cut, more often.
func TestTriggerCountsSamples(t *testing.T) {
	cfg := control.DefaultSEDAConfig()
	cfg.Target, cfg.NReq = 100*time.Millisecond, 10
	now := time.Now()
	s := newStage(t, Options{Name: "t", Controller: &cfg, Burst: 1000}, now)
	for i := 0; i < 50; i++ { // fast failures: completions, no samples
		tk, err := s.Enter(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(tk.Arrival().Add(time.Millisecond), Outcome{OK: false})
	}
	if ds := s.Step(now.Add(10 * time.Millisecond)); len(ds) != 0 {
		t.Fatalf("ran after 50 non-sample completions: %+v", ds)
	}
	for i := 0; i < 10; i++ {
		tk, _ := s.Enter(t.Context(), 0)
		tk.Finish(tk.Arrival().Add(time.Millisecond), Outcome{OK: true})
	}
	ds := s.Step(now.Add(20 * time.Millisecond))
	if len(ds) != 1 || ds[0].Inputs.Samples != 10 || ds[0].Inputs.Failed != 50 {
		t.Fatalf("want one run with 10 samples and 50 failures: %+v", ds)
	}
}

// A tick that arrives slightly before a full period still runs the step
// (a ticker is not exact); one well before it does not.
func TestDueToleratesEarlyTick(t *testing.T) {
	cfg := control.DefaultKihlConfig()
	now := time.Now()
	s := newStage(t, Options{Name: "k", Controller: &cfg}, now)
	if ds := s.Step(now.Add(999 * time.Millisecond)); len(ds) != 1 {
		t.Fatalf("tick 1 ms early skipped: %d decisions", len(ds))
	}
	if ds := s.Step(now.Add(1500 * time.Millisecond)); len(ds) != 0 {
		t.Fatalf("half a period ran a step")
	}
}
