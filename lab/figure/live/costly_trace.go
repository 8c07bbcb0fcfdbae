// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gate"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/tick"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/stage"
)

// Where the costly figure's calls end: every call's last loss (or none),
// from the hops' admissions (costlyGate), the entry's call to the leaf,
// the leaf's handler and the caller's answer, and the hops' limits and
// cost estimates sampled meanwhile, so that a row that misses its share
// says where the calls were lost.

// The places a call is lost, in the order they are reported.
const (
	lostUsersThrottle = "users' client throttle"
	lostEntryRefused  = "entry: refused at arrival"
	lostEntryDropped  = "entry: dropped from its queue"
	lostEntryGone     = "entry: deadline in its queue"
	lostEntryThrottle = "entry's client throttle"
	lostLeafRefused   = "leaf: refused at arrival"
	lostLeafDropped   = "leaf: dropped from its queue"
	lostLeafGone      = "leaf: deadline in its queue"
	lostLeafWork      = "leaf: deadline in service"
	lostLate          = "answered after its deadline"
	lostOther         = "other"
)

var costlyLosses = []string{lostUsersThrottle, lostEntryRefused, lostEntryDropped, lostEntryGone, lostEntryThrottle,
	lostLeafRefused, lostLeafDropped, lostLeafGone, lostLeafWork, lostLate, lostOther}

// costlyQueued is the least wait in a hop's admission that counts as
// queued: a refusal after it is a drop from the queue, not at arrival.
const costlyQueued = time.Millisecond

// costlyTrace is one row's record of where its calls went.
type costlyTrace struct {
	mu   sync.Mutex
	lost map[uint64]string // a call's last loss
	// samples of each hop's stage: limit, in flight, queued, and the
	// tenants' estimated costs (seconds per call), summed for means.
	n                      [2]int
	limit, inFlight, queue [2]float64
	cost                   [2]map[string]float64
	costN                  [2]map[string]int
}

func newCostlyTrace() *costlyTrace {
	tr := &costlyTrace{lost: map[uint64]string{}}
	for h := range tr.cost {
		tr.cost[h], tr.costN[h] = map[string]float64{}, map[string]int{}
	}
	return tr
}

// mark records that call id (its X-Lab-Call header) was lost at where.
func (tr *costlyTrace) mark(r *http.Request, where string) {
	id, err := strconv.ParseUint(r.Header.Get(costlyCallHdr), 10, 64)
	if err != nil {
		return
	}
	tr.markID(id, where)
}

func (tr *costlyTrace) markID(id uint64, where string) {
	tr.mu.Lock()
	tr.lost[id] = where
	tr.mu.Unlock()
}

// costlyGate is a hop's policy with its admissions' losses recorded.
type costlyGate struct {
	*policy.Policy
	tr                     *costlyTrace
	refused, dropped, gone string
}

func (g *costlyGate) Admit(r *http.Request) (sluice.Admission, error) {
	t0 := time.Now()
	a, err := g.Policy.Admit(r)
	switch {
	case err == nil:
	case errors.Is(err, sluice.ErrRejected) && time.Since(t0) < costlyQueued:
		g.tr.mark(r, g.refused+costlyWhy(err))
	case errors.Is(err, sluice.ErrRejected):
		g.tr.mark(r, g.dropped+costlyWhy(err))
	default:
		g.tr.mark(r, g.gone)
	}
	return a, err
}

// costlyWhy names a stage's refusal: its deadline would pass first
// (predicted), the queue was full or its wait ran out, or else the limit
// with a predicted wait beyond the allowed one.
func costlyWhy(err error) string {
	switch {
	case errors.Is(err, stage.ErrDeadline):
		return " (deadline)"
	case errors.Is(err, gate.ErrQueueFull):
		return " (queue full)"
	case errors.Is(err, gate.ErrQueueTimeout):
		return " (queue timeout)"
	}
	return " (no room: predicted wait)"
}

// gates returns the entry's and the leaf's policies with their losses
// recorded.
func (tr *costlyTrace) gates(entry, leaf *policy.Policy) (sluice.Policy, sluice.Policy) {
	return &costlyGate{Policy: entry, tr: tr, refused: lostEntryRefused, dropped: lostEntryDropped, gone: lostEntryGone},
		&costlyGate{Policy: leaf, tr: tr, refused: lostLeafRefused, dropped: lostLeafDropped, gone: lostLeafGone}
}

// sample adds both hops' stage states every 100 ms from from until stop.
func (tr *costlyTrace) sample(start time.Time, from time.Duration, pols [2]*policy.Policy, stop <-chan struct{}) {
	tick.Every(stop, 100*time.Millisecond, func() {
		if time.Since(start) < from {
			return
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for h, p := range pols {
			st := p.State(0)[0]
			if l := st.InFlightLimited; l != nil {
				tr.n[h]++
				tr.limit[h] += float64(l.Limit)
				tr.inFlight[h] += float64(l.InFlight)
				tr.queue[h] += float64(l.Queued)
			}
			for t, c := range st.TenantCosts {
				tr.cost[h][t] += c
				tr.costN[h][t]++
			}
		}
	})
}

// callEnd classifies the caller's side of a call that was not answered
// in time: its own throttle, a late answer, or else what the hops
// recorded.
func (tr *costlyTrace) callEnd(id uint64, err error, status int, lat time.Duration) {
	switch {
	case err == nil && status == http.StatusOK && lat > costlyDeadline:
		tr.markID(id, lostLate)
	case errors.Is(err, sluice.ErrRejected) && !errors.Is(err, context.DeadlineExceeded):
		// The users' client refused the call itself (client.ErrThrottled)
		// after any attempt the hops recorded.
		tr.markID(id, lostUsersThrottle)
	}
}

// report prints the losses of the measured calls by API and place, the
// hops' mean limits and queues, and the leaf's CPU slices' stretch.
func (tr *costlyTrace) report(env *Env, pl costlyPlan, calls []costlyCall, cpu *costlyCPU) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	lost := make([]map[string]int, len(figure.CostlyAPIs))
	sent := make([]int, len(figure.CostlyAPIs))
	for i := range lost {
		lost[i] = map[string]int{}
	}
	for _, c := range calls {
		if c.sent < pl.warm || c.sent >= pl.warm+pl.length {
			continue
		}
		sent[c.api]++
		if c.ok {
			continue
		}
		where, ok := tr.lost[c.id]
		if !ok {
			where = lostOther
		}
		lost[c.api][where]++
	}
	for api, name := range figure.CostlyAPIs {
		var parts []string
		for _, k := range costlyLosses {
			for _, w := range slices.Sorted(maps.Keys(lost[api])) {
				if n := lost[api][w]; n > 0 && (w == k || strings.HasPrefix(w, k+" (")) {
					parts = append(parts, fmt.Sprintf("%s %d", w, n))
				}
			}
		}
		env.Logf("%s: %d calls sent; lost: %s", name, sent[api], strings.Join(parts, ", "))
	}
	for h, hop := range []string{"entry", "leaf"} {
		n := max(1, float64(tr.n[h]))
		var costs []string
		for _, t := range slices.Sorted(maps.Keys(tr.cost[h])) {
			costs = append(costs, fmt.Sprintf("%s %.1f ms", t, 1e3*tr.cost[h][t]/float64(tr.costN[h][t])))
		}
		env.Logf("%s: mean limit %.1f, in flight %.1f, queued %.1f; estimated cost %s", hop,
			tr.limit[h]/n, tr.inFlight[h]/n, tr.queue[h]/n, strings.Join(costs, ", "))
	}
	env.Logf("leaf CPU: %s", cpu.stretch())
}
