// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/gate"
)

// costTenant is one tenant of a costSim: its Poisson arrival rate and the
// mean of its exponential service demand.
type costTenant struct {
	name string
	rate float64       // requests per second
	mean time.Duration // mean demand at the CPU
}

// costSim drives a stage in front of a processor-sharing CPU (psServer)
// in virtual time, one arrival stream per tenant, and counts per tenant
// the work done for its completed requests.
type costSim struct {
	v       vsim
	st      *Stage
	cpu     *psServer
	rng     *rand.Rand
	tenants []costTenant
	// measured from the start of the window
	counting bool
	fixed    bool      // every demand is its tenant's mean
	work     []float64 // seconds of work of completed requests
	ok, rej  []int
	rt       [][]time.Duration
}

func newCostSim(t *testing.T, st *Stage, cores float64, seed uint64, tenants []costTenant) *costSim {
	t.Helper()
	n := len(tenants)
	c := &costSim{st: st, rng: rand.New(rand.NewPCG(seed, 99)), tenants: tenants,
		work: make([]float64, n), ok: make([]int, n), rej: make([]int, n), rt: make([][]time.Duration, n)}
	c.v.now = st.created
	c.cpu = &psServer{v: &c.v, cores: cores, last: c.v.now}
	for i := range tenants {
		c.arrive(i)
	}
	c.v.every(st.Poll(), func() { st.Step(c.v.now) })
	return c
}

// arrive schedules tenant i's next arrival.
func (c *costSim) arrive(i int) {
	c.v.at(c.v.now.Add(time.Duration(c.rng.ExpFloat64()/c.tenants[i].rate*1e9)), func() {
		c.arrive(i)
		vArrive(&c.v, c.st, Request{Tenant: c.tenants[i].name}, func(tk Ticket) { c.serve(tk, i) }, func() {
			if c.counting {
				c.rej[i]++
			}
		})
	})
}

// serve runs an admitted request of tenant i at the CPU.
func (c *costSim) serve(tk Ticket, i int) {
	d := c.rng.ExpFloat64() * c.tenants[i].mean.Seconds()
	if c.fixed {
		d = c.tenants[i].mean.Seconds()
	}
	c.cpu.submit(d, func() {
		tk.Finish(c.v.now, Outcome{OK: true})
		if c.counting {
			c.work[i] += d
			c.ok[i]++
			c.rt[i] = append(c.rt[i], c.v.now.Sub(tk.Arrival()))
		}
	})
}

// runCost warms the stage up for 10 s and measures the next 20 s.
func (c *costSim) runCost() {
	c.v.run(c.st.created.Add(10 * time.Second))
	c.counting = true
	c.v.run(c.st.created.Add(30 * time.Second))
}

// maxMin returns the max-min fair shares of capacity among demands
// (equal weights): water-filling.
func maxMin(capacity float64, demands []float64) []float64 {
	out := make([]float64, len(demands))
	left := capacity
	idx := make([]int, len(demands))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case demands[a] < demands[b]:
			return -1
		case demands[a] > demands[b]:
			return 1
		}
		return 0
	})
	for k, i := range idx {
		share := left / float64(len(idx)-k)
		out[i] = min(demands[i], share)
		left -= out[i]
	}
	return out
}

