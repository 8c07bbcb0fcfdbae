package stage

import (
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
//	F = max(V_c, F_last(tenant, c)) + 1/w(tenant)
//
// where V_c is the finish time of the class's last waiter to get a slot
// and F_last the tag of the tenant's previous waiter in the class, while
// it still waits — the self-clocked fair queueing of Golestani (INFOCOM
// 1994), with a cost of one per request (requests, not bytes, are what a
// concurrency slot serves). A tenant that sends ten times its share
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
}

// validate checks the weights and fills the default.
func (t *Tenants) validate() error {
	if t.DefaultWeight == 0 {
		t.DefaultWeight = DefaultTenantWeight
	}
	if !mathx.Finite(t.DefaultWeight) || t.DefaultWeight <= 0 {
		return fmt.Errorf("tenant default weight %v must be > 0", t.DefaultWeight)
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
	weights map[string]float64
	defW    float64
	vtime   []float64 // V_c per class
	flows   map[flowKey]flow
	burst   time.Duration // wait allowed behind another tenant (0: none)
}

func newFairQueue(t Tenants, classes, maxQueue int) *fairQueue {
	return &fairQueue{weights: t.Weights, defW: t.DefaultWeight, vtime: make([]float64, classes),
		flows: make(map[flowKey]flow, min(maxQueue+1, 4096))}
}

// tag returns the virtual finish time of a new waiter of tenant in class.
func (f *fairQueue) tag(class int, tenant string) float64 {
	start := f.vtime[class]
	if fl, ok := f.flows[flowKey{class, tenant}]; ok && fl.last > start {
		start = fl.last
	}
	return start + 1/f.weight(tenant)
}

// queued records a waiter that the queue took.
func (f *fairQueue) queued(w *Wait) {
	k := flowKey{w.Class, w.Tenant}
	fl := f.flows[k]
	fl.n++
	fl.last = math.Max(fl.last, w.tag)
	f.flows[k] = fl
}

// left records a waiter that left the queue; served: it got a slot. A
// tenant's newest waiter that leaves without a slot (evicted, gone)
// gives its cost back: the tenant's last tag steps back by 1/w, so that
// requests it was not served do not push it ahead in virtual time.
func (f *fairQueue) left(w *Wait, served bool) {
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
	if !served && w.tag == fl.last {
		fl.last -= 1 / f.weight(w.Tenant)
	}
	f.flows[k] = fl
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
