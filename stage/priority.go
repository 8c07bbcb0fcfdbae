// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

// DefaultPriorityReserve is Priority.Reserve's default: the share of a
// stage's setting by which its highest class may exceed it.
const DefaultPriorityReserve = 0.3

// ShedMode says whether a stage sheds its lowest classes first.
type ShedMode uint8

const (
	// ShedDefault takes the controller's default: on, unless its paper
	// defines its own classes or none (control.Needs.PriorityOptIn: seda,
	// yaksha, kihl, voigt-cpu, voigt-queue), whose law stays as written.
	ShedDefault ShedMode = iota
	// ShedOn sheds the lowest classes first.
	ShedOn
	// ShedOff leaves the gate as the controller's source has it: a
	// concurrency limit's wait queue still serves the higher classes
	// first, nothing else does.
	ShedOff
)

// Priority is how a stage with several classes sheds the lowest priority
// first (docs/hops.md has the why and the sources). Class 0 is the
// highest. The mechanism depends on the gate the controller drives, not
// on the controller, and does nothing in a stage with one class:
//
//   - A concurrency limit (auto, static-concurrency, gradient2,
//     envoy-gradient, bbr). Its wait queue always serves the highest
//     class first and a full queue evicts the newest waiter of the lowest
//     class. While the limit rejects at once (no queue in force: the
//     peers' gradient2, envoy-gradient and bbr always, auto when its SLO
//     leaves no time to wait), class c is admitted while fewer than
//     T_c = L + ⌈Reserve·L·(n − 1 − c)/(n − 1)⌉ requests hold a slot
//     (gate.Slots.SetReserve): the lowest class sees the limit L, the
//     highest L + ⌈Reserve·L⌉, and a class is refused only when every
//     lower class already is, the rule of the SRE book's criticality. The
//     lowest class alone gets the whole limit, so the controller measures
//     what it always did; a higher class arriving on a limit full of
//     lower ones gets in beyond it, which the controller sees and
//     corrects at its next step.
//   - One token bucket (static-rate, kihl, voigt-cpu, voigt-queue, seda
//     sharing one bucket): class c may run up to
//     Reserve·(n − 1 − c)/(n − 1) seconds ahead of the bucket
//     (gate.TokenBucket.AllowAheadAt): when the bucket runs dry the lowest
//     class is refused first, the highest keeps Reserve·rate requests of
//     extra burst, repaid by the lower classes; the long-run rate is the
//     controller's. The idea of RFC 2697's single-rate three-color marker
//     (one rate, a larger burst for the preferred traffic).
//   - A drop probability p (yaksha): the drops go to the lowest classes
//     first, in proportion to the arrivals each class had in the last
//     period: walking up from the lowest class, class c drops
//     p_c = min(1, D/f_c) of its requests, f_c its share of the
//     arrivals, D the part of p not yet placed — DAGOR's admission level
//     over a histogram of priorities (Zhou et al., SoCC 2018). The
//     expected drop rate stays p.
//   - Per-class token buckets (seda with one controller per class): the
//     paper's own class law; Priority changes nothing.
type Priority struct {
	// Shed turns priority shedding on or off; the zero value is the
	// controller's default.
	Shed ShedMode
	// Reserve is in (0, 1): the share of a concurrency limit by which the
	// highest class may exceed it while the limit rejects at once, and,
	// for a token bucket, how far ahead of it (in seconds) the highest
	// class may run. 0 means DefaultPriorityReserve (0.3).
	Reserve float64
}

// resolve returns whether the stage sheds by priority and its reserve.
func (p Priority) resolve(cfg control.Config, classes int) (bool, float64, error) {
	r := p.Reserve
	r = cmp.Or(r, DefaultPriorityReserve)
	if !(r > 0 && r < 1) {
		return false, 0, fmt.Errorf("priority reserve %v must be within (0, 1)", p.Reserve)
	}
	on := false
	switch p.Shed {
	case ShedDefault:
		on = !control.NeedsOf(cfg).PriorityOptIn
	case ShedOn:
		on = true
	case ShedOff:
	default:
		return false, 0, fmt.Errorf("priority shed mode %d is invalid", p.Shed)
	}
	return on && classes > 1, r, nil
}