// Two APIs of one service, one 10× (and 50×) as costly as the other,
// are two tenants of one auto stage in front of a CPU of 8 cores under
// processor sharing (a Go service's CPU-bound handlers), in virtual
// time. The fair share is by service time (the CPU's work): max-min fair
// over the work each tenant offers. With tenants.cost service_time the
// light API keeps ≥ 0.95 of its fair share and the costly one gets the
// rest, not zero, whether the light one asks for less than half (the
// costly one's cost multiplied under a steady mix) or both ask for more;
// charged per request (the default, the control), the light API gets far
// less.
func TestStageTenantsCostFair(t *testing.T) {
	const cores = 8.0
	light := 2 * time.Millisecond
	type scenario struct {
		name                 string
		factor               float64 // the costly API's cost ÷ the light one's
		lightLoad, heavyLoad float64 // offered work ÷ capacity
	}
	var cases []scenario
	for _, f := range []float64{10, 50} {
		cases = append(cases,
			scenario{fmt.Sprintf("x%g/light-under-half", f), f, 0.3, 3},
			scenario{fmt.Sprintf("x%g/both-over", f), f, 2, 2})
	}
	if raceEnabled {
		// One goroutine in virtual time: nothing for the detector to
		// find, and the eight runs take it minutes; one run keeps the
		// code path under it.
		cases = cases[:1]
	}
	for _, sc := range cases {
		for _, cost := range []CostMeasure{CostServiceTime, CostRequests} {
			if raceEnabled && cost == CostRequests {
				continue
			}
			seed := uint64(1)
			t.Run(sc.name+"/"+string(cost), func(t *testing.T) {
				heavy := time.Duration(sc.factor * float64(light))
				ten := []costTenant{
					{name: "light", rate: sc.lightLoad * cores / light.Seconds(), mean: light},
					{name: "heavy", rate: sc.heavyLoad * cores / heavy.Seconds(), mean: heavy},
				}
				cfg := auto.DefaultConfig()
				cfg.SLO = time.Second
				// A window of 1000 completions: with costs 10–50× apart a
				// window of 200 holds a handful of costly ones, and its
				// throughput (in units of the mean cost) is too noisy for
				// the probes (the CPU 0.83–0.91 busy instead of 0.91–0.98).
				cfg.MinCompletions = 1000
				st := newStage(t, Options{Name: "api", Controller: &cfg, Tenants: Tenants{Fair: true, Cost: cost}}, t0)
				c := newCostSim(t, st, cores, seed, ten)
				c.runCost()
				const secs = 20.0
				demand := []float64{sc.lightLoad * cores, sc.heavyLoad * cores}
				fair := maxMin(cores, demand)
				got := []float64{c.work[0] / secs, c.work[1] / secs}
				slices.Sort(c.rt[0])
				p99 := time.Duration(0)
				if n := len(c.rt[0]); n > 0 {
					p99 = c.rt[0][n*99/100]
				}
				t.Logf("%s: light %.2f of fair %.2f CPU-s/s (%.3f×, %d ok, %d rejected, p99 %v); heavy %.2f of fair %.2f (%d ok, %d rejected); CPU busy %.3f",
					cost, got[0], fair[0], got[0]/fair[0], c.ok[0], c.rej[0], p99, got[1], fair[1], c.ok[1], c.rej[1], (got[0]+got[1])/cores)
				if cost == CostRequests {
					if got[0] >= 0.95*fair[0] {
						t.Errorf("charged per request the light API already gets %.3f× its fair share: the test does not need cost", got[0]/fair[0])
					}
					return
				}
				if got[0] < 0.95*fair[0] {
					t.Errorf("light API: %.2f CPU-s/s, %.3f× its fair share %.2f (want ≥ 0.95×)", got[0], got[0]/fair[0], fair[0])
				}
				if rest := cores - got[0]; got[1] < 0.8*min(rest, demand[1]) {
					t.Errorf("costly API: %.2f CPU-s/s of the %.2f the light one leaves (want ≥ 0.8×, not zero)", got[1], rest)
				}
			})
		}
	}
}

// traceWaiter records the order in which queued requests get their slot.
type traceWaiter struct {
	Wait
	name    string
	granted *[]string
	tickets map[string]Ticket
}

func (w *traceWaiter) Granted(t Ticket) {
	*w.granted = append(*w.granted, w.name)
	w.tickets[w.name] = t
}
func (w *traceWaiter) Dropped(error) { *w.granted = append(*w.granted, "dropped:"+w.name) }

