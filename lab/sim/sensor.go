// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/monitor"
)

// Busy is a monitor.UtilizationSource over a station's cumulative busy
// time (Station.Busy): the busy fraction over the interval since the
// previous reading,
//
//	utilization = (busy(now) − busy(last)) / (now − last),
//
// clamped to [0, 1]. It is the simulator's counterpart of the live
// sensors (/proc/stat, monitor.Busy) and is read by a stage.Stage's step
// (stage.Options.Utilization) or by a scenario's own sampler. It reads the
// station at the engine's current time, so call it only with now =
// Engine.Time(). Not safe for concurrent use (nothing in sim is).
type Busy struct {
	busy  func() float64
	last  time.Time
	last0 float64
	what  string
}

var _ monitor.UtilizationSource = (*Busy)(nil)

// NewBusy returns a source over busy (a Station's Busy method) whose first
// interval starts at the engine's current time. what names the station
// for Describe.
func NewBusy(e *Engine, busy func() float64, what string) (*Busy, error) {
	if err := checkEngine("NewBusy", e); err != nil {
		return nil, err
	}
	if busy == nil {
		return nil, fmt.Errorf("sim: NewBusy: nil busy function")
	}
	return &Busy{busy: busy, last: e.Time(), last0: busy(), what: what}, nil
}

// Utilization returns the busy fraction since the previous reading (or
// construction) and starts a new interval at now. An empty interval is
// monitor.ErrNoTimeElapsed and keeps the previous reading.
func (b *Busy) Utilization(now time.Time) (float64, error) {
	dt := now.Sub(b.last).Seconds()
	if dt <= 0 {
		return math.NaN(), fmt.Errorf("sim: %s: %w", b.what, monitor.ErrNoTimeElapsed)
	}
	v := b.busy()
	u := math.Min(math.Max((v-b.last0)/dt, 0), 1)
	b.last, b.last0 = now, v
	return u, nil
}

// Describe names the station.
func (b *Busy) Describe() string { return "simulated busy time of " + b.what }

// Sampler averages a gauge (a queue length, a link's backlog) read at a
// fixed interval of virtual time, the way a live sensor samples the
// outgoing queue several times per control period: Mean returns the mean
// of the readings since its previous call. A reading due at the very
// instant Mean is called is taken by Mean, once, so that a period's last
// reading belongs to it whatever the order of events at that instant.
type Sampler struct {
	e      *Engine
	gauge  func() float64
	start  time.Duration
	every  time.Duration
	last   time.Duration // time of the last reading (−1: none)
	sum    float64
	n      int
	ticker *Ticker
}

// NewSampler reads gauge every interval from Now + interval on.
func NewSampler(e *Engine, every time.Duration, gauge func() float64) (*Sampler, error) {
	if err := checkEngine("NewSampler", e); err != nil {
		return nil, err
	}
	if gauge == nil {
		return nil, fmt.Errorf("sim: NewSampler: nil gauge")
	}
	s := &Sampler{e: e, gauge: gauge, start: e.Now(), every: every, last: -1}
	t, err := e.Every(every, s.sample)
	if err != nil {
		return nil, err
	}
	s.ticker = t
	return s, nil
}

// sample takes the reading due now, unless it has been taken.
func (s *Sampler) sample() {
	if now := s.e.Now(); now != s.last {
		s.last = now
		s.sum += s.gauge()
		s.n++
	}
}

// Mean returns the mean of the readings since the previous call and starts
// a new interval. A reading due now is taken first; without any reading
// in the interval, it reads the gauge once now.
func (s *Sampler) Mean() float64 {
	if now := s.e.Now(); now > s.start && (now-s.start)%s.every == 0 {
		s.sample()
	}
	if s.n == 0 {
		s.sum += s.gauge()
		s.n++
	}
	m := s.sum / float64(s.n)
	s.sum, s.n = 0, 0
	return m
}

// Stop stops sampling.
func (s *Sampler) Stop() { s.ticker.Stop() }
