// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Never is the offset Arrivals.Next returns when no arrival will ever
// come: the rate is 0 from some point on. It is the largest
// time.Duration (about 292 years).
const Never = time.Duration(math.MaxInt64)

// Arrivals is a pure pacer: Next returns the offset of the next arrival
// after the arrival (or start) at offset t, both measured from the start of
// the run. Results are strictly greater than t (1 ns resolution), or Never.
// Load generators send at the returned offsets and measure latency from
// them (the intended send time), so queueing in the generator cannot hide.
//
// A caller starts with t = 0 and then passes each returned offset back in.
type Arrivals interface {
	Next(r *rand.Rand, t time.Duration) time.Duration
}

// Compile-time guards.
var (
	_ Arrivals = Poisson{}
	_ Arrivals = Constant{}
	_ Arrivals = (*MMPP)(nil)
)

// Poisson is a Poisson process whose rate (arrivals per second) follows a
// piecewise-constant Schedule. It is exact, not thinned: the next arrival is
// at the offset T where the integrated rate ∫ₜᵀ λ(s) ds reaches a standard
// exponential draw, which by the time-change theorem is the
// non-homogeneous Poisson process with intensity λ. A segment with rate 0
// has no arrivals; if the rate is 0 from t on, Next returns Never. The zero
// value never produces an arrival. Poisson is immutable and safe for
// concurrent use (with one *rand.Rand per goroutine).
type Poisson struct {
	Rate Schedule
}

// Next returns the offset of the next arrival after t.
func (p Poisson) Next(r *rand.Rand, t time.Duration) time.Duration {
	return p.Rate.advance(t, r.ExpFloat64())
}

// Constant spaces arrivals evenly at the rate (arrivals per second) of its
// Schedule: the next arrival is at the offset T where ∫ₜᵀ λ(s) ds = 1, so
// the gap is 1/λ inside a segment and a gap that straddles a rate step is
// shared between the two rates in proportion. Segments with rate 0 have no
// arrivals; if the rate is 0 from t on, Next returns Never. It does not use
// r. The first arrival, Next(r, 0), is at 1/λ. Constant is immutable and
// safe for concurrent use.
type Constant struct {
	Rate Schedule
}

// Next returns the offset of the next arrival after t.
func (c Constant) Next(_ *rand.Rand, t time.Duration) time.Duration {
	return c.Rate.advance(t, 1)
}

// MMPPConfig configures a two-state Markov-modulated Poisson process.
type MMPPConfig struct {
	// Rates are the Poisson rates in phase 0 and phase 1, in arrivals per
	// second; finite, ≥ 0, and not both 0.
	Rates [2]float64
	// Sojourn are the mean times spent in phase 0 and phase 1 before
	// switching to the other; each > 0. Sojourns are exponential.
	Sojourn [2]time.Duration
}

// Validate reports the first invalid field, or nil.
func (c MMPPConfig) Validate() error {
	for i, r := range c.Rates {
		if !finite(r) || r < 0 {
			return fmt.Errorf("mmpp: Rates[%d] = %v: must be a finite number ≥ 0", i, r)
		}
	}
	if c.Rates[0] == 0 && c.Rates[1] == 0 {
		return fmt.Errorf("mmpp: Rates = %v: at least one rate must be > 0", c.Rates)
	}
	for i, s := range c.Sojourn {
		if s <= 0 {
			return fmt.Errorf("mmpp: Sojourn[%d] = %v: must be > 0", i, s)
		}
	}
	return nil
}

// MMPP is a two-state Markov-modulated Poisson process, the usual model of
// bursty traffic: the process alternates between phase 0 and phase 1,
// staying in phase i for an exponential time with mean Sojourn[i], and
// while in phase i arrivals are Poisson with rate Rates[i]. Its long-run
// rate is (λ₀S₀ + λ₁S₁)/(S₀ + S₁).
//
// Unlike Poisson and Constant, an MMPP carries its current phase: Next must
// be called with non-decreasing t (each call with the previous result), and
// an MMPP must not be shared between runs or goroutines. The first call
// draws the initial phase from the stationary distribution.
type MMPP struct {
	cfg      MMPPConfig
	started  bool
	phase    int
	phaseEnd time.Duration
}

// NewMMPP validates cfg and returns an MMPP in its initial (unstarted)
// state.
func NewMMPP(cfg MMPPConfig) (*MMPP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &MMPP{cfg: cfg}, nil
}

// MeanRate returns the long-run arrival rate in arrivals per second.
func (m *MMPP) MeanRate() float64 {
	s0, s1 := m.cfg.Sojourn[0].Seconds(), m.cfg.Sojourn[1].Seconds()
	return (m.cfg.Rates[0]*s0 + m.cfg.Rates[1]*s1) / (s0 + s1)
}

// Phase returns the current phase (0 or 1); it is 0 before the first Next.
func (m *MMPP) Phase() int { return m.phase }

// Reset returns the MMPP to its initial state, for reuse in a new run.
func (m *MMPP) Reset() { *m = MMPP{cfg: m.cfg} }

// sojourn draws a phase duration ≥ 1ns ending after from.
func (m *MMPP) sojourn(r *rand.Rand, from time.Duration) time.Duration {
	return addSeconds(from, from, r.ExpFloat64()*m.cfg.Sojourn[m.phase].Seconds())
}

// Next returns the offset of the next arrival after t.
func (m *MMPP) Next(r *rand.Rand, t time.Duration) time.Duration {
	if t >= Never-1 {
		return Never
	}
	if !m.started {
		m.started = true
		s0, s1 := m.cfg.Sojourn[0].Seconds(), m.cfg.Sojourn[1].Seconds()
		if r.Float64() < s1/(s0+s1) {
			m.phase = 1
		}
		m.phaseEnd = m.sojourn(r, t)
	}
	cur := t
	for {
		for cur >= m.phaseEnd && m.phaseEnd != Never {
			from := m.phaseEnd
			m.phase = 1 - m.phase
			m.phaseEnd = m.sojourn(r, from)
		}
		rate := m.cfg.Rates[m.phase]
		if rate > 0 {
			next := addSeconds(t, cur, r.ExpFloat64()/rate)
			if next < m.phaseEnd || m.phaseEnd == Never {
				return next
			}
		}
		if m.phaseEnd == Never {
			return Never
		}
		// No arrival before the phase ends; by memorylessness, restart
		// the draw at the switch.
		cur = m.phaseEnd
	}
}
