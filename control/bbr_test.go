// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// tb returns t0 + k buckets of 100 ms.
func tb(k int) time.Time { return t0.Add(time.Duration(k) * 100 * time.Millisecond) }

// bucket is a 100 ms step with done completions of mean service time rt
// (seconds; NaN: no samples), CPU util and rejected gate refusals.
func bucket(done, rt, util, rejected float64) sluice.Measurements {
	n := done
	if rt != rt {
		n = 0
	}
	return sluice.Measurements{Elapsed: 100 * time.Millisecond, Completed: done, ServiceSamples: n, ServiceMean: rt,
		Utilization: util, Rejected: rejected, InFlight: 3, MaxInFlight: 6}
}

func newBBR(t *testing.T, edit func(*BBRConfig)) *BBR {
	t.Helper()
	cfg := DefaultBBRConfig()
	cfg.CPUDecay = 0 // the tests below read the CPU condition directly
	return build(t, cfg, edit, NewBBR)
}

// bbrStep is one Update: the measurements, then the limit and whether the
// gate is expected off.
type bbrStep struct {
	m       sluice.Measurements
	want    float64
	gateOff bool
}

func runBBR(t *testing.T, b *BBR, from int, steps []bbrStep) {
	t.Helper()
	for i, s := range steps {
		d := b.Update(tb(from+i), s.m)
		if d.New != s.want || d.GateOff != s.gateOff || d.MaxWait != -1 {
			t.Fatalf("step %d: limit %v gate off %v, want %v %v (%s)", from+i, d.New, d.GateOff, s.want, s.gateOff, d.Reason)
		}
	}
}

// maxInFlight = ⌊maxPass·minRT·10⌋ over the buckets, limit =
// max(maxInFlight, 1) + 1; without a CPU sensor shedding is always on.
func TestBBRMaxInFlight(t *testing.T) {
	b := newBBR(t, nil)
	runBBR(t, b, 1, []bbrStep{
		{bucket(10, 0.05, nan(), 0), 6, false},   // 10·0.05·10 = 5
		{bucket(20, 0.08, nan(), 0), 11, false},  // 20·0.05·10 = 10
		{bucket(5, 0.02, nan(), 0), 5, false},    // 20·0.02·10 = 4
		{bucket(0, nan(), nan(), 0), 5, false},   // empty bucket changes nothing
		{bucket(3, 0.001, nan(), 0), 2, false},   // 20·0.001·10 = 0.2 → 0: still admit 1
		{bucket(3, 0.0012, nan(), 0), 2, false},  // minRT stays 0.001
		{bucket(40, 0.0012, nan(), 0), 2, false}, // 40·0.001·10 = 0.4 → 0
	})
	// The floor, as aegis v0.2.0 computes it: ⌊7·0.036·10⌋ = ⌊2.52⌋ = 2
	// (rounding would give 3), ⌊7·0.043·10⌋ = ⌊3.01⌋ = 3.
	for _, tc := range []struct{ rt, want float64 }{{0.035, 3}, {0.036, 3}, {0.042, 3}, {0.043, 4}} {
		b := newBBR(t, nil)
		if d := b.Update(tb(1), bucket(7, tc.rt, nan(), 0)); d.New != tc.want {
			t.Fatalf("rt %v: limit %v, want %v", tc.rt, d.New, tc.want)
		}
	}
	// A late step's completions are spread over its length: 100 in 1 s is
	// 10 per bucket; 10·0.05·10 = 5.
	b = newBBR(t, nil)
	m := bucket(100, 0.05, nan(), 0)
	m.Elapsed = time.Second
	if d := b.Update(tb(10), m); d.New != 6 {
		t.Fatalf("late step: limit %v, want 6 (%s)", d.New, d.Reason)
	}
	// maxPass is at least 1, as in aegis: one completion in 2 s (0.05 per
	// bucket) of 0.5 s gives ⌊1·0.5·10⌋ = 5.
	b = newBBR(t, nil)
	m = bucket(1, 0.5, nan(), 0)
	m.Elapsed = 2 * time.Second
	if d := b.Update(tb(20), m); d.New != 6 {
		t.Fatalf("maxPass floor: limit %v, want 6 (%s)", d.New, d.Reason)
	}
}

