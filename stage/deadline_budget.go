// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"errors"
	"time"
)

// Deadline budget (Tenants.DeadlineBudget). A request whose deadline
// passes in service is cancelled through its context, at this hop and
// every hop after it, but the work it did before is lost: that is the
// wasted work of the costly figure. Admission alone refuses a request
// whose deadline has passed or whose predicted wait for a slot exceeds
// what is left of it; a request that gets its slot with 10 ms left
// still starts work it needs 50 ms for. The deadline budget charges the
// tenant's expected service time at this hop against the deadline
// before the request starts:
//
//	need_t = k · ĉ_t  (k = Tenants.DeadlineBudget; ĉ_t the tenant's
//	                  estimated service time, Tenants.Cost service_time;
//	                  0 for a tenant with no completion in the last
//	                  control period, see below)
//	refuse at arrival        ⇔  deadline − now ≤ need_t
//	wait in the queue until     deadline − need_t
//	                           (or the allowed wait, if that ends first)
//
// so a request is started only while the time left covers what its
// tenant's requests take here, and a waiter whose remaining time no
// longer covers it leaves the queue (as a deadline rejection) instead of
// taking a slot: the gate skips an expired waiter at a grant and gives
// the slot to the next. A refusal is cheap, no work is lost; the
// estimate is evaluated once, when the request arrives.
//
// Only a tenant with completions in the last control period is
// budgeted. An estimate measured under a stretch (a CPU shared by more
// calls than it has cores) can exceed every deadline; the budget would
// then refuse every request of the tenant, no completion would correct
// the estimate, and the tenant would be shut out for good (seen in the
// costly figure at a budget of 3: the costly API's goodput fell to 0).
// A tenant without completions in the last period is admitted as if
// there were no budget, and its first completions refresh its estimate.
//
// It is the client side's min_remaining (a request is not sent with
// less of its deadline left) made per tenant and measured: the SRE
// book's advice on deadline propagation (Beyer et al., Site Reliability
// Engineering, ch. 22) is that a server check the time left at each
// stage of its work and not start what cannot finish; a hop knows what
// its work takes from the service times it measures, per tenant, for
// fair queueing by cost. The budget is a mean: a request longer than
// its tenant's mean may still run out of time in service and be
// cancelled, and a tenant whose service times stretch under load (a
// processor-sharing CPU at more calls than cores) is budgeted at the
// stretched time. Off by default: with it off, the deadline is held as
// Request.Deadline says (refused once passed or once the predicted wait
// exceeds it, and out of the queue when it passes).

// errBudgetCost is DeadlineBudget with a cost measure that is not a
// service time.
var errBudgetCost = errors.New("tenant deadline_budget needs cost service_time (the budget is the tenant's estimated service time)")

// need returns what tenant's request is expected to take in service at
// this stage, charged against its deadline (0: no deadline budget).
func (f *fairQueue) need(tenant string) time.Duration {
	if f == nil || f.budget <= 0 || f.costs == nil || !f.costs.fresh[tenant] {
		return 0
	}
	return time.Duration(f.budget * f.costs.estimate(tenant) * float64(time.Second))
}

// overBudget reports whether request r arriving at now has no more time
// before its deadline than its tenant's expected service time (need >
// 0), and so is refused at once.
func overBudget(now time.Time, r Request, need time.Duration) bool {
	return need > 0 && !r.Deadline.IsZero() && r.Deadline.Sub(now) <= need
}
