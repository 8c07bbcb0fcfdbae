// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestBusyTimeline(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	b, err := NewBusy(2, t0)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		op   string // "begin", "end" or "util"
		ms   int
		want float64
	}
	steps := []step{
		// Interval 1 (0–2 s): 1 busy for 0.5 s, 2 for 0.5 s, 1 for 1 s:
		// 2.5 server-seconds / (2 servers · 2 s) = 0.625.
		{"begin", 0, 0}, {"begin", 500, 0}, {"end", 1000, 0}, {"util", 2000, 0.625},
		// Interval 2 (2–4 s): the remaining server busy until 3 s: 1/(2·2).
		{"end", 3000, 0}, {"util", 4000, 0.25},
		// Interval 3 (4–5 s): out-of-order End (4.9 s after a Begin at 5 s)
		// counts as 5 s, so nothing is busy; an unmatched End is ignored.
		{"begin", 5000, 0}, {"end", 4900, 0}, {"end", 5000, 0}, {"util", 5000, 0},
		// Interval 4 (5–6 s): three requests on two servers saturate at 1.
		{"begin", 5000, 0}, {"begin", 5000, 0}, {"begin", 5000, 0}, {"util", 6000, 1},
		{"end", 6000, 0}, {"end", 6000, 0}, {"end", 6000, 0},
		// Interval 5 (6–10 s): idle.
		{"util", 10000, 0},
	}
	for i, s := range steps {
		switch s.op {
		case "begin":
			b.Begin(at(s.ms))
		case "end":
			b.End(at(s.ms))
		case "util":
			got, err := b.Utilization(at(s.ms))
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if !near(got, s.want) {
				t.Errorf("step %d: Utilization(%d ms) = %v, want %v", i, s.ms, got, s.want)
			}
		}
	}
	if b.InFlight() != 0 {
		t.Errorf("InFlight() = %d, want 0", b.InFlight())
	}
	wantNoTimeElapsed(t, "empty interval", b, at(10000))
	if got := b.Describe(); got != "busy time of 2 servers" {
		t.Errorf("Describe() = %q", got)
	}
}

func TestNewBusyError(t *testing.T) {
	for _, c := range []int{0, -1} {
		_, err := NewBusy(c, t0)
		wantErr(t, "capacity", err, "capacity")
	}
}

// TestBusyConcurrent starts 4000 requests at t0 from four goroutines and
// ends them all at t0+1s from four others: 4000 server-seconds whatever the
// interleaving, so capacity 4000 over 2 s reads 0.5.
func TestBusyConcurrent(t *testing.T) {
	const workers, per = 4, 1000
	b, err := NewBusy(workers*per, t0)
	if err != nil {
		t.Fatal(err)
	}
	run := func(f func()) {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range per {
					f()
				}
			})
		}
		wg.Wait()
	}
	run(func() { b.Begin(t0) })
	if b.InFlight() != workers*per {
		t.Fatalf("InFlight() = %d, want %d", b.InFlight(), workers*per)
	}
	run(func() { b.End(t0.Add(time.Second)) })
	if b.InFlight() != 0 {
		t.Errorf("InFlight() = %d after balanced calls", b.InFlight())
	}
	wantUtilization(t, "after balanced calls", b, t0.Add(2*time.Second), 0.5)
}

func TestReported(t *testing.T) {
	r := NewReported("backend-a")
	_, err := r.Utilization(t0)
	if err == nil || err.Error() != "monitor: no value reported yet by backend-a" {
		t.Fatalf("before any report: err = %v", err)
	}
	for _, bad := range []float64{math.NaN(), -0.1, 1.1, math.Inf(1)} {
		wantErr(t, "bad report", r.Report(bad), "backend-a", "outside [0, 1]")
	}
	if _, err := r.Utilization(t0); err == nil {
		t.Fatal("rejected reports must not count as reports")
	}
	steps := []struct {
		reports []float64
		want    float64
	}{
		{[]float64{0.2, 0.4}, 0.3},
		{nil, 0.4}, // none in the interval: the last value
		{[]float64{1, 0, 0.5}, 0.5},
		{[]float64{0.9}, 0.9},
		{nil, 0.9},
	}
	for i, s := range steps {
		for _, v := range s.reports {
			if err := r.Report(v); err != nil {
				t.Fatal(err)
			}
		}
		got, err := r.Utilization(t0)
		if err != nil || !near(got, s.want) {
			t.Errorf("step %d: Utilization = %v, %v; want %v", i, got, err, s.want)
		}
	}
	if r.Describe() != "reported by backend-a" {
		t.Errorf("Describe() = %q", r.Describe())
	}
}
