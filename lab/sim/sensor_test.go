// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/monitor"
)

// TestBusyByHand: one job of 1 s on one of two servers is a utilization
// of 0.5 over the first second and 0 over the next; an empty interval is
// ErrNoTimeElapsed and keeps the previous reading.
func TestBusyByHand(t *testing.T) {
	e := New(1)
	f, _ := NewFIFO(e, FIFOConfig{Servers: 2})
	b, err := NewBusy(e, f.Busy, "pool")
	if err != nil {
		t.Fatal(err)
	}
	f.Submit(&Job{Work: 1})
	var got []float64
	if _, err := e.Every(time.Second, func() {
		u, err := b.Utilization(e.Time())
		if err != nil {
			t.Error(err)
		}
		got = append(got, u)
		if _, err := b.Utilization(e.Time()); !errors.Is(err, monitor.ErrNoTimeElapsed) {
			t.Errorf("second reading at the same instant: err %v, want ErrNoTimeElapsed", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	e.Run(2 * time.Second)
	if len(got) != 2 || math.Abs(got[0]-0.5) > 1e-12 || got[1] != 0 {
		t.Errorf("utilization per second %v, want [0.5 0]", got)
	}
	if b.Describe() == "" {
		t.Error("empty description")
	}
	if _, err := NewBusy(e, nil, "x"); err == nil {
		t.Error("nil busy function accepted")
	}
}

// TestSamplerPeriods: a gauge equal to the virtual time in seconds, read
// 4 times a second, averages 0.625 over the first second (readings at
// 0.25, 0.5, 0.75 and 1 s, the last one taken by Mean although the
// reader's event at 1 s comes first) and 1.625 over the second; without a
// reading since the last Mean, Mean reads the gauge once.
func TestSamplerPeriods(t *testing.T) {
	e := New(1)
	var means []float64
	var s *Sampler
	// The reader is scheduled before the sampler: at 1 s and 2 s it runs
	// first, and Mean must take the reading due then itself.
	if _, err := e.Every(time.Second, func() { means = append(means, s.Mean()) }); err != nil {
		t.Fatal(err)
	}
	s, err := NewSampler(e, 250*time.Millisecond, func() float64 { return e.Now().Seconds() })
	if err != nil {
		t.Fatal(err)
	}
	e.Run(2 * time.Second)
	if len(means) != 2 || math.Abs(means[0]-0.625) > 1e-12 || math.Abs(means[1]-1.625) > 1e-12 {
		t.Errorf("means %v, want [0.625 1.625]", means)
	}
	e.Run(2100 * time.Millisecond)
	s.Stop()
	e.Run(3 * time.Second)
	if m := s.Mean(); math.Abs(m-3) > 1e-12 {
		t.Errorf("Mean with no reading since the last one = %v, want the gauge now (3)", m)
	}
}
