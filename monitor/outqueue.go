// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
)

// SocketSet is a set of live client sockets, such as the connections a
// policer.Registry tracks. AppendSockets appends their raw connections to
// dst and returns the extended slice; it must be safe to call concurrently
// with connections opening and closing. A socket closed after the snapshot
// must make its RawConn's Control fail (as net's sockets do) rather than act
// on a reused descriptor.
type SocketSet interface {
	AppendSockets(dst []syscall.RawConn) []syscall.RawConn
}

// QueueReader reads the current length of an outgoing queue in bytes.
// SocketQueue is the real one; tests use fakes.
type QueueReader interface {
	QueuedBytes() (int64, error)
	Describe() string
}

// QueueMode says which bytes of a TCP socket's send queue count as queued.
type QueueMode string

const (
	// QueueUnsent counts the bytes written by the application that TCP
	// has not sent yet (Linux SIOCOUTQNSD; tcpi_notsent_bytes): the
	// backlog waiting in the host for the link and the client's window.
	// This is the default.
	QueueUnsent QueueMode = "unsent"
	// QueueUnacked counts every byte not yet acknowledged by the client,
	// sent or not (Linux SIOCOUTQ): the unsent backlog plus the bytes in
	// flight, which include what waits in the network interface's queue
	// (qdisc) after TCP has sent it, but also one bandwidth-delay product
	// per connection on a long path.
	QueueUnacked QueueMode = "unacked"
)

// Defaults of the outgoing-queue sensor.
const (
	// DefaultQueueScale is the normalised value of a full queue: the
	// paper's outgoing queue of capacity 100, on which the bandwidth rule's
	// q_ref is 35.
	DefaultQueueScale = 100.0
	// DefaultSamplesPerPeriod is the default number of samples averaged
	// per control period.
	DefaultSamplesPerPeriod = 20
	// MinSamplesPerPeriod is the smallest accepted SamplesPerPeriod
	// ("sampled many times per second and averaged").
	MinSamplesPerPeriod = 10
)

// OutQueueConfig configures the outgoing-queue sensor. Start from
// DefaultOutQueueConfig and set CapacityBytes.
type OutQueueConfig struct {
	// CapacityBytes is the number of queued bytes (summed over all client
	// sockets) that maps to Scale. Required; there is no default because it
	// depends on the link: a few hundred milliseconds of link capacity is a
	// reasonable start (for a 100 Mbit/s link, 125000 bytes per 10 ms).
	CapacityBytes int64 `yaml:"capacity_bytes" json:"capacity_bytes"`
	// Scale is the normalised value of CapacityBytes queued bytes (default
	// 100).
	Scale float64 `yaml:"scale" json:"scale"`
	// Period is the control period the samples are averaged over (default
	// 1s).
	Period time.Duration `yaml:"period" json:"period"`
	// SamplesPerPeriod is the number of samples taken per period (default
	// 20, at least 10); the sampler runs every Period/SamplesPerPeriod.
	SamplesPerPeriod int `yaml:"samples_per_period" json:"samples_per_period"`
	// Mode is "unsent" (default) or "unacked"; see QueueMode.
	Mode QueueMode `yaml:"mode" json:"mode"`
}

// DefaultOutQueueConfig returns the defaults: Scale 100, Period 1s,
// SamplesPerPeriod 20, Mode "unsent", and no capacity (CapacityBytes must
// be set).
func DefaultOutQueueConfig() OutQueueConfig {
	return OutQueueConfig{Scale: DefaultQueueScale, Period: time.Second, SamplesPerPeriod: DefaultSamplesPerPeriod, Mode: QueueUnsent}
}

// Validate reports the first invalid field, naming it and its value.
func (c OutQueueConfig) Validate() error {
	return fielderr.First(
		fielderr.If(c.CapacityBytes <= 0, "capacity_bytes", c.CapacityBytes, "must be > 0 (bytes that count as a full queue)"),
		fielderr.If(math.IsNaN(c.Scale) || math.IsInf(c.Scale, 0) || c.Scale <= 0, "scale", c.Scale, "must be a finite number > 0"),
		fielderr.If(c.Period <= 0, "period", c.Period, "must be > 0"),
		fielderr.If(c.SamplesPerPeriod < MinSamplesPerPeriod, "samples_per_period", c.SamplesPerPeriod,
			fmt.Sprintf("must be >= %d", MinSamplesPerPeriod)),
		fielderr.If(c.SampleInterval() < time.Millisecond, "samples_per_period", c.SamplesPerPeriod,
			fmt.Sprintf("period %v / %d is under 1ms", c.Period, c.SamplesPerPeriod)),
		fielderr.If(c.Mode != QueueUnsent && c.Mode != QueueUnacked, "mode", fmt.Sprintf("%q", c.Mode),
			fmt.Sprintf("must be %q or %q", QueueUnsent, QueueUnacked)),
	)
}

// SampleInterval returns Period / SamplesPerPeriod, the sampler's tick.
func (c OutQueueConfig) SampleInterval() time.Duration {
	if c.SamplesPerPeriod <= 0 {
		return 0
	}
	return c.Period / time.Duration(c.SamplesPerPeriod)
}

