// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/mathx"
)

// DefaultTenantWeight is Tenants.DefaultWeight's default.
const DefaultTenantWeight = 1.0

// Tenants configure weighted fair queueing among tenants inside a
// concurrency stage's wait queue (auto, static-concurrency, …): within
// each priority class, waiters are served in the order of their virtual
// finish times,
//
//	F = max(V_c, F_last(tenant, c)) + ĉ(tenant)/w(tenant)
//
// where V_c is the finish time of the class's last waiter to get a slot,
// F_last the tag of the tenant's previous waiter in the class, while it
// still waits, and ĉ the cost charged for one request of the tenant — the
// self-clocked fair queueing of Golestani (INFOCOM 1994), the virtual
// clock of Demers, Keshav and Shenker's weighted fair queueing (SIGCOMM
// 1989) with the request's cost as the packet's length. Cost says what
// ĉ is: one per request by default (CostRequests: requests, not bytes,
// are what a slot serves), or the tenant's measured service time
// (CostServiceTime) or its reported cost (CostReported), estimated per
// tenant (costTable), so that a tenant whose requests hold a slot ten
// times as long gets a tenth of the grants and both share the slots'
// time. A tenant that sends ten times its share
// queues behind its own requests; the others' predicted wait counts only
// the waiters their tag follows (gate.Slots.AheadTagged), so the stage's
// predictive rejection turns away the heavy tenant's surplus and not the
// light tenants' requests; a full queue evicts the waiter with the
// largest tag (the tenant furthest ahead in virtual time, i.e. with the
// longest backlog for its weight), and so does a queue that holds more
// waiters than drain within the allowed wait, n > wait·drain (after an
// arrival whose tag put it ahead of them, or a decision that lowered the
// drain): longest-queue drop, as fq_codel drops from its fattest flow.
// An evicted waiter is answered as a queue timeout (live: 503 with
// Retry-After) at once and counted apart (ClassState.FairEvicted,
// sluice_requests_total{outcome="fair_evicted"}); its tenant's tag steps
// back by its cost. Priority classes stay strict: fairness is within a
// class, and a class's waiters count against the room of the lower ones.
//
// The wait allowed under fair queueing is the controller's (MaxWait) or
// the burst wait, whichever is longer,
//
//	wait = max(MaxWait, min(T/2, T − R̂99))
//
// for a controller with a response-time target T that estimates the
// service's p99 R̂99 (auto: its SLO and service_p99_s; T/2 before it has
// an estimate, as auto itself allows), MaxWait for the others. A
// controller's standing-queue wait (auto's max(R̂, SLO/10)) keeps a
// FIFO queue short; under fair queueing it would cost a light tenant its
// share: its requests drain at w/W of the rate (W the weight of the
// tenants queued), so a wait of MaxWait leaves it room for only
// MaxWait·drain·w/W of its own requests, and a tenant at 92 % of its
// share loses 2–5 % of its requests to Poisson bursts (sim tenants, seeds
// 1–3, 27 Nov 2026). With the burst wait it loses none; the heavy
// tenant's surplus is still turned away by its own predicted wait, and
// its waiters, behind the light tenants' in tag order, wait up to the
// burst wait (its p99 180 ms at an SLO of 250 ms).
//
// Tenant state lives only while the tenant has a waiter: a tenant whose
// last waiter leaves is forgotten (its next request starts at V_c, which
// is where an idle flow restarts in any case), so the state is bounded
// by the queue (Options.MaxQueue) whatever the number of distinct
// tenants. The tenant is Request.Tenant (live: the sluice.Hop's tenant,
// believed only from trusted peers, or what the caller sets).
type Tenants struct {
	// Fair turns weighted fair queueing among tenants on.
	Fair bool
	// Weights gives tenants a weight other than DefaultWeight (each > 0).
	Weights map[string]float64
	// DefaultWeight is the weight of every other tenant, including the
	// requests without one (default 1).
	DefaultWeight float64
	// Cost is what one request costs its tenant ("" is CostRequests, one
	// per request).
	Cost CostMeasure
	// SlotShare bounds the slots each tenant holds by its max-min fair
	// share of the concurrency limit over the tenants' peak demands in
	// the last control period (see slotShare), so that a tenant whose
	// requests hold their slots long cannot take the slots another
	// tenant's bursts need. Off by default: fair queueing alone is
	// work-conserving.
	SlotShare bool
	// DeadlineBudget, when > 0, starts a request only while what is
	// left of its deadline exceeds DeadlineBudget × its tenant's
	// estimated service time at the stage (see need): it is refused on
	// arrival, or leaves the queue, once it does not. 1 budgets one mean
	// service time; a heavy-tailed service time needs more (an
	// exponential one, about 5 for the calls started to lose ≤ 4 % of
	// their work to their deadline). Needs Cost CostServiceTime.
	// Default 0: off.
	DeadlineBudget float64
}

