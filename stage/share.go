// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"math"
	"sort"
)

// Slot share (Tenants.SlotShare). Fair queueing orders the waiters, but a
// slot, once granted, is held until its request ends: at a hop whose
// requests wait on a slower service behind it (an entry hop calling a
// CPU-bound leaf), a costly API's calls hold their slots for the leaf's
// queue and service, hundreds of milliseconds, while a light API's hold
// theirs for a millisecond or two. Whenever the light API has no waiter
// for an instant, a freed slot goes to a costly call and stays with it;
// soon the costly calls hold every slot, slots free at L/hold-time, and
// the light API's waiters, first by tag, still wait for them until their
// wait runs out. Measured in the costly figure at 50×: the light API lost
// up to 30 % of its share, all of it refused or timed out in the entry's
// queue.
//
// The slot share bounds what each tenant holds by its max-min fair share
// of the concurrency limit L over the tenants' demands for slots,
//
//	d_t = the most slots tenant t held and waited for at once
//	      in the last control period (held + queued, its peak),
//	level λ: Σ_t min(d_t, λ·w_t) = L,  cap_t = max(1, ⌈λ·w_t⌉),
//	or, when Σ_t d_t ≤ L, cap_t = d_t + L − Σ_u d_u,
//
// water-filling as in max-min fair bandwidth sharing (Bertsekas and
// Gallager, Data Networks, §6.5.2), with the tenants' weights: a tenant
// asking for less than its weighted part keeps what it asks for and the
// rest goes to those asking for more, so a lone tenant may hold all L
// and two tenants asking for everything split it by weight. A tenant at
// its cap does not take a free slot: its arrivals queue, and its waiters
// are passed over (gate.Slots.SetHold) until it releases a slot of its
// own or the next period raises its cap. The slots this keeps free are
// the other tenants' peak demand, so a light tenant's burst finds them
// free instead of waiting for a costly call to end. It is the per-API
// concurrency bound of the service-graph controllers (DAGOR's and
// Rajomon's per-API admission at each service, TopFull's per-API rate at
// the entry) applied to slots and set by max-min fairness rather than by
// priority or price.
//
// The demand is a peak, not a mean, so that a Poisson tenant's bursts
// fit in what is kept for it; the period's peak starts at what each
// tenant holds and queues at the period's start, so a tenant that keeps
// slots keeps its demand, and one that neither holds nor waits for a
// whole period is forgotten (its demand 0): the state is bounded by the
// tenants in service or queued.

// slotShare is a fair queue's per-tenant slot accounting; the gate's lock
// guards it.
type slotShare struct {
	held, queued map[string]int // now
	peak         map[string]int // this period's peak of held + queued
	caps         map[string]int // in force (absent: no cap)
	weight       func(string) float64
}

func newSlotShare(weight func(string) float64) *slotShare {
	return &slotShare{held: map[string]int{}, queued: map[string]int{}, peak: map[string]int{},
		caps: map[string]int{}, weight: weight}
}

// note updates tenant's peak demand.
func (s *slotShare) note(tenant string) {
	if d := s.held[tenant] + s.queued[tenant]; d > s.peak[tenant] {
		s.peak[tenant] = d
	}
}

// add moves tenant's held (slot) or queued count by delta.
func (s *slotShare) add(m map[string]int, tenant string, delta int) {
	n := m[tenant] + delta
	if n <= 0 {
		delete(m, tenant)
	} else {
		m[tenant] = n
	}
	if delta > 0 {
		s.note(tenant)
	}
}

// atCap reports whether tenant holds its cap already.
func (s *slotShare) atCap(tenant string) bool {
	c, ok := s.caps[tenant]
	return ok && s.held[tenant] >= c
}

// reshare ends a period: the caps for the next from the period's peak
// demands and the limit, and the next period's peaks start at what every
// tenant holds and queues now.
func (s *slotShare) reshare(limit int) {
	clear(s.caps)
	for t, c := range maxMinCaps(s.peak, s.weight, limit) {
		s.caps[t] = c
	}
	clear(s.peak)
	for t := range s.held {
		s.note(t)
	}
	for t := range s.queued {
		s.note(t)
	}
}

// maxMinCaps returns the cap of every tenant with a demand, by weighted
// water-filling of limit slots over the demands (see slotShare). When the
// demands fit in the limit, each tenant's cap is its demand and the slack,
// d_t + L − Σd: every tenant may grow into the slots nobody asked for,
// but none into those another tenant asked for (a cap that lifted
// whenever the demands fit would let a costly tenant take, and keep, the
// slot a light one frees between two of its requests).
func maxMinCaps(demand map[string]int, weight func(string) float64, limit int) map[string]int {
	total := 0
	for _, d := range demand {
		total += d
	}
	if len(demand) < 2 {
		return nil
	}
	if total <= limit {
		caps := make(map[string]int, len(demand))
		for t, d := range demand {
			caps[t] = max(1, d+limit-total)
		}
		return caps
	}
	// Tenants by demand per unit weight: they leave water-filling in
	// that order.
	names := make([]string, 0, len(demand))
	for t := range demand {
		names = append(names, t)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := float64(demand[names[i]])/weight(names[i]), float64(demand[names[j]])/weight(names[j])
		return a < b || a == b && names[i] < names[j]
	})
	left, wsum := float64(limit), 0.0
	for _, t := range names {
		wsum += weight(t)
	}
	level := math.Inf(1)
	for _, t := range names {
		w := weight(t)
		if l := left / wsum; float64(demand[t]) > l*w {
			level = l
			break
		}
		left -= float64(demand[t])
		wsum -= w
	}
	if math.IsInf(level, 1) {
		return nil
	}
	caps := make(map[string]int, len(names))
	for _, t := range names {
		caps[t] = max(1, int(math.Ceil(level*weight(t)-1e-9)))
	}
	return caps
}

// The fair queue's hooks (no-ops without a slot share).

// holds reports whether tenant may not take a slot now.
func (f *fairQueue) holds(tenant string) bool {
	return f != nil && f.share != nil && f.share.atCap(tenant)
}

// took records that tenant took a slot.
func (f *fairQueue) took(tenant string) {
	if f != nil && f.share != nil {
		f.share.add(f.share.held, tenant, 1)
	}
}

// released records that tenant released a slot.
func (f *fairQueue) released(tenant string) {
	if f != nil && f.share != nil {
		f.share.add(f.share.held, tenant, -1)
	}
}

// reshare ends a control period of the slot share under limit.
func (f *fairQueue) reshare(limit int) {
	if f != nil && f.share != nil {
		f.share.reshare(limit)
	}
}
