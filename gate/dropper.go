// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Dropper drops each request independently with probability p: Yaksha's
// gate, where the controller sets the drop probability pd once per period
// and a request is admitted with probability 1 − pd.
//
// With p = 0 every request is admitted and with p = 1 every request is
// dropped, both exactly and without consuming a random draw; for 0 < p < 1
// one uniform draw u in [0, 1) is taken per request and the request is
// dropped iff u < p.
//
// The zero value is a Dropper with p = 0 that draws from math/rand/v2's
// top-level functions. A Dropper is safe for concurrent use by multiple
// goroutines; p is stored atomically, so Admit takes no lock unless an
// injected generator is used.
type Dropper struct {
	pBits atomic.Uint64 // math.Float64bits(p)
	mu    sync.Mutex    // guards rng
	rng   *rand.Rand
}

// NewDropper returns a Dropper with p = 0.
//
// With a non-nil rng every draw comes from rng, serialised by a mutex: for a
// given sequence of calls (and of SetProbability changes) the sequence of
// decisions is reproducible, which is what the simulator needs. With a nil
// rng the draws come from math/rand/v2's top-level functions, which are safe
// for concurrent use, lock-free and fast, but not reproducible (they are
// seeded by the runtime); use this in the live proxy.
func NewDropper(rng *rand.Rand) *Dropper {
	return &Dropper{rng: rng}
}

// SetProbability sets the drop probability p, which must be in [0, 1]; on
// error the setting is unchanged and the error names the value.
func (d *Dropper) SetProbability(p float64) error {
	if math.IsNaN(p) || p < 0 || p > 1 {
		return fmt.Errorf("gate: drop probability = %v: must be in [0, 1]", p)
	}
	d.pBits.Store(math.Float64bits(p))
	return nil
}

// Probability returns the current drop probability in [0, 1].
func (d *Dropper) Probability() float64 { return math.Float64frombits(d.pBits.Load()) }

// Admit decides one request: true means admitted, false means dropped.
func (d *Dropper) Admit() bool { return d.AdmitWith(math.Float64frombits(d.pBits.Load())) }

// AdmitWith decides one request with drop probability p instead of the
// Dropper's own, drawing from the same source (a stage that drops by
// class computes each class's p from its own; stage.Gates). p ≤ 0 admits
// and p ≥ 1 drops without a draw.
func (d *Dropper) AdmitWith(p float64) bool {
	if p <= 0 {
		return true
	}
	if p >= 1 {
		return false
	}
	var u float64
	if d.rng == nil {
		u = rand.Float64()
	} else {
		d.mu.Lock()
		u = d.rng.Float64()
		d.mu.Unlock()
	}
	return u >= p
}