// validate checks the weights and fills the default.
func (t *Tenants) validate() error {
	t.DefaultWeight = cmp.Or(t.DefaultWeight, DefaultTenantWeight)
	if !mathx.Finite(t.DefaultWeight) || t.DefaultWeight <= 0 {
		return fmt.Errorf("tenant default weight %v must be > 0", t.DefaultWeight)
	}
	if err := validateCost(t.Cost); err != nil {
		return err
	}
	if !mathx.Finite(t.DeadlineBudget) || t.DeadlineBudget < 0 {
		return fmt.Errorf("tenant deadline budget %v must be ≥ 0", t.DeadlineBudget)
	}
	if t.DeadlineBudget > 0 && t.Cost != CostServiceTime {
		return errBudgetCost
	}
	names := make([]string, 0, len(t.Weights))
	for k := range t.Weights {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if w := t.Weights[k]; !mathx.Finite(w) || w <= 0 {
			return fmt.Errorf("tenant %q: weight %v must be > 0", k, w)
		}
	}
	return nil
}

// flowKey is one tenant within one class.
type flowKey struct {
	class  int
	tenant string
}

// flow is a tenant's queue state in a class: its waiters and the tag of
// its newest one.
type flow struct {
	n    int
	last float64
}

// fairQueue is a concGate's tenant bookkeeping; the caller holds the
// gate's lock.
type fairQueue struct {
	weights  map[string]float64
	defW     float64
	vtime    []float64 // V_c per class
	flows    map[flowKey]flow
	burst    time.Duration // wait allowed behind another tenant (0: none)
	costs    *costTable    // per-tenant cost estimates (nil: one per request)
	reported bool          // Cost is CostReported
	share    *slotShare    // Tenants.SlotShare (nil: off)
	budget   float64       // Tenants.DeadlineBudget (0: off)
	// Successful completions since the last step, counted and weighted
	// by their tenants' relative cost (see weighted).
	okN, okW float64
}

func newFairQueue(t Tenants, classes, maxQueue int) *fairQueue {
	f := &fairQueue{weights: t.Weights, defW: t.DefaultWeight, vtime: make([]float64, classes),
		flows: make(map[flowKey]flow, min(maxQueue+1, 4096))}
	if t.Cost.measured() {
		f.costs = newCostTable()
		f.reported = t.Cost == CostReported
	}
	if t.SlotShare {
		f.share = newSlotShare(f.weight)
	}
	f.budget = t.DeadlineBudget
	return f
}

// tag returns the virtual finish time of a new waiter of tenant in class
// and what it charges the tenant, ĉ/w.
func (f *fairQueue) tag(class int, tenant string) (tag, charge float64) {
	start := f.vtime[class]
	if fl, ok := f.flows[flowKey{class, tenant}]; ok && fl.last > start {
		start = fl.last
	}
	c := 1.0
	if f.costs != nil {
		c = f.costs.estimate(tenant)
	}
	charge = c / f.weight(tenant)
	return start + charge, charge
}

