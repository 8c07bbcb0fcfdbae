// SPDX-License-Identifier: Apache-2.0

// Package stage binds controllers, gates and monitors into an admission
// stage: the unit sluice controls (a route of the proxy, a handler behind
// the middleware, or a request type in the simulator).
//
// Gates is the deterministic gate: it turns a controller's decisions into
// gate settings and answers "admit or not" at a given now. Stage wraps it
// with the rest: per-class recorders, the concurrency limit and its class
// wait queue, the controller's step (driven by a Runner live and by the
// simulator's sim.Stage in virtual time: the same Stage either way) and
// the admin view.
package stage

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gate"
)

// DefaultBurst is the token-bucket size of a stage: Voigt & Gunningberg's
// bucket of 5 for HTTP-level rules.
const DefaultBurst = 5

// Gates is the gate a controller drives, chosen by the kind of its initial
// decision: a token bucket for KindRate (one per class when the controller
// reports per-class rates, Decision.ClassRates, as multi-class SEDA does),
// a dropper for KindDropProbability, nothing for KindNone; for
// KindConcurrency it holds the limit (Limit), which the Stage enforces
// with its class-ordered slots (gate.ClassSlots). It also carries the
// quality level of a degrading stage and the "gate off" switch. AdmitAt is safe for
// concurrent use with Apply.
type Gates struct {
	kind    sluice.Kind
	bucket  *gate.TokenBucket
	classes *gate.ClassBuckets
	drop    *gate.Dropper
	off     atomic.Bool
	quality atomic.Uint64 // float64 bits; 0 = not degrading
	limit   atomic.Int64

	// Priority shedding (Priority; set once, before use): the reserve (0:
	// off), each class's tolerance ahead of a single bucket, each class's
	// drop probability (float64 bits) and the last period's class mix.
	prioReserve float64
	ahead       []time.Duration
	classDrop   []atomic.Uint64
	mix         []float64
}

// NewGates builds the gates for a controller whose setting in force is
// initial. classes is the number of request classes of the stage (≥ 1);
// per-class buckets are used when the controller reports ClassRates. burst
// is the token-bucket size (≥ 1). rng drives the dropper (nil: the
// concurrency-safe, unseeded global source).
func NewGates(initial sluice.Decision, classes, burst int, rng *rand.Rand) (*Gates, error) {
	if classes < 1 {
		return nil, fmt.Errorf("stage: classes must be ≥ 1, got %d", classes)
	}
	g := &Gates{kind: initial.Kind}
	switch initial.Kind {
	case sluice.KindRate:
		if n := len(initial.ClassRates); n > 0 {
			if n != classes {
				return nil, fmt.Errorf("stage: controller has %d class rates but the stage has %d classes", n, classes)
			}
			cb, err := gate.NewClassBuckets(initial.ClassRates, burst)
			if err != nil {
				return nil, err
			}
			g.classes = cb
		} else {
			b, err := gate.NewTokenBucket(initial.New, burst)
			if err != nil {
				return nil, err
			}
			g.bucket = b
		}
	case sluice.KindDropProbability:
		g.drop = gate.NewDropper(rng)
		if err := g.drop.SetProbability(initial.New); err != nil {
			return nil, err
		}
	case sluice.KindConcurrency:
		g.limit.Store(int64(initial.New))
	case sluice.KindNone:
	default:
		return nil, fmt.Errorf("stage: controller setting of kind %v has no gate", initial.Kind)
	}
	g.off.Store(initial.GateOff || initial.Kind == sluice.KindNone)
	g.quality.Store(math.Float64bits(initial.Quality))
	return g, nil
}

// Kind returns the kind of setting the gates enforce.
func (g *Gates) Kind() sluice.Kind { return g.kind }

// AdmitAt decides one arrival of the given class at now: true to admit.
// Concurrency gates always admit here; the caller's limiter decides.
func (g *Gates) AdmitAt(now time.Time, class int) bool {
	if g.off.Load() {
		return true
	}
	switch {
	case g.bucket != nil:
		if g.ahead != nil {
			return g.bucket.AllowAheadAt(now, g.ahead[clampClass(class, len(g.ahead))])
		}
		return g.bucket.AllowAt(now)
	case g.classes != nil:
		return g.classes.AllowAt(now, class)
	case g.drop != nil:
		if g.classDrop != nil {
			return g.drop.AdmitWith(math.Float64frombits(g.classDrop[clampClass(class, len(g.classDrop))].Load()))
		}
		return g.drop.Admit()
	}
	return true
}

// TokenWait returns, for a rate gate, how long after now a request of
// class would find a token (gate.TokenBucket.WaitAt with the class's
// priority tolerance); 0 for other gates and while the gate is off.
func (g *Gates) TokenWait(now time.Time, class int) time.Duration {
	if g.off.Load() {
		return 0
	}
	switch {
	case g.bucket != nil:
		var ahead time.Duration
		if g.ahead != nil {
			ahead = g.ahead[clampClass(class, len(g.ahead))]
		}
		return g.bucket.WaitAt(now, ahead)
	case g.classes != nil:
		return g.classes.Bucket(class).WaitAt(now, 0)
	}
	return 0
}

// clampClass maps an out-of-range class to the lowest of n.
func clampClass(c, n int) int {
	if c < 0 || c >= n {
		return n - 1
	}
	return c
}

// Apply puts a decision into force at now. A decision of another kind than
// the gates' is an error (and changes nothing).
func (g *Gates) Apply(now time.Time, d sluice.Decision) error {
	if d.Kind != g.kind {
		return fmt.Errorf("stage: decision of kind %v applied to %v gates", d.Kind, g.kind)
	}
	var err error
	switch {
	case g.bucket != nil:
		err = g.bucket.SetRateAt(now, d.New)
	case g.classes != nil:
		if d.ClassRates != nil {
			err = g.classes.SetRatesAt(now, d.ClassRates)
		}
	case g.drop != nil:
		if err = g.drop.SetProbability(d.New); err == nil && g.classDrop != nil {
			g.splitDrops(d.New)
		}
	case g.kind == sluice.KindConcurrency:
		g.limit.Store(int64(d.New))
	}
	if err != nil {
		return err
	}
	g.off.Store(d.GateOff || g.kind == sluice.KindNone)
	g.quality.Store(math.Float64bits(d.Quality))
	return nil
}

// Off reports whether admission control is switched off (all admitted).
func (g *Gates) Off() bool { return g.off.Load() }

// Quality returns the quality level to hand to the backend, in (0, 1], or
// 1 when the stage does not degrade.
func (g *Gates) Quality() float64 {
	if q := math.Float64frombits(g.quality.Load()); q > 0 {
		return q
	}
	return 1
}

// Degrading reports whether the controller sets a quality level.
func (g *Gates) Degrading() bool { return math.Float64frombits(g.quality.Load()) > 0 }

// Limit returns the concurrency limit for KindConcurrency gates (0
// otherwise).
func (g *Gates) Limit() int { return int(g.limit.Load()) }

// Rates returns the token rate of each class (one entry for a single
// bucket), or nil for non-rate gates.
func (g *Gates) Rates() []float64 {
	switch {
	case g.bucket != nil:
		return []float64{g.bucket.Rate()}
	case g.classes != nil:
		return g.classes.Rates()
	}
	return nil
}

// DropProbability returns the dropper's probability (0 for other gates).
func (g *Gates) DropProbability() float64 {
	if g.drop != nil {
		return g.drop.Probability()
	}
	return 0
}