// A bucket counts for 10 s: at 10.0 s the bucket that closed at 0.1 s
// still sets maxPass and minRT, at 10.1 s it is gone.
func TestBBRWindowExpiry(t *testing.T) {
	b := newBBR(t, nil)
	runBBR(t, b, 1, []bbrStep{{bucket(50, 0.01, nan(), 0), 6, false}}) // 50·0.01·10 = 5
	for k := 2; k <= 100; k++ {
		d := b.Update(tb(k), bucket(10, 0.04, nan(), 0))
		if d.New != 6 {
			t.Fatalf("bucket %d: limit %v, want 6 while the first bucket is in the window (%s)", k, d.New, d.Reason)
		}
	}
	if len(b.buckets) != 100 {
		t.Fatalf("%d buckets in a 10 s window of 100 ms buckets", len(b.buckets))
	}
	runBBR(t, b, 101, []bbrStep{{bucket(10, 0.04, nan(), 0), 5, false}}) // 10·0.04·10 = 4
	// After 10 s without samples there is no estimate: gate off, held.
	b = newBBR(t, nil)
	b.Update(tb(1), bucket(10, 0.04, nan(), 0))
	d := b.Update(tb(101), bucket(0, nan(), nan(), 0))
	if !d.GateOff || d.Acted || d.New != 5 {
		t.Fatalf("after expiry: %+v", d)
	}
}

// Shedding is on only while CPU ≥ cpu_threshold, or within 1 s of the last
// drop made while the CPU was hot. The drop time is refreshed by every hot
// drop (aegis keeps the first one, so after 3 s of overload its cool-down
// has lapsed when the CPU dips); drops made in the cool-down do not extend
// it, and rejections while the gate was off are not drops.
func TestBBRCPUAndCoolDown(t *testing.T) {
	b := newBBR(t, nil)
	runBBR(t, b, 1, []bbrStep{
		{bucket(10, 0.04, 0.5, 0), 5, true},  // estimate 4 → limit 5, CPU cold: off
		{bucket(10, 0.04, 0.5, 9), 5, true},  // rejections with the gate off: not drops
		{bucket(10, 0.04, 0.79, 0), 5, true}, // below 0.8: off
		{bucket(10, 0.04, 0.8, 0), 5, false}, // at the threshold: shedding
		{bucket(10, 0.04, 0.5, 0), 5, true},  // no drop happened: off at once
		{bucket(10, 0.04, 0.9, 0), 5, false}, // hot again
	})
	// 3 s of overload with drops in every bucket (steps 7–36).
	for k := 7; k <= 36; k++ {
		runBBR(t, b, k, []bbrStep{{bucket(10, 0.04, 0.9, 5), 5, false}})
	}
	// CPU dips at step 37; the drops seen there happened under the hot
	// decision of step 36, so the cool-down runs 1 s from step 37 (3.7 s).
	for k := 37; k <= 47; k++ {
		d := b.Update(tb(k), bucket(10, 0.04, 0.5, 5))
		if d.GateOff {
			t.Fatalf("step %d: gate off %s after the last hot drop (%s)", k, tb(k).Sub(tb(37)), d.Reason)
		}
		if !strings.Contains(d.Reason, "cool-down") {
			t.Fatalf("step %d: reason does not mention the cool-down: %s", k, d.Reason)
		}
	}
	runBBR(t, b, 48, []bbrStep{{bucket(10, 0.04, 0.5, 5), 5, true}}) // 1.1 s: cool-down over
}

// NaN utilization (no sensor) and cpu_threshold 0 both mean "CPU
// condition met"; the reason says which.
func TestBBRNoCPUSensor(t *testing.T) {
	b := newBBR(t, nil)
	d := b.Update(tb(1), bucket(10, 0.04, nan(), 0))
	if d.GateOff || !strings.Contains(d.Reason, "no CPU reading") {
		t.Fatalf("NaN CPU: %+v", d)
	}
	b = newBBR(t, func(c *BBRConfig) { c.CPUThreshold = 0 })
	d = b.Update(tb(1), bucket(10, 0.04, 0.01, 0))
	if d.GateOff || !strings.Contains(d.Reason, "always") {
		t.Fatalf("cpu_threshold 0: %+v", d)
	}
	// Without samples there is nothing to shed by, sensor or not.
	b = newBBR(t, nil)
	d = b.Update(tb(1), bucket(10, nan(), nan(), 0))
	if !d.GateOff || d.Acted || d.New != 2 {
		t.Fatalf("no samples: %+v", d)
	}
}