// costTrace builds a stage of one slot with fair queueing under cost,
// teaches it that a request of "light" costs 1 ms and one of "heavy"
// 9.5 ms (their first completions, folded at a step), takes the slot
// with a blocker, and queues heavy, twelve lights and heavy again.
func costTrace(t *testing.T, cost CostMeasure) (st *Stage, now time.Time, order *[]string, tickets map[string]Ticket, blocker Ticket) {
	t.Helper()
	st = newStage(t, Options{Name: "trace", Controller: &control.StaticConcurrencyConfig{Limit: 1, Period: 100 * time.Millisecond},
		QueueTimeout: time.Minute, Tenants: Tenants{Fair: true, Cost: cost}}, t0)
	now = t0
	for _, r := range []struct {
		tenant string
		cost   time.Duration
	}{{"light", time.Millisecond}, {"heavy", 9500 * time.Microsecond}} {
		tk, o, _ := st.ArriveRequest(now, Request{Tenant: r.tenant}, nil)
		if o != gate.Admitted {
			t.Fatalf("%s: %v", r.tenant, o)
		}
		now = now.Add(r.cost)
		tk.Finish(now, Outcome{OK: true})
	}
	now = t0.Add(100 * time.Millisecond)
	st.Step(now) // folds the period's costs into the estimates
	blocker, o, _ := st.ArriveRequest(now, Request{Tenant: "x"}, nil)
	if o != gate.Admitted {
		t.Fatalf("blocker: %v", o)
	}
	order = new([]string)
	tickets = map[string]Ticket{}
	names := []string{"H1"}
	for i := 1; i <= 12; i++ {
		names = append(names, fmt.Sprintf("L%d", i))
	}
	names = append(names, "H2")
	for _, n := range names {
		w := &traceWaiter{name: n, granted: order, tickets: tickets}
		w.Notify = w
		tenant := "light"
		if n[0] == 'H' {
			tenant = "heavy"
		}
		if _, o, _ := st.ArriveRequest(now, Request{Tenant: tenant}, &w.Wait); o != gate.Queued {
			t.Fatalf("%s: %v, want queued", n, o)
		}
	}
	return st, now, order, tickets, blocker
}

// drain finishes the slot's holder after the given cost each time, until
// the queue is empty.
func drainTrace(st *Stage, now time.Time, order *[]string, tickets map[string]Ticket, blocker Ticket, cost func(name string) time.Duration) {
	blocker.Finish(now, Outcome{OK: true, NoSample: true})
	for done := 0; done < len(*order); done++ {
		name := (*order)[done]
		now = now.Add(cost(name))
		tickets[name].Finish(now, Outcome{OK: true})
	}
}

// The cost-fair queue on a hand-worked trace. A slot is held; then heavy
// (estimated 9.5 ms), twelve lights (1 ms each) and heavy again queue, in
// that order, with V_c = 0. Under service_time their tags are
// H1 = 0.0095, L_k = 0.001·k, H2 = 0.019: the slot goes to L1…L9, H1,
// L10…L12, H2 — each tenant gets about the same time, the heavy one a
// grant for every 9.5 of the light one's. Charged per request
// (requests), tags H1 = L1 = 1, L2 = H2 = 2 (equal tags in arrival
// order): H1 L1 L2 H2 L3 … — the heavy tenant gets as many grants, and
// ten times the time.
func TestFairQueueCostTrace(t *testing.T) {
	exact := func(name string) time.Duration {
		if name[0] == 'H' {
			return 9500 * time.Microsecond
		}
		return time.Millisecond
	}
	for _, tc := range []struct {
		cost CostMeasure
		want string
	}{
		{CostServiceTime, "L1 L2 L3 L4 L5 L6 L7 L8 L9 H1 L10 L11 L12 H2"},
		{CostRequests, "H1 L1 L2 H2 L3 L4 L5 L6 L7 L8 L9 L10 L11 L12"},
	} {
		st, now, order, tickets, blocker := costTrace(t, tc.cost)
		drainTrace(st, now, order, tickets, blocker, exact)
		if got := strings.Join(*order, " "); got != tc.want {
			t.Errorf("%s: slots went to\n  %s\nwant\n  %s", tc.cost, got, tc.want)
		}
	}
}

