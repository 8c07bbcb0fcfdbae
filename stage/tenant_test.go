// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"container/heap"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/gate"
)

// tenantSim is crowdSim's loop with one arrival stream per tenant (the
// event's class field is the tenant's index; every request is class 0)
// and exponential service times.
type tenantSim struct {
	crowdSim
	tenants  []string
	rates    []float64
	ok, rej  []int
	timedOut []int // of rej: waiters whose wait ended without a slot
	arrived  int
	rt       [][]time.Duration // response times of the successes, per tenant
	classes  []int             // each tenant's class (nil: all class 0)
	waiting  []crowdEvent      // admitted, waiting for a worker inside the backend
	// draw, when set, draws a service time in units of the mean
	// (default exponential).
	draw func(*rand.Rand) float64
}

type tenantWaiter struct {
	Wait
	sim *tenantSim
	i   int
}

func (w *tenantWaiter) Granted(t Ticket) { w.sim.start(t, w.i) }
func (w *tenantWaiter) Dropped(error)    { w.sim.rej[w.i]++ }

func (c *tenantSim) start(t Ticket, i int) {
	if c.busy >= c.workers {
		c.waiting = append(c.waiting, crowdEvent{tk: t, class: i})
		return
	}
	c.busy++
	x := 0.0
	if c.draw != nil {
		x = c.draw(c.rng)
	} else {
		x = c.rng.ExpFloat64()
	}
	c.push(&crowdEvent{at: c.now.Add(time.Duration(x * float64(c.service))), kind: 1, tk: t, class: i})
}

func (c *tenantSim) run(until time.Time) {
	if !c.started {
		c.started = true
		for i := range c.tenants {
			c.push(&crowdEvent{at: c.now, kind: 0, class: i})
		}
		c.push(&crowdEvent{at: c.now.Add(c.st.Poll()), kind: 3})
	}
	for c.events.Len() > 0 && !c.events[0].at.After(until) {
		e := heap.Pop(&c.events).(*crowdEvent)
		c.now = e.at
		switch e.kind {
		case 0:
			i := e.class
			c.arrived++
			c.push(&crowdEvent{at: c.now.Add(time.Duration(c.rng.ExpFloat64() / c.rates[i] * 1e9)), kind: 0, class: i})
			w := &tenantWaiter{sim: c, i: i}
			w.Notify = w
			r := Request{Tenant: c.tenants[i]}
			if c.classes != nil {
				r.Class = c.classes[i]
			}
			t, o, _ := c.st.ArriveRequest(c.now, r, &w.Wait)
			switch o {
			case gate.Admitted:
				c.start(t, i)
			case gate.Rejected:
				c.rej[i]++
			default:
				c.push(&crowdEvent{at: w.Deadline, kind: 2, w: &w.Wait, class: i})
			}
		case 1:
			e.tk.Finish(c.now, Outcome{OK: true})
			c.ok[e.class]++
			c.rt[e.class] = append(c.rt[e.class], c.now.Sub(e.tk.Arrival()))
			c.busy--
			if len(c.waiting) > 0 {
				n := c.waiting[0]
				c.waiting = c.waiting[1:]
				c.start(n.tk, n.class)
			}
		case 2:
			if c.st.Leave(c.now, e.w, true) {
				c.rej[e.class]++
				if c.timedOut != nil {
					c.timedOut[e.class]++
				}
			}
		case 3:
			c.st.Step(c.now)
			c.push(&crowdEvent{at: c.now.Add(c.st.Poll()), kind: 3})
		}
	}
	c.now = until
}

