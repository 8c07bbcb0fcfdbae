// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/gate"
)

// A static-rate stage's budget set from outside takes effect in the token
// bucket at once, is recorded as a decision, and survives the next Step
// (the controller keeps it). Counts sees the running period's requests
// and every collected one.
func TestSetStaticRate(t *testing.T) {
	cfg := control.StaticRateConfig{Rate: 100, Period: time.Second}
	s := newStage(t, Options{Name: "r", Controller: &cfg, Burst: 1}, t0)
	if k, ok := s.Static(); !ok || k != sluice.KindRate {
		t.Fatalf("Static() = %v, %v", k, ok)
	}
	if err := s.SetStatic(t0, 10, "cluster: part 10 of 100 req/s"); err != nil {
		t.Fatal(err)
	}
	// At 10 req/s with burst 1, arrivals 50 ms apart over 1 s admit 10
	// (the first one and one per 100 ms), not 20 as 100 req/s would.
	admitted := 0
	for i := range 20 {
		if _, o := s.Arrive(t0.Add(time.Duration(i)*50*time.Millisecond), 0, nil); o == gate.Admitted {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("admitted %d of 20 at 10 req/s over 1 s, want 10", admitted)
	}
	if off, adm := s.Counts(); off != 20 || adm != 10 {
		t.Fatalf("Counts() = %d, %d before the period ends; want 20, 10", off, adm)
	}
	s.Step(t0.Add(time.Second))
	if _, o := s.Arrive(t0.Add(1050*time.Millisecond), 0, nil); o != gate.Admitted {
		t.Fatal("the first request after 100 ms was rejected")
	}
	if off, adm := s.Counts(); off != 21 || adm != 11 {
		t.Fatalf("Counts() = %d, %d after a Step; want 21, 11", off, adm)
	}
	st := s.State(5)
	if st.Setting != 10 {
		t.Fatalf("setting after Step = %g, want 10 (the part)", st.Setting)
	}
	found := false
	for _, d := range st.Decisions {
		if d.Old == 100 && d.New == 10 && strings.Contains(d.Reason, "cluster") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the change is not in the decisions: %+v", st.Decisions)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if err := s.SetStatic(t0, bad, "x"); err == nil {
			t.Fatalf("SetStatic(%g) accepted", bad)
		}
	}
	if s.State(0).Setting != 10 {
		t.Fatal("a refused value changed the setting")
	}
}

// A static-concurrency stage's limit raised from outside grants the
// waiters it lets in at once; a fractional limit is refused.
func TestSetStaticConcurrencyGrantsWaiters(t *testing.T) {
	cfg := control.StaticConcurrencyConfig{Limit: 1, Period: time.Second}
	s := newStage(t, Options{Name: "c", Controller: &cfg, MaxQueue: 4}, t0)
	tk, o := s.Arrive(t0, 0, nil)
	if o != gate.Admitted {
		t.Fatal("first request not admitted")
	}
	w, rec := waitFor(0)
	if _, o := s.Arrive(t0, 0, w); o != gate.Queued {
		t.Fatalf("second request: %v, want queued", o)
	}
	if err := s.SetStatic(t0.Add(time.Millisecond), 2.5, "x"); err == nil {
		t.Fatal("a fractional limit was accepted")
	}
	if err := s.SetStatic(t0.Add(time.Millisecond), 2, "cluster: part 2 of 6"); err != nil {
		t.Fatal(err)
	}
	if !rec.granted {
		t.Fatal("the waiter was not granted by the larger limit")
	}
	if l := s.State(0).InFlightLimited; l.Limit != 2 || l.InFlight != 2 || l.Queued != 0 {
		t.Fatalf("limiter %+v", l)
	}
	tk.Done(sluice.Success)
	rec.t.Done(sluice.Success)
}

// Adaptive controllers and none have no budget to set.
func TestSetStaticRefusesOtherControllers(t *testing.T) {
	s := sedaStage(t, nil, false)
	if _, ok := s.Static(); ok {
		t.Fatal("seda reported as static")
	}
	if err := s.SetStatic(t0, 5, "x"); err == nil {
		t.Fatal("SetStatic on seda accepted")
	}
	none := newStage(t, Options{Name: "n", Controller: &control.NoneConfig{Period: time.Second}}, t0)
	if _, ok := none.Static(); ok {
		t.Fatal("none reported as a budget")
	}
	if err := none.SetStatic(t0, 5, "x"); err == nil {
		t.Fatal("SetStatic on none accepted")
	}
}
