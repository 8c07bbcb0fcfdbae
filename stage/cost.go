// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"fmt"
	"sort"
	"time"
)

// CostMeasure names what one request costs its tenant under fair
// queueing (Tenants.Cost): the length of its "packet" in the virtual
// finish time of weighted fair queueing.
type CostMeasure string

const (
	// CostRequests charges one unit per request, whatever it costs the
	// service (the default, and sluice's fair queueing before cost
	// measures): tenants share the slots' grants, not their time.
	CostRequests CostMeasure = "requests"
	// CostServiceTime charges a request its tenant's measured service
	// time: the time from its slot's grant to its end (Ticket.Finish,
	// less Outcome.Excluded), estimated per tenant (costTable) since a
	// request's own is known only once it is served. Tenants then share
	// the slots' time: a tenant whose requests take ten times as long
	// gets a tenth of the grants while both wait.
	CostServiceTime CostMeasure = "service_time"
	// CostReported charges the cost the service reports for each request
	// (Outcome.Cost: a handler's sluice.ReportCost, e.g. the CPU time it
	// measured itself, or rows scanned expressed as time), and a request
	// without a report its service time, estimated per tenant as for
	// CostServiceTime.
	CostReported CostMeasure = "reported"
)

// CostMeasures lists the cost measures, the default first.
var CostMeasures = []CostMeasure{CostRequests, CostServiceTime, CostReported}

// valid reports whether m names a cost measure ("" is CostRequests).
func (m CostMeasure) valid() bool {
	switch m {
	case "", CostRequests, CostServiceTime, CostReported:
		return true
	}
	return false
}

// measured reports whether m charges measured costs (not one per
// request).
func (m CostMeasure) measured() bool { return m == CostServiceTime || m == CostReported }

// Cost estimation. A request's cost is known only when it ends, but its
// virtual finish time is set when it queues, so the queue charges it its
// tenant's estimated cost: the mean cost of the tenant's completions in
// each control period, smoothed over periods,
//
//	ĉ_t ← ĉ_t + β·(c̄_t − ĉ_t),  β = CostSmoothing,
//
// the tenant's first period setting ĉ_t = c̄_t. A tenant never seen is
// charged the same average over every tenant's completions, and before
// the stage's first completion a nominal NominalCost, the same for every
// tenant: requests then share as with CostRequests. This is the setting
// of Mace et al.'s 2DFQ ("Two-Dimensional Fair Queuing for Multi-Tenant
// Cloud Services", SIGCOMM 2016), where request costs are unknown in
// advance and estimated per tenant from the costs measured as requests
// complete; sluice charges the estimate at the tag and does not correct
// a request's tag when it ends (the estimate is an average, so a
// tenant's charges sum to what its requests cost over time).
//
// The smoothing is per period, not per completion, on purpose: a
// service time stretches with the load (a CPU shared by more requests
// serves each one slower), and a cheap tenant completes ten or fifty
// times as often as a costly one. Smoothed per completion, the cheap
// tenant's estimate would follow a stretch within milliseconds and the
// costly one's a second later, and while auto's probes move the load up
// and down the costly tenant was undercharged by a few percent (the
// light tenant of TestStageTenantsCostFair lost 3–13 % of its share);
// per period, every tenant's estimate follows the same stretch at the
// same pace.
const (
	// CostSmoothing is β, the weight of a period's mean cost in its
	// tenant's estimate.
	CostSmoothing = 0.5
	// NominalCost is the cost charged before the stage has measured any.
	NominalCost = time.Millisecond
	// minCost is the least cost charged (a request reported as free
	// still advances its tenant in virtual time).
	minCost = time.Microsecond
	// costGeneration bounds the tenants whose estimates are kept: once
	// this many are known since the last turnover, the older generation
	// is dropped (a tenant seen in neither is charged the average), so
	// memory stays bounded whatever the number of tenants.
	costGeneration = 4096
)

// costSum is one tenant's completions in the period.
type costSum struct {
	sum float64
	n   int
}

// costTable keeps the per-tenant cost estimates of a stage's fair queue,
// in seconds, in two generations (cur, the tenants estimated since the
// last turnover; old, those before), and the period's completions. Not
// safe for concurrent use: the stage's gate lock guards it.
type costTable struct {
	cur, old map[string]float64
	all      float64 // estimate over every completion (0: none yet)
	period   map[string]costSum
	allSum   costSum
	// fresh holds the tenants with completions in the last period
	// folded (for the deadline budget, see need).
	fresh map[string]bool
}

func newCostTable() *costTable {
	return &costTable{cur: make(map[string]float64), period: make(map[string]costSum), fresh: make(map[string]bool)}
}

// estimate returns tenant's estimated cost in seconds.
func (t *costTable) estimate(tenant string) float64 {
	if c, ok := t.cur[tenant]; ok {
		return c
	}
	if c, ok := t.old[tenant]; ok {
		return c
	}
	return t.mean()
}

// mean returns the estimated cost of a request of any tenant, seconds.
func (t *costTable) mean() float64 {
	if t.all > 0 {
		return t.all
	}
	return NominalCost.Seconds()
}

// observe records a completed request of tenant that cost c, for the
// period's estimate (fold), and returns c in seconds (at least minCost).
// The period's map is bounded like the estimates: past costGeneration
// tenants, the others count in the average only.
func (t *costTable) observe(tenant string, c time.Duration) float64 {
	x := max(c, minCost).Seconds()
	t.allSum.sum += x
	t.allSum.n++
	s, ok := t.period[tenant]
	if !ok && len(t.period) >= costGeneration {
		return x
	}
	s.sum += x
	s.n++
	t.period[tenant] = s
	return x
}

// fold ends a period: every tenant with completions in it moves its
// estimate towards their mean cost.
func (t *costTable) fold() {
	if t.allSum.n > 0 {
		m := t.allSum.sum / float64(t.allSum.n)
		if t.all == 0 {
			t.all = m
		} else {
			t.all += CostSmoothing * (m - t.all)
		}
		t.allSum = costSum{}
	}
	clear(t.fresh)
	for tenant, s := range t.period {
		t.fresh[tenant] = true
		m := s.sum / float64(s.n)
		v, ok := t.cur[tenant]
		if !ok {
			if v, ok = t.old[tenant]; ok {
				delete(t.old, tenant)
			}
		}
		if ok {
			v += CostSmoothing * (m - v)
		} else {
			v = m
		}
		if !ok && len(t.cur) >= costGeneration {
			t.old, t.cur = t.cur, make(map[string]float64, costGeneration)
		}
		t.cur[tenant] = v
	}
	clear(t.period)
}

// maxShownCosts bounds the tenants State shows the costs of.
const maxShownCosts = 32

// costliest returns the estimates of the n costliest tenants of the
// current generation (ties by name).
func (t *costTable) costliest(n int) map[string]float64 {
	if len(t.cur) == 0 {
		return nil
	}
	names := make([]string, 0, len(t.cur))
	for k := range t.cur {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := t.cur[names[i]], t.cur[names[j]]
		return a > b || (a == b && names[i] < names[j])
	})
	out := make(map[string]float64, min(n, len(names)))
	for _, k := range names[:min(n, len(names))] {
		out[k] = t.cur[k]
	}
	return out
}

// tenants returns the number of tenants with an estimate.
func (t *costTable) tenants() int { return len(t.cur) + len(t.old) }

// validateCost checks a cost measure.
func validateCost(m CostMeasure) error {
	if !m.valid() {
		return fmt.Errorf("tenant cost %q must be one of %v", m, CostMeasures)
	}
	return nil
}
