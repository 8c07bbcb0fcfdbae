// SPDX-License-Identifier: Apache-2.0

package peers

import (
	"math"
	"runtime/metrics"
	"testing"

	"github.com/sluicehq/sluice/lab/internal/testclock"
)

var t0, ms = testclock.T0, testclock.Ms

// The queue's signal: the period's largest wait or the oldest waiter's
// age, the mean wait of those that began, and how many began.
func TestQueueMeter(t *testing.T) {
	var q QueueMeter
	q.Arrive(t0, 1)
	q.Arrive(t0.Add(ms(2)), 2)
	q.Arrive(t0.Add(ms(3)), 3)
	q.Begin(t0.Add(ms(4)), 1) // waited 4 ms
	q.Begin(t0.Add(ms(8)), 2) // waited 6 ms
	q.Begin(t0.Add(ms(8)), 7) // unknown: ignored
	if s := q.Read(t0.Add(ms(10))); s.Delay != ms(7) || s.Mean != ms(5) || s.Began != 2 {
		t.Fatalf("period 1: %+v, want delay 7 ms (3 waits since 3 ms), mean 5 ms, 2 began", s)
	}
	q.Leave(3)
	if s := q.Read(t0.Add(ms(20))); s != (Signal{}) {
		t.Fatalf("empty period: %+v", s)
	}
	q.Arrive(t0.Add(ms(21)), 3) // an id may come back
	if age := q.Oldest(t0.Add(ms(30))); age != ms(9) {
		t.Fatalf("oldest %s", age)
	}
	q.Begin(t0.Add(ms(31)), 3)
	if s := q.Read(t0.Add(ms(40))); s.Delay != ms(10) || s.Began != 1 || q.Waiting() != 0 {
		t.Fatalf("period 3: %+v", s)
	}
}

// The scheduler latency's signal is the lower bound of the highest bucket
// that grew, as the ports read it.
func TestSchedDelta(t *testing.T) {
	h := &metrics.Float64Histogram{Buckets: []float64{math.Inf(-1), 0, 0.001, 0.01, math.Inf(1)},
		Counts: []uint64{0, 5, 3, 1}}
	s := schedDelta([]uint64{0, 2, 3, 0}, h)
	// grown: bucket [0, 1 ms) by 3, [10 ms, ∞) by 1.
	if s.Delay != ms(10) || s.Began != 4 || s.Mean != ms(2.5) {
		t.Fatalf("%+v, want delay 10 ms, 4 waits, mean (3·0 + 1·10 ms)/4", s)
	}
	var sl SchedLatency
	calls := 0
	sl.read = func() *metrics.Float64Histogram {
		calls++
		if calls == 1 {
			return &metrics.Float64Histogram{Buckets: h.Buckets, Counts: []uint64{0, 2, 3, 0}}
		}
		return h
	}
	if s := sl.Read(); s != (Signal{}) {
		t.Fatalf("first read (a baseline): %+v", s)
	}
	if s := sl.Read(); s.Delay != ms(10) {
		t.Fatalf("second read: %+v", s)
	}
	var live SchedLatency
	live.Read()
	if s := live.Read(); s.Delay < 0 || s.Began < 0 {
		t.Fatalf("runtime read: %+v", s)
	}
}
