package stage

import (
	"fmt"
	"math"
	"sort"

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
// largest tag. Priority classes stay strict: fairness is within a class.
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
}

func newFairQueue(t Tenants, classes, maxQueue int) *fairQueue {
	return &fairQueue{weights: t.Weights, defW: t.DefaultWeight, vtime: make([]float64, classes),
		flows: make(map[flowKey]flow, min(maxQueue+1, 4096))}
}

// tag returns the virtual finish time of a new waiter of tenant in class.
func (f *fairQueue) tag(class int, tenant string) float64 {
	w, ok := f.weights[tenant]
	if !ok {
		w = f.defW
	}
	start := f.vtime[class]
	if fl, ok := f.flows[flowKey{class, tenant}]; ok && fl.last > start {
		start = fl.last
	}
	return start + 1/w
}

// queued records a waiter that the queue took.
func (f *fairQueue) queued(w *Wait) {
	k := flowKey{w.Class, w.Tenant}
	fl := f.flows[k]
	fl.n++
	fl.last = math.Max(fl.last, w.tag)
	f.flows[k] = fl
}

// left records a waiter that left the queue; served: it got a slot.
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
	f.flows[k] = fl
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