// OutQueueReading is one period of the outgoing-queue sensor.
type OutQueueReading struct {
	// Elapsed is the length of the period.
	Elapsed time.Duration
	// Queue is the mean queued bytes normalised to the configured scale:
	//
	//	Queue = Scale · MeanBytes / CapacityBytes
	//
	// It is normally within [0, Scale]; it is not clamped, so more than
	// CapacityBytes queued reads above Scale and the controller sees how
	// far over it is. This is what a runner puts in Measurements.Queue for
	// the bandwidth rule.
	Queue float64
	// MeanBytes and MaxBytes are the mean and the largest of the samples,
	// in bytes.
	MeanBytes float64
	MaxBytes  int64
	// Samples is the number of successful samples averaged; Failed the
	// number of samples that failed (not averaged).
	Samples, Failed int
}

// OutQueue averages samples of an outgoing queue over each control period:
// the bandwidth rule's sensor of Voigt and Gunningberg (docs/algorithms.md
// §1: the "queue to the network interface", of capacity 100, "sampled
// many times per second and averaged per period").
//
// A sampler calls Sample every SampleInterval (RunOutQueueSampler does, in
// its own goroutine); the control loop calls Collect once per period. The
// arithmetic is deterministic: Collect returns the mean of the samples
// taken since the previous Collect, normalised to Scale. OutQueue does not
// read the clock itself. It is safe for concurrent use.
type OutQueue struct {
	cfg    OutQueueConfig
	reader QueueReader

	mu      sync.Mutex
	last    time.Time
	sum     float64
	max     int64
	n       int
	failed  int
	lastErr error
}

// NewOutQueue validates cfg and returns a sensor reading r whose first
// period starts at now.
func NewOutQueue(cfg OutQueueConfig, r QueueReader, now time.Time) (*OutQueue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("monitor: outgoing queue sensor: %w", err)
	}
	if r == nil {
		return nil, errors.New("monitor: outgoing queue sensor: no queue reader")
	}
	return &OutQueue{cfg: cfg, reader: r, last: now}, nil
}

// Config returns the sensor's configuration.
func (q *OutQueue) Config() OutQueueConfig { return q.cfg }

// Sample reads the queue once and adds the reading to the current period.
// A failed read is counted (OutQueueReading.Failed), not averaged, and
// returned. now is the sampling instant; it is kept only to report errors.
func (q *OutQueue) Sample(now time.Time) error {
	b, err := q.reader.QueuedBytes()
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		q.failed++
		q.lastErr = fmt.Errorf("sample at %s: %w", now.Format(time.RFC3339Nano), err)
		return fmt.Errorf("monitor: outgoing queue sensor (%s): %w", q.reader.Describe(), q.lastErr)
	}
	q.sum += float64(b)
	q.max = max(q.max, b)
	q.n++
	return nil
}

// Collect ends the current period at now and returns its reading. If no
// sample succeeded in the period, it returns an error that says so (with
// the last sampling error, if any) and never a silent zero; the runner
// then reports the queue as unavailable (NaN) and the controller holds.
// The next period starts at now either way.
func (q *OutQueue) Collect(now time.Time) (OutQueueReading, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := OutQueueReading{Elapsed: max(now.Sub(q.last), 0), Samples: q.n, Failed: q.failed, MaxBytes: q.max}
	var err error
	if q.n == 0 {
		err = fmt.Errorf("monitor: outgoing queue sensor (%s): no successful sample in the %v period ending %s (%d failed)",
			q.reader.Describe(), r.Elapsed, now.Format(time.RFC3339Nano), q.failed)
		if q.lastErr != nil {
			err = fmt.Errorf("%w; last error: %w", err, q.lastErr)
		}
		r.Queue, r.MeanBytes = math.NaN(), math.NaN()
	} else {
		r.MeanBytes = q.sum / float64(q.n)
		r.Queue = q.cfg.Scale * r.MeanBytes / float64(q.cfg.CapacityBytes)
	}
	q.last, q.sum, q.max, q.n, q.failed, q.lastErr = now, 0, 0, 0, 0, nil
	return r, err
}

// Describe returns a short description for logs and the admin API.
func (q *OutQueue) Describe() string {
	return fmt.Sprintf("outgoing queue (%s), %d bytes = %g, %d samples per %v", q.reader.Describe(), q.cfg.CapacityBytes, q.cfg.Scale, q.cfg.SamplesPerPeriod, q.cfg.Period)
}

// NewSocketOutQueue returns the outgoing-queue sensor of the sockets in
// set: a SocketQueue in cfg.Mode averaged by an OutQueue whose first period
// starts at now. On a platform without the socket ioctls (anything but
// Linux) it returns an error naming the sensor and why, wrapping
// errors.ErrUnsupported; a config that asks for the sensor there must fail
// validation with it.
func NewSocketOutQueue(cfg OutQueueConfig, set SocketSet, now time.Time) (*OutQueue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("monitor: outgoing queue sensor: %w", err)
	}
	r, err := NewSocketQueue(set, cfg.Mode)
	if err != nil {
		return nil, err
	}
	return NewOutQueue(cfg, r, now)
}
