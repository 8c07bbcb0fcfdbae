// SPDX-License-Identifier: Apache-2.0

package peers

import (
	"math"
	"runtime/metrics"
	"time"
)

// QueueMeter measures a service's queueing delay from its own queue: a
// request arrives (Arrive), begins service (Begin) or leaves without
// being served (Leave), and Read returns the period's Signal. It is the
// signal of the papers (Breakwater: the oldest request's queueing delay;
// DAGOR: the mean queueing time; Rajomon: the largest one of the period)
// measured where the queue is. The simulator feeds it from its stations;
// live, the server interceptor feeds it when the handler marks the start
// of its work (Begin on the call's context).
//
// Times are the caller's now; the zero value is ready to use. Ids must be
// unique among the requests present. Not safe for concurrent use.
type QueueMeter struct {
	waiting map[uint64]time.Time
	order   []queued // arrival order; entries whose id left are skipped
	head    int
	// the period's requests that began service
	maxWait time.Duration
	sumWait time.Duration
	began   int
}

type queued struct {
	id uint64
	at time.Time
}

// Arrive records request id as waiting from now.
func (q *QueueMeter) Arrive(now time.Time, id uint64) {
	if q.waiting == nil {
		q.waiting = make(map[uint64]time.Time)
	}
	q.waiting[id] = now
	q.order = append(q.order, queued{id: id, at: now})
}

// Begin records that request id began service now; its wait counts in
// the period. It is a no-op for an id that is not waiting.
func (q *QueueMeter) Begin(now time.Time, id uint64) {
	at, ok := q.waiting[id]
	if !ok {
		return
	}
	delete(q.waiting, id)
	w := max(now.Sub(at), 0)
	q.maxWait = max(q.maxWait, w)
	q.sumWait += w
	q.began++
}

// Leave forgets request id, which leaves without service (canceled
// while it waited).
func (q *QueueMeter) Leave(id uint64) { delete(q.waiting, id) }

// Waiting returns how many requests wait.
func (q *QueueMeter) Waiting() int { return len(q.waiting) }

// Oldest returns the age of the oldest waiting request at now (0 if none
// waits): the queueing delay of Breakwater's runtime_queue_us.
func (q *QueueMeter) Oldest(now time.Time) time.Duration {
	for q.head < len(q.order) {
		e := q.order[q.head]
		if at, ok := q.waiting[e.id]; ok && at.Equal(e.at) {
			return max(now.Sub(e.at), 0)
		}
		q.order[q.head] = queued{}
		q.head++
	}
	q.order, q.head = q.order[:0], 0
	return 0
}

// Read returns the period's signal and starts the next period.
func (q *QueueMeter) Read(now time.Time) Signal {
	s := Signal{Delay: max(q.maxWait, q.Oldest(now)), Began: q.began}
	if q.began > 0 {
		s.Mean = q.sumWait / time.Duration(q.began)
	}
	if q.head > 1024 && q.head*2 > len(q.order) {
		n := copy(q.order, q.order[q.head:])
		q.order, q.head = q.order[:n], 0
	}
	q.maxWait, q.sumWait, q.began = 0, 0, 0
	return s
}

// SchedLatencyMetric is the Go runtime metric the public ports read: the
// time goroutines spent runnable before running, a process-wide
// histogram.
const SchedLatencyMetric = "/sched/latencies:seconds"

// SchedLatency reads the Go scheduler's latency, the signal of the public
// gRPC ports of Breakwater, DAGOR and Rajomon, as a Signal per period:
// Delay is the lower bound of the highest bucket that grew since the last
// read (what the ports compare with their thresholds: the largest
// goroutine wait of the period), Mean the mean of the grown buckets'
// lower bounds weighted by their growth (DAGOR's mean, which its port
// replaces by the largest), Began the number of goroutine waits
// recorded. On a shared host it rises with any CPU contention: see
// docs/algorithms.md.
//
// The zero value is ready; the first Read only takes a baseline. Not safe
// for concurrent use.
type SchedLatency struct {
	prev []uint64
	read func() *metrics.Float64Histogram
}

// Read returns the signal since the last Read.
func (s *SchedLatency) Read() Signal {
	read := s.read
	if read == nil {
		read = readSched
	}
	h := read()
	if h == nil {
		return Signal{}
	}
	var sig Signal
	if s.prev != nil && len(s.prev) == len(h.Counts) {
		sig = schedDelta(s.prev, h)
	}
	s.prev = append(s.prev[:0], h.Counts...)
	return sig
}

// schedDelta is the signal of the growth from prev to h's counts.
func schedDelta(prev []uint64, h *metrics.Float64Histogram) Signal {
	var sig Signal
	var sum float64
	for i := len(h.Counts) - 1; i >= 0; i-- {
		if h.Counts[i] <= prev[i] {
			continue
		}
		grown := h.Counts[i] - prev[i]
		lo := h.Buckets[i]
		if math.IsInf(lo, -1) || lo < 0 {
			lo = 0
		}
		if sig.Began == 0 {
			sig.Delay = seconds(lo)
		}
		sig.Began += int(grown)
		sum += lo * float64(grown)
	}
	if sig.Began > 0 {
		sig.Mean = seconds(sum / float64(sig.Began))
	}
	return sig
}

func readSched() *metrics.Float64Histogram {
	sample := []metrics.Sample{{Name: SchedLatencyMetric}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return sample[0].Value.Float64Histogram()
}

// seconds converts s seconds to a Duration, saturating.
func seconds(s float64) time.Duration {
	if !(s > 0) {
		return 0
	}
	if s >= math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}
