// SPDX-License-Identifier: Apache-2.0

package share

import (
	"math"
	"testing"
	"time"
)

// An instance enforcing a third of B (cluster mode) computes d_i and the
// delay from its part: b_i/3, B/3, and Â scaled with B.
func TestSetAllocationsPart(t *testing.T) {
	cfg := testConfig()
	cfg.InitialMaxBandwidth = 4000 // Â₀ = 4·B
	s := mustNew(t, cfg)
	part := []float64{100.0 / 3, 200.0 / 3, 300.0 / 3, 400.0 / 3, 0}
	if err := s.SetAllocations(1000.0/3, part); err != nil {
		t.Fatal(err)
	}
	a := id(t, s, "a")
	if got := s.Allocation(a); math.Abs(got-100.0/3) > 1e-9 {
		t.Fatalf("b_a = %g, want 33.3", got)
	}
	if got := s.MaxMeasured(); math.Abs(got-4000.0/3) > 1e-9 {
		t.Fatalf("Â = %g, want 4000/3 (scaled with B)", got)
	}
	// Only a is active, with avg 10 < b_a: unsatisfied, d_a = 2·b_a − avg.
	setAvg(t, s, "a", 10)
	if !s.Unsatisfied() {
		t.Fatal("a below its part is not unsatisfied")
	}
	if d := s.Available(a); math.Abs(d-(2*100.0/3-10)) > 1e-9 {
		t.Fatalf("d_a = %g, want %g", d, 2*100.0/3-10)
	}
	// A part below a's average satisfies it, and d_a then hands out the
	// part's B − (Σ avg_j − avg_a).
	part[0] = 5
	if err := s.SetAllocations(1000.0/3, part); err != nil {
		t.Fatal(err)
	}
	if s.Unsatisfied() {
		t.Fatal("a above its new part is still unsatisfied")
	}
	if d := s.Available(a); math.Abs(d-1000.0/3) > 1e-9 {
		t.Fatalf("d_a = %g, want B_part = 333.3 (work-conserving branch)", d)
	}
	snap := s.Snapshot()
	if snap.TotalBandwidth != 1000.0/3 || snap.Clients[0].Allocation != 5 || snap.Clients[0].Arrivals != 1 {
		t.Fatalf("snapshot %+v", snap)
	}
}

// Â never drops below the measured Σ avg_j when B shrinks.
func TestSetAllocationsKeepsAhatAboveUse(t *testing.T) {
	s := mustNew(t, testConfig()) // Â₀ = B = 1000
	setAvg(t, s, "d", 900)
	if err := s.SetAllocations(100, []float64{10, 20, 30, 40, 0}); err != nil {
		t.Fatal(err)
	}
	if got := s.MaxMeasured(); got != 900 {
		t.Fatalf("Â = %g, want Σ avg = 900", got)
	}
}

// Bad arguments are refused and change nothing.
func TestSetAllocationsRefusesBadInput(t *testing.T) {
	s := mustNew(t, testConfig())
	for _, c := range []struct {
		name  string
		total float64
		alloc []float64
	}{
		{"zero total", 0, []float64{0, 0, 0, 0, 0}},
		{"NaN total", math.NaN(), []float64{0, 0, 0, 0, 0}},
		{"infinite total", math.Inf(1), []float64{0, 0, 0, 0, 0}},
		{"too few", 100, []float64{10, 20, 30, 40}},
		{"negative", 100, []float64{-1, 20, 30, 40, 0}},
		{"NaN allocation", 100, []float64{math.NaN(), 20, 30, 40, 0}},
		{"over the total", 100, []float64{10, 20, 30, 41, 0}},
	} {
		if err := s.SetAllocations(c.total, c.alloc); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	if snap := s.Snapshot(); snap.TotalBandwidth != 1000 || snap.Clients[3].Allocation != 400 || snap.MaxMeasured != 1000 {
		t.Fatalf("a refused call changed the state: %+v", snap)
	}
}

// A held client keeps its average across manager steps without requests
// and counts in the unsatisfied test; released, it decays again.
func TestHoldActive(t *testing.T) {
	s := mustNew(t, testConfig())
	setAvg(t, s, "a", 50) // below b_a = 100: unsatisfied while active
	a := id(t, s, "a")
	if err := s.HoldActive([]bool{true, false, false, false, false}); err != nil {
		t.Fatal(err)
	}
	s.Tick(t0.Add(time.Second))
	if got := s.Average(a); got != 50 {
		t.Fatalf("held avg decayed to %g", got)
	}
	if !s.Unsatisfied() {
		t.Fatal("a held client below its allocation does not make the state unsatisfied")
	}
	if err := s.HoldActive(nil); err != nil {
		t.Fatal(err)
	}
	if s.Unsatisfied() {
		t.Fatal("released, an idle client still makes the state unsatisfied")
	}
	s.Tick(t0.Add(2 * time.Second))
	if got := s.Average(a); math.Abs(got-40) > 1e-9 {
		t.Fatalf("released avg %g, want 0.8·50 = 40", got)
	}
	if err := s.HoldActive([]bool{true}); err == nil {
		t.Fatal("a short flag list was accepted")
	}
	// Begin on a held client below its allocation does not count it twice.
	if err := s.HoldActive([]bool{true, false, false, false, false}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Begin(t0, a)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	if err := s.HoldActive(nil); err != nil {
		t.Fatal(err)
	}
	if !s.Unsatisfied() {
		t.Fatal("a is active (Begin) and below b_a: unsatisfied")
	}
	s.Tick(t0.Add(3 * time.Second))
	if s.Unsatisfied() {
		t.Fatal("the unsatisfied count leaked")
	}
}
