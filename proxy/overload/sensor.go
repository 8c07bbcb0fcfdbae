// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/proxy/internal/dashboard"
)

// Sensor is one live sensor of the proxy, shared by its consumers (a
// resource rule's stage, the policer's CPU guard). Most readers report
// the interval since their previous reading, so a second consumer
// reading right after the first would see an empty interval: a reading
// requested less than gap after the previous one returns that previous
// reading again. The value is a utilization in [0, 1] for utilization
// sources, and a queue normalised to the sensor's scale for outqueue and
// bandwidth. It is safe for concurrent use.
type Sensor struct {
	name   string // configuration path: "utilization", "resources[1].sensor"
	source string
	unit   string // "utilization" or "queue"
	gap    time.Duration
	read   func(now time.Time) (reading, error)
	desc   func() string
	// sample, when set, is the sampling loop of an outgoing-queue sensor;
	// it runs while the proxy serves.
	sample func(ctx context.Context) error

	mu     sync.Mutex
	have   bool
	at     time.Time
	last   reading
	err    error
	reads  uint64
	errors uint64
}

// reading is one value of a sensor.
type reading struct {
	value float64
	// bytes is the mean queued bytes (outqueue) or the bytes per second
	// (bandwidth); NaN for utilization sources.
	bytes float64
}

// get returns the reading at now (see Sensor for the sharing rule).
func (s *Sensor) get(now time.Time) (reading, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.have && (now.Before(s.at) || now.Sub(s.at) < s.gap) {
		return s.last, s.err
	}
	r, err := s.read(now)
	s.have, s.at, s.last, s.err = true, now, r, err
	s.reads++
	if err != nil {
		s.errors++
	}
	return r, err
}

// Utilization implements monitor.UtilizationSource.
func (s *Sensor) Utilization(now time.Time) (float64, error) {
	r, err := s.get(now)
	if err != nil {
		return math.NaN(), fmt.Errorf("%s (%s): %w", s.name, s.source, err)
	}
	return r.value, nil
}

// Describe implements monitor.UtilizationSource.
func (s *Sensor) Describe() string { return s.desc() }

// queue is the stage queue sensor of a bandwidth rule: the normalised
// queue, or NaN while the sensor has no reading (the controller holds).
func (s *Sensor) queue() float64 {
	r, err := s.get(time.Now())
	if err != nil {
		return math.NaN()
	}
	return r.value
}

var _ monitor.UtilizationSource = (*Sensor)(nil)

// SensorState is a sensor as /state shows it: its name, source,
// description and unit, its last value (nil when it failed) and bytes,
// when it was read, its error, and its reads and failed reads. The
// dashboard carries the same type to the page.
type SensorState = dashboard.Sensor

// State returns the sensor as /state shows it.
func (s *Sensor) State() SensorState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SensorState{Name: s.name, Source: s.source, Description: s.desc(), Unit: s.unit, At: s.at,
		Reads: s.reads, Errors: s.errors}
	if s.err != nil {
		st.Error = s.err.Error()
	} else if s.have {
		v := s.last.value
		st.Value = &v
		if !math.IsNaN(s.last.bytes) {
			b := s.last.bytes
			st.Bytes = &b
		}
	}
	return st
}

// ReportedHeader is a backend-header sensor: the proxy reads Header
// (canonical) from every response and feeds Rep.
type ReportedHeader struct {
	Header string
	Rep    *monitor.Reported
}

// ReportedHeaders are the backend-header sensors of a proxy.
type ReportedHeaders []ReportedHeader

// Take removes each reported header from a backend's response header h
// and feeds its first value to the sensor; a value that is not a number
// in [0, 1] is ignored.
func (hs ReportedHeaders) Take(h http.Header) {
	for _, rh := range hs {
		if v, ok := h[rh.Header]; ok && len(v) > 0 {
			delete(h, rh.Header)
			if u, err := strconv.ParseFloat(strings.TrimSpace(v[0]), 64); err == nil {
				_ = rh.Rep.Report(u) // values outside [0, 1] are ignored
			}
		}
	}
}

// poolBusy is the pool-busy source: the busy time of the running
// generation's pool, read through the host. A pool rebuilt on reload
// starts a new interval.
type poolBusy struct{ h Host }

func (b poolBusy) Utilization(now time.Time) (float64, error) {
	src := b.h.PoolBusy()
	if src == nil {
		return math.NaN(), fmt.Errorf("no backend pool")
	}
	return src.Utilization(now)
}

func (b poolBusy) Describe() string {
	if src := b.h.PoolBusy(); src != nil {
		return "backend pool: " + src.Describe()
	}
	return "backend pool busy time"
}