// cpu_decay 0.95 per 500 ms, from 0 as in aegis: one 100 ms bucket at
// full CPU gives 1 − 0.95^0.2 = 0.010206; a 500 ms one after it
// 0.010206·0.95 + 0.05 = 0.059696. A NaN reading leaves it alone.
func TestBBRCPUSmoothing(t *testing.T) {
	b := newBBR(t, func(c *BBRConfig) { c.CPUDecay = 0.95 })
	b.Update(tb(1), bucket(10, 0.04, 1, 0))
	near(t, "100 ms", b.CPU(), 0.010206218)
	m := bucket(10, 0.04, 1, 0)
	m.Elapsed = 500 * time.Millisecond
	b.Update(tb(6), m)
	near(t, "500 ms", b.CPU(), 0.059695907)
	b.Update(tb(7), bucket(10, 0.04, nan(), 0))
	near(t, "NaN", b.CPU(), 0.059695907)
}

// From the same history, a hotter CPU never loosens the gate.
func TestBBRMonotoneInCPU(t *testing.T) {
	utils := []float64{0, 0.3, 0.79, 0.8, 0.95, 1}
	for trial := 0; trial < 50; trial++ {
		var hist []sluice.Measurements
		for k := 0; k < trial; k++ {
			hist = append(hist, bucket(float64(5+k%7), 0.01*float64(1+k%5), utils[(k*7+trial)%len(utils)], float64(k%3)))
		}
		var prev sluice.Decision
		for i, u := range utils {
			b := newBBR(t, nil)
			for k, m := range hist {
				b.Update(tb(k+1), m)
			}
			d := b.Update(tb(trial+1), bucket(8, 0.03, u, 0))
			if i > 0 && !tighter(d, prev) {
				t.Fatalf("trial %d: CPU %v gave a looser gate than %v: %+v vs %+v", trial, u, utils[i-1], d, prev)
			}
			prev = d
		}
	}
}

func TestBBRValidateNamesField(t *testing.T) {
	checkFieldErrors(t, DefaultBBRConfig, []fieldCase[BBRConfig]{
		{Field: "period", Edit: func(c *BBRConfig) { c.Period = 0 }},
		{Field: "window", Edit: func(c *BBRConfig) { c.Window = 50 * time.Millisecond }},
		{Field: "cpu_threshold", Edit: func(c *BBRConfig) { c.CPUThreshold = 80 }},
		{Field: "cpu_threshold", Edit: func(c *BBRConfig) { c.CPUThreshold = nan() }},
		{Field: "cpu_decay", Edit: func(c *BBRConfig) { c.CPUDecay = 1 }},
	})
}

func FuzzBBR(f *testing.F) { fuzzController(f, "bbr") }

// Without a CPU sensor BBR sheds on Little's law alone: at best 10
// completions per 100 ms bucket with a 40 ms service time, the service
// holds ⌊10·0.04·10⌋ = 4 in flight, so a fifth is rejected.
func ExampleBBR() {
	c, err := NewBBR(DefaultBBRConfig())
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := sluice.Measurements{Elapsed: 100 * time.Millisecond, Completed: 10, ServiceSamples: 10, ServiceMean: 0.04,
		Utilization: math.NaN()}
	d := c.Update(now, m)
	fmt.Println(d.New, d.GateOff)
	fmt.Println(d.Reason)
	// Output:
	// 5 false
	// no CPU reading (sensor not bound): CPU condition taken as met: shedding, maxInFlight ⌊maxPass 10 × minRT 40ms × 10/s⌋ = 4: admit while in service ≤ 4 (limit 5)
}
