// SPDX-License-Identifier: Apache-2.0

package control

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func cpu(util, hits float64) sluice.Measurements {
	return sluice.Measurements{Utilization: util, Arrivals: hits}
}

// util_ref 90 %, Kp 1/5, initial rate 100, min 10.
func TestVoigtCPUTimeline(t *testing.T) {
	v := build(t, DefaultVoigtCPUConfig(), nil, NewVoigtCPU)
	runTimeline(t, v, []step{
		// e = 90 − 95 = −5: 100 + 0.2·(−5) = 99
		{cpu(0.95, 100), 99, true},
		// hits guard: 50 < 0.9·99 = 89.1 and 60 % < 90 %: kept
		{cpu(0.60, 50), 99, false},
		// 95 ≥ 89.1: 99 + 0.2·30 = 105
		{cpu(0.60, 95), 105, true},
		// util ≥ ref: guard does not apply even with few hits: 105 − 1 = 104
		{cpu(0.95, 10), 104, true},
		// hits are per second of the interval: 150 in 2 s = 75/s < 93.6 → kept
		{sluice.Measurements{Elapsed: 2 * time.Second, Utilization: 0.5, Arrivals: 150}, 104, false},
		// NaN utilization: hold
		{cpu(nan(), 100), 104, false},
	})
}

// The rate never goes below min_rate: from 10.5 at 100 % CPU, 10.5 − 2 = 8.5 → 10.
func TestVoigtCPUMinRate(t *testing.T) {
	cfg := DefaultVoigtCPUConfig()
	cfg.InitialRate = 10.5
	v, _ := NewVoigtCPU(cfg)
	runTimeline(t, v, []step{{cpu(1, 100), 10, true}, {cpu(1, 100), 10, true}})
}

func queue(q float64) sluice.Measurements {
	return sluice.Measurements{Queue: q, Utilization: nan()}
}

// Connection policer: q_ref 100, Kp 1/16, Kd 1/4, initial 1000/s.
func TestVoigtQueueTimeline(t *testing.T) {
	v := build(t, DefaultVoigtQueueConfig(), nil, NewVoigtQueue)
	runTimeline(t, v, []step{
		// q = 0 = q(−1) < q_ref: unchanged-queue guard
		{queue(0), 1000, false},
		// P = (100 − 300)/16 = −12.5; D = −(300 − 0)/4 = −75 → 912.5
		{queue(300), 912.5, true},
		// P = −25; D = −(500 − 300)/4 = −50 → 837.5
		{queue(500), 837.5, true},
		// q ≥ q_ref, unchanged: the guard does not apply: P = −25 → 812.5
		{queue(500), 812.5, true},
		// P = 50/16 = 3.125; D = −(50 − 500)/4 = +112.5 → 928.125
		{queue(50), 928.125, true},
		// P = 3.75; D = +2.5: would rise, but CPU 95 % ≥ 90 %: kept
		{sluice.Measurements{Queue: 40, Utilization: 0.95}, 928.125, false},
		// q = 40 = q(t−1) < q_ref: unchanged guard
		{sluice.Measurements{Queue: 40, Utilization: 0.5}, 928.125, false},
		// P = 70/16 = 4.375; D = +2.5; CPU 50 % → 934.999…: 928.125 + 6.875 = 935
		{sluice.Measurements{Queue: 30, Utilization: 0.5}, 935, true},
		// a falling rate is allowed at high CPU: P = −6.25, D = −42.5 → 886.25
		{sluice.Measurements{Queue: 200, Utilization: 0.99}, 886.25, true},
	})
}

// Erratum (docs/algorithms.md §1): the derivative term has a minus sign.
// With the paper's printed plus sign, a queue jumping from 0 to 300 would
// give 1000 − 12.5 + 75 = 1062.5, raising the rate while the queue builds.
func TestVoigtQueueDerivativeSignErratum(t *testing.T) {
	v, _ := NewVoigtQueue(DefaultVoigtQueueConfig())
	d := v.Update(at(1), queue(300))
	if d.New >= 1000 {
		t.Fatalf("rate rose to %v while the queue grew", d.New)
	}
	near(t, "rate", d.New, 912.5)
}

// The unchanged-queue guard is the one designed exception to monotonicity
// (a queue that moved from 0 to 1 may raise the rate while one that stayed
// at 0 holds it); pin it explicitly.
func TestVoigtQueueUnchangedGuard(t *testing.T) {
	a, _ := NewVoigtQueue(DefaultVoigtQueueConfig())
	b, _ := NewVoigtQueue(DefaultVoigtQueueConfig())
	same := a.Update(at(1), queue(0))
	moved := b.Update(at(1), queue(1))
	if same.Acted || same.New != 1000 {
		t.Fatalf("unchanged queue should hold: %+v", same)
	}
	// P = 99/16 = 6.1875; D = −1/4 → 1005.9375
	near(t, "moved", moved.New, 1005.9375)
}

func TestVoigtQueueBandwidth(t *testing.T) {
	cfg := DefaultVoigtQueueConfig()
	cfg.QRef, cfg.InitialRate = 35, 200
	v, _ := NewVoigtQueue(cfg)
	// Outgoing queue normalised to 100: q = 80: P = −45/16 = −2.8125, D = −20 → 177.1875
	runTimeline(t, v, []step{{queue(80), 177.1875, true}})
}
