// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ByteCounter is a monotonic count of bytes sent, such as
// policer.Registry.BytesWritten: the bytes written to every tracked client
// connection, including connections since closed.
type ByteCounter interface {
	BytesWritten() uint64
}

// BandwidthReading is the outgoing bandwidth over one interval.
type BandwidthReading struct {
	// Elapsed is the length of the interval.
	Elapsed time.Duration
	// Bytes is the number of bytes written in the interval.
	Bytes uint64
	// BytesPerSecond = Bytes / Elapsed.
	BytesPerSecond float64
	// Utilization = BytesPerSecond / the configured link capacity. Not
	// clamped: above 1 when more was written than the configured capacity
	// (loopback clients, or a capacity set too low).
	Utilization float64
}

// Bandwidth measures the outgoing bytes per second against a configured
// link capacity, from a ByteCounter read at the ends of each interval:
//
//	BytesPerSecond = (bytes(t) − bytes(t_prev)) / (t − t_prev)
//	Utilization    = BytesPerSecond / capacity
//
// What is counted: the bytes the server handed to the kernel (each Write,
// and each sendfile/splice of a policer.Conn), at the moment they are
// handed over. Over an interval this differs from the bytes that left the
// host by the change in the sockets' send queues, which the outgoing-queue
// sensor (OutQueue) measures, and which is bounded by the send buffers;
// over a control period of a second it is a small error, and unlike
// per-socket TCP_INFO bytes_acked deltas it costs one atomic add per write,
// needs no system call per socket and includes connections that closed
// during the interval.
//
// Bandwidth implements UtilizationSource (Utilization clamps to [0, 1]);
// Measure returns the unclamped reading with the byte rate. Both advance
// the same baseline: a runner uses one of them per period. The zero value
// is not usable; use NewBandwidth. Bandwidth is safe for concurrent use.
type Bandwidth struct {
	src      ByteCounter
	capacity float64 // bytes per second

	mu        sync.Mutex
	last      time.Time
	lastBytes uint64
}

// NewBandwidth returns a sensor of the bytes counted by src against a link
// of capacity bytes per second (finite, > 0), taking its first reading at
// now.
func NewBandwidth(src ByteCounter, capacity float64, now time.Time) (*Bandwidth, error) {
	if src == nil {
		return nil, errors.New("monitor: outgoing bandwidth sensor: no byte counter")
	}
	if math.IsNaN(capacity) || math.IsInf(capacity, 0) || capacity <= 0 {
		return nil, fmt.Errorf("monitor: outgoing bandwidth sensor: link capacity %v bytes/s is invalid: must be a finite number > 0", capacity)
	}
	return &Bandwidth{src: src, capacity: capacity, last: now, lastBytes: src.BytesWritten()}, nil
}

// Capacity returns the configured link capacity in bytes per second.
func (b *Bandwidth) Capacity() float64 { return b.capacity }

// Measure returns the bandwidth since the previous reading and makes now
// the next baseline. If now is not after the previous reading it returns
// ErrNoTimeElapsed (wrapped) and keeps the baseline. If the counter went
// backwards (it was replaced or reset), it re-baselines at now and returns
// an error saying so.
func (b *Bandwidth) Measure(now time.Time) (BandwidthReading, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	elapsed := now.Sub(b.last)
	if elapsed <= 0 {
		return BandwidthReading{}, fmt.Errorf("monitor: outgoing bandwidth sensor: %w (last reading %s, now %s)",
			ErrNoTimeElapsed, b.last.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	}
	cur := b.src.BytesWritten()
	prev := b.lastBytes
	b.last, b.lastBytes = now, cur
	if cur < prev {
		return BandwidthReading{}, fmt.Errorf("monitor: outgoing bandwidth sensor: byte counter went back from %d to %d; re-baselined", prev, cur)
	}
	r := BandwidthReading{Elapsed: elapsed, Bytes: cur - prev}
	r.BytesPerSecond = float64(r.Bytes) / elapsed.Seconds()
	r.Utilization = r.BytesPerSecond / b.capacity
	return r, nil
}

// Utilization returns Measure's utilization clamped to [0, 1], as a
// UtilizationSource.
func (b *Bandwidth) Utilization(now time.Time) (float64, error) {
	r, err := b.Measure(now)
	if err != nil {
		return math.NaN(), err
	}
	return clamp01(r.Utilization), nil
}

// Describe returns a short description for logs and the admin API.
func (b *Bandwidth) Describe() string {
	return fmt.Sprintf("outgoing bandwidth vs %g bytes/s", b.capacity)
}

var _ UtilizationSource = (*Bandwidth)(nil)
