// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

type fakeCounter struct{ n atomic.Uint64 }

func (f *fakeCounter) BytesWritten() uint64 { return f.n.Load() }

func TestNewBandwidthValidates(t *testing.T) {
	for _, c := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		_, err := NewBandwidth(&fakeCounter{}, c, qt0)
		wantErr(t, "NewBandwidth", err, "outgoing bandwidth sensor", "capacity")
	}
	_, err := NewBandwidth(nil, 1, qt0)
	wantErr(t, "NewBandwidth(nil)", err, "no byte counter")
}

func TestBandwidthMeasure(t *testing.T) {
	f := &fakeCounter{}
	f.n.Store(1_000_000)          // bytes written before the sensor started are not counted
	const capacity = 12_500_000.0 // 100 Mbit/s
	b, err := NewBandwidth(f, capacity, qt0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		add     uint64
		set     int64 // ≥ 0: set the counter to this value instead
		at      time.Duration
		want    BandwidthReading
		errFrag string
	}{
		{add: 6_250_000, set: -1, at: time.Second, want: BandwidthReading{Elapsed: time.Second, Bytes: 6_250_000, BytesPerSecond: 6_250_000, Utilization: 0.5}},
		{add: 0, set: -1, at: 1500 * time.Millisecond, want: BandwidthReading{Elapsed: 500 * time.Millisecond}},
		{add: 25_000_000, set: -1, at: 2500 * time.Millisecond, want: BandwidthReading{Elapsed: time.Second, Bytes: 25_000_000, BytesPerSecond: 25_000_000, Utilization: 2}},
		{add: 5, set: -1, at: 2500 * time.Millisecond, errFrag: "no time elapsed"},
		// The 5 bytes of the refused reading are kept for the next one.
		{add: 0, set: -1, at: 3500 * time.Millisecond, want: BandwidthReading{Elapsed: time.Second, Bytes: 5, BytesPerSecond: 5, Utilization: 5 / capacity}},
		{set: 10, at: 4 * time.Second, errFrag: "went back"},
		{add: 1250, set: -1, at: 5 * time.Second, want: BandwidthReading{Elapsed: time.Second, Bytes: 1250, BytesPerSecond: 1250, Utilization: 1250 / capacity}},
	}
	for i, s := range steps {
		if s.set >= 0 {
			f.n.Store(uint64(s.set))
		} else {
			f.n.Add(s.add)
		}
		got, err := b.Measure(qt0.Add(s.at))
		if s.errFrag != "" {
			wantErr(t, "Measure", err, "outgoing bandwidth sensor", s.errFrag)
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got != s.want {
			t.Errorf("step %d: Measure = %+v, want %+v", i, got, s.want)
		}
	}
}

func TestBandwidthUtilizationClamps(t *testing.T) {
	f := &fakeCounter{}
	b, err := NewBandwidth(f, 1000, qt0)
	if err != nil {
		t.Fatal(err)
	}
	f.n.Add(3000)
	if u, err := b.Utilization(qt0.Add(time.Second)); err != nil || u != 1 {
		t.Errorf("Utilization at 3x capacity = %v, %v; want 1 (clamped)", u, err)
	}
	f.n.Add(250)
	if u, err := b.Utilization(qt0.Add(2 * time.Second)); err != nil || u != 0.25 {
		t.Errorf("Utilization = %v, %v; want 0.25", u, err)
	}
	u, err := b.Utilization(qt0.Add(2 * time.Second))
	if !errors.Is(err, ErrNoTimeElapsed) || !math.IsNaN(u) {
		t.Errorf("Utilization over no time = %v, %v; want NaN and ErrNoTimeElapsed", u, err)
	}
	if d := b.Describe(); d != "outgoing bandwidth vs 1000 bytes/s" {
		t.Errorf("Describe = %q", d)
	}
}