// completed records the cost of a request of tenant that ended: its
// service time d, or with CostReported the cost it reported (> 0); ok: it
// succeeded. It returns the cost charged, in seconds.
func (f *fairQueue) completed(tenant string, d, reported time.Duration, ok bool) float64 {
	if f.costs == nil {
		return 0
	}
	if ok {
		f.okN++
		f.okW += f.costs.estimate(tenant) / f.costs.mean()
	}
	if f.reported && reported > 0 {
		d = reported
	}
	return f.costs.observe(tenant, d)
}

// settle moves tenant's virtual time in class by delta, the difference
// between what its served request cost and what its tag charged, and
// reports whether the tenant has waiters there to retag. A tenant
// without waiters is not moved: its next request starts at V_c, which is
// where an idle flow restarts in any case.
func (f *fairQueue) settle(class int, tenant string, delta float64) bool {
	k := flowKey{class, tenant}
	fl, ok := f.flows[k]
	if !ok || delta == 0 {
		return false
	}
	fl.last += delta
	f.flows[k] = fl
	return true
}

// weighted returns and resets the successful completions since the last
// call, counted (n) and weighted by their tenants' cost relative to the
// mean (w: a tenant whose requests cost ten times the mean counts ten).
func (f *fairQueue) weighted() (n, w float64) {
	n, w = f.okN, f.okW
	f.okN, f.okW = 0, 0
	return n, w
}

// queued records a waiter that the queue took.
func (f *fairQueue) queued(w *Wait) {
	if f.share != nil {
		f.share.add(f.share.queued, w.Tenant, 1)
	}
	k := flowKey{w.Class, w.Tenant}
	fl := f.flows[k]
	fl.n++
	fl.last = math.Max(fl.last, w.tag)
	f.flows[k] = fl
}

// left records a waiter that left the queue; served: it got a slot. A
// waiter that leaves without a slot (evicted, expired, gone) gives its
// cost back: its tenant's later waiters in the class, and its last tag,
// step back by what it charged, ĉ/w (the caller retags the queue with
// shift), as if it had never arrived. That holds for any of the tenant's
// waiters, not only its newest: a tenant whose queued requests expire at
// the end of their wait (a long queue timeout and no predicted-wait
// rejection, as under static-concurrency) would otherwise run ever
// further ahead of the class's virtual time, lose more waiters to
// expiry for it, and end up never served.
func (f *fairQueue) left(w *Wait, served bool) {
	if f.share != nil {
		f.share.add(f.share.queued, w.Tenant, -1)
		if served {
			f.took(w.Tenant)
		}
	}
	if served && w.tag > f.vtime[w.Class] {
		f.vtime[w.Class] = w.tag
	}
	k := flowKey{w.Class, w.Tenant}
	fl, ok := f.flows[k]
	if !ok {
		return
	}
	if fl.n--; fl.n <= 0 {
		delete(f.flows, k)
		return
	}
	if !served {
		fl.last -= w.charge
	}
	f.flows[k] = fl
}

// shift returns the retagging of a class's queue after w left it without
// a slot: the later waiters of its tenant move up by its charge.
func shift(w *Wait) func(x *Wait, tag float64) float64 {
	return func(x *Wait, tag float64) float64 {
		if x.Tenant == w.Tenant && tag > w.tag {
			tag -= w.charge
			x.tag = tag
		}
		return tag
	}
}

// weight returns tenant's weight.
func (f *fairQueue) weight(tenant string) float64 {
	if w, ok := f.weights[tenant]; ok {
		return w
	}
	return f.defW
}

// Tenants returns the number of tenants with a waiter, summed over
// classes (0 without fair queueing).
func (s *Stage) Tenants() int {
	if s.conc == nil || s.conc.fair == nil {
		return 0
	}
	s.conc.mu.Lock()
	defer s.conc.mu.Unlock()
	return len(s.conc.fair.flows)
}