// setPriority makes the gates shed the lowest of n classes first with
// reserve r (see Priority).
func (g *Gates) setPriority(n int, r float64) {
	if g.classes != nil || g.kind == sluice.KindNone {
		return // per-class buckets keep their own law; nothing to shed
	}
	g.prioReserve = r
	switch {
	case g.bucket != nil:
		g.ahead = make([]time.Duration, n)
		for c := range g.ahead {
			g.ahead[c] = time.Duration(r * float64(time.Second) * float64(n-1-c) / float64(n-1))
		}
	case g.drop != nil:
		g.classDrop = make([]atomic.Uint64, n)
		g.mix = make([]float64, n)
		g.splitDrops(g.drop.Probability())
	}
}

// Shedding reports whether the gates shed the lowest classes first, and
// the reserve they use.
func (g *Gates) Shedding() (bool, float64) { return g.prioReserve > 0, g.prioReserve }

// SetClassMix gives a dropping gate the arrivals of each class in the
// last period, from which Apply splits the drop probability among the
// classes (see Priority); other gates ignore it.
func (g *Gates) SetClassMix(arrivals []float64) {
	if g.mix == nil {
		return
	}
	copy(g.mix, arrivals)
}

// splitDrops sets each class's drop probability from the overall p and
// the class mix, lowest class first; without arrivals every class drops p.
func (g *Gates) splitDrops(p float64) {
	total := 0.0
	for _, a := range g.mix {
		if a > 0 {
			total += a
		}
	}
	d := p // drops still to place, as a fraction of all arrivals
	for c := len(g.classDrop) - 1; c >= 0; c-- {
		pc := p
		if total > 0 {
			f := max(g.mix[c], 0) / total
			switch {
			case d <= 1e-12:
				pc = 0
			case f == 0:
				pc = 1 // below the cut: an arrival of this class would take drops first
			default:
				pc = math.Min(1, d/f)
				d -= pc * f
			}
		}
		g.classDrop[c].Store(math.Float64bits(pc))
	}
}

// ClassDrops returns each class's drop probability of a dropping gate
// that sheds by priority (nil otherwise).
func (g *Gates) ClassDrops() []float64 {
	if g.classDrop == nil {
		return nil
	}
	out := make([]float64, len(g.classDrop))
	for i := range g.classDrop {
		out[i] = math.Float64frombits(g.classDrop[i].Load())
	}
	return out
}

// Request is what a stage knows of an arriving request besides the time.
type Request struct {
	// Class is the request's class index (0 is the highest; out of range:
	// the lowest).
	Class int
	// Tenant is who the request is done for ("" none). It is kept on the
	// request's Wait while it queues.
	Tenant string
	// Deadline is when the request's caller stops waiting for it (zero:
	// none). A request whose deadline has passed, or whose predicted wait
	// for a concurrency slot exceeds what is left of it, is rejected at
	// once; a queued request leaves the queue at its deadline. Either is
	// counted as a deadline rejection.
	Deadline time.Time
	// Arrival is when the request arrived, as the caller read the clock
	// (zero: EnterRequest reads it). A caller that has read the clock
	// already passes its reading, which saves the stage a second one.
	Arrival time.Time
}

// ErrDeadline is the rejection of a request whose deadline passed, or
// would pass, before it gets service. It wraps sluice.ErrRejected.
var ErrDeadline = fmt.Errorf("stage: the request's deadline passes before it can be served: %w", sluice.ErrRejected)

// ClassFrom returns the class index of the priority ctx carries
// (sluice.HopFrom, mapped onto the stage's classes by
// sluice.PriorityClass), or def when it carries none the stage knows.
func (s *Stage) ClassFrom(ctx context.Context, def int) int {
	p := sluice.HopFrom(ctx).Priority
	if p == "" {
		return def
	}
	if c, ok := sluice.PriorityClass(p, s.classNames); ok {
		return c
	}
	return def
}