// Four tenants of equal weight under auto (SLO 250ms) at 3× overload, in
// virtual time: a service of 8 parallel workers, exponential service
// times of mean 10 ms (800 req/s); three light tenants offer 185 req/s
// each and the heavy one ten times that. With fair queueing each light
// tenant keeps ≥ 95 % of its fair share (its whole demand, which is below
// a quarter of the capacity) with its p99 within the objective, and the
// heavy tenant gets the rest, not zero; FIFO (the test's control) gives
// the light tenants about a third of their demand.
func TestStageTenantsFairUnderOverload(t *testing.T) {
	const capacity = 800.0
	light := 3 * capacity / 13
	run := func(fair bool) *tenantSim {
		cfg := auto.DefaultConfig()
		cfg.SLO = 250 * time.Millisecond
		st := newStage(t, Options{Name: "tenants", Controller: &cfg, Tenants: Tenants{Fair: fair}}, t0)
		c := &tenantSim{crowdSim: crowdSim{st: st, now: t0, service: 10 * time.Millisecond, rng: rand.New(rand.NewPCG(7, 8))},
			tenants: []string{"heavy", "a", "b", "c"}, rates: []float64{10 * light, light, light, light},
			ok: make([]int, 4), rej: make([]int, 4), rt: make([][]time.Duration, 4)}
		// The backend: 8 workers (the stage's limit may exceed them; the
		// surplus queues inside the service, as it would live).
		c.workers = 8
		c.run(t0.Add(10 * time.Second))
		for i := range c.ok {
			c.ok[i], c.rej[i], c.rt[i] = 0, 0, nil
		}
		c.run(t0.Add(30 * time.Second))
		return c
	}
	for _, fair := range []bool{true, false} {
		c := run(fair)
		share := capacity / 4
		for i, name := range c.tenants {
			got := float64(c.ok[i]) / 20
			slices.Sort(c.rt[i])
			p99 := time.Duration(0)
			if n := len(c.rt[i]); n > 0 {
				p99 = c.rt[i][(n*99)/100]
			}
			t.Logf("fair %v: %s offered %.0f req/s, served %.1f req/s, rejected %d, p99 %v", fair, name, c.rates[i], got, c.rej[i], p99)
			if !fair {
				if i > 0 && got > 0.5*light {
					t.Errorf("FIFO: light tenant %s got %.1f req/s: the test does not need fair queueing", name, got)
				}
				continue
			}
			if i == 0 {
				if got < 0.5*(capacity-3*light) {
					t.Errorf("heavy tenant got %.1f req/s of the %.0f left", got, capacity-3*light)
				}
				continue
			}
			if want := 0.95 * min(share, light); got < want || p99 > 250*time.Millisecond {
				t.Errorf("light tenant %s: %.1f req/s (want ≥ %.1f), p99 %v (want ≤ 250ms)", name, got, want, p99)
			}
		}
	}
}

type floodWaiter struct {
	Wait
	waiting bool
	held    *[]Ticket
}

func (w *floodWaiter) Granted(t Ticket) { w.waiting = false; *w.held = append(*w.held, t) }
func (w *floodWaiter) Dropped(error)    { w.waiting = false }

// A flood of distinct tenant values cannot grow the stage's memory:
// tenant state lives only while the tenant has a waiter, so 1,000,000
// requests of distinct tenants through a queue of 64 leave at most 64
// tenants known at any time and the heap where it was.
func TestStageTenantsBounded(t *testing.T) {
	cfg := control.StaticConcurrencyConfig{Limit: 4, Period: time.Second}
	st := newStage(t, Options{Name: "flood", Controller: &cfg, MaxQueue: 64, QueueTimeout: time.Second,
		Tenants: Tenants{Fair: true}}, t0)
	n := 1_000_000
	if raceEnabled {
		// One goroutine: nothing for the detector to find, and 1,000,000
		// requests take it half a minute; the bound is the same.
		n = 100_000
	}
	var held []Ticket
	waits := make([]floodWaiter, 128)
	var ms0, ms1 runtime.MemStats
	most := 0
	now := t0
	for i := range n {
		if i == 10_000 {
			runtime.GC()
			runtime.ReadMemStats(&ms0)
		}
		now = now.Add(time.Microsecond)
		tenant := strconv.Itoa(i) // a fresh string per request, as header values are
		w := &waits[i%len(waits)]
		if w.waiting {
			st.Leave(now, &w.Wait, false) // the client went away
		}
		*w = floodWaiter{held: &held}
		w.Notify = w
		tk, o, _ := st.ArriveRequest(now, Request{Tenant: tenant}, &w.Wait)
		switch o {
		case gate.Admitted:
			held = append(held, tk)
		case gate.Queued:
			w.waiting = true
		}
		if i%2 == 0 && len(held) > 0 {
			held[0].Finish(now, Outcome{OK: true})
			held = held[1:]
		}
		most = max(most, st.Tenants())
	}
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	if most > 64 {
		t.Errorf("%d tenants known at once; want ≤ the queue's 64", most)
	}
	grew := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc)
	t.Logf("%d requests of distinct tenants: at most %d tenants known, heap %+d B", n, most, grew)
	if grew > 1<<20 {
		t.Errorf("heap grew by %d B over %d tenant values", grew, n)
	}
}