// A request that costs more than its tag charged is settled when it
// ends: its tenant's waiters move back by the difference. In the trace
// above, L1 takes 5 ms instead of the 1 ms charged: the light tenant's
// waiters' tags move back by 4 ms, L_k = 0.001·k + 0.004 for k ≥ 2, so
// H1 (0.0095) now goes after L5 (0.009) instead of after L9. Without
// the settlement the order would be the trace's.
func TestFairQueueCostSettles(t *testing.T) {
	st, now, order, tickets, blocker := costTrace(t, CostServiceTime)
	drainTrace(st, now, order, tickets, blocker, func(name string) time.Duration {
		switch {
		case name == "L1":
			return 5 * time.Millisecond
		case name[0] == 'H':
			return 9500 * time.Microsecond
		}
		return time.Millisecond
	})
	// L_k = 0.001·k + 0.004 for k ≥ 2: L2 0.006 … L5 0.009, H1 0.0095,
	// L6 0.010 … L12 0.016, H2 0.019.
	want := "L1 L2 L3 L4 L5 H1 L6 L7 L8 L9 L10 L11 L12 H2"
	if got := strings.Join(*order, " "); got != want {
		t.Errorf("slots went to\n  %s\nwant\n  %s", got, want)
	}
}

// Two tenants that both flood a fixed concurrency limit (static-
// concurrency: no predicted-wait rejection, so their surplus queues and
// expires at the end of its wait) still share it: a waiter that leaves
// unserved gives its charge back, and its tenant's later waiters move up
// by it. When only a tenant's newest waiter gave its charge back, the
// tenant whose waiters expired more ran ever further ahead in virtual
// time, lost still more waiters to expiry, and was starved: before the
// fix this test gave a 1.12 and b 6.88 CPU-s/s charged per request, a
// 0.38 and b 7.62 charged by service time.
func TestStageTenantsExpiredGiveBack(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine in virtual time: nothing for the race detector, and minutes under it; runs without -race")
	}
	const cores = 8.0
	mean := 10 * time.Millisecond
	for _, cost := range []CostMeasure{CostRequests, CostServiceTime} {
		st := newStage(t, Options{Name: "flood", Controller: &control.StaticConcurrencyConfig{Limit: 8, Period: 100 * time.Millisecond},
			QueueTimeout: 500 * time.Millisecond, Tenants: Tenants{Fair: true, Cost: cost}}, t0)
		c := newCostSim(t, st, cores, 3, []costTenant{
			{name: "a", rate: 3 * cores / mean.Seconds(), mean: mean},
			{name: "b", rate: 1.5 * cores / mean.Seconds(), mean: mean}})
		c.runCost()
		a, b := c.work[0]/20, c.work[1]/20
		t.Logf("%s: a %.2f, b %.2f CPU-s/s of %g (served %v, rejected %v)", cost, a, b, cores, c.ok, c.rej)
		if a < 0.9*cores/2 || b < 0.9*cores/2 {
			t.Errorf("%s: a %.2f, b %.2f CPU-s/s: want each ≥ 0.9 × %g", cost, a, b, cores/2)
		}
	}
}

// The cost estimates stay bounded whatever the number of tenants: two
// generations of at most costGeneration tenants, and a period's map of at
// most as many.
func TestCostTableBounded(t *testing.T) {
	ct := newCostTable()
	for i := range 1_000_000 {
		ct.observe(strconv.Itoa(i), time.Duration(i%7+1)*time.Millisecond)
		if len(ct.period) > costGeneration {
			t.Fatalf("period holds %d tenants", len(ct.period))
		}
		if i%1000 == 999 {
			ct.fold()
		}
		if n := ct.tenants(); n > 2*costGeneration {
			t.Fatalf("%d tenants estimated after %d", n, i+1)
		}
	}
	if m := ct.mean(); m < 0.001 || m > 0.007 {
		t.Errorf("mean cost %v s, want within the costs observed", m)
	}
	if e := ct.estimate("never seen"); e != ct.mean() {
		t.Errorf("a new tenant is charged %v, want the mean %v", e, ct.mean())
	}
}
