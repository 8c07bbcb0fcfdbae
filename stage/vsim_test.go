// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"container/heap"
	"math"
	"time"

	"github.com/sluicehq/sluice/gate"
)

// vsim is a small discrete-event engine for this package's virtual-time
// tests: events ordered by (time, sequence), no goroutines, so a run
// repeats exactly.
type vsim struct {
	now time.Time
	seq uint64
	h   vheap
}

// vevent is one scheduled function; cancel takes it out.
type vevent struct {
	at   time.Time
	seq  uint64
	fn   func()
	idx  int
	dead bool
}

type vheap []*vevent

func (h vheap) Len() int { return len(h) }
func (h vheap) Less(i, j int) bool {
	return h[i].at.Before(h[j].at) || (h[i].at.Equal(h[j].at) && h[i].seq < h[j].seq)
}
func (h vheap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *vheap) Push(x any)   { e := x.(*vevent); e.idx = len(*h); *h = append(*h, e) }
func (h *vheap) Pop() any     { o := *h; e := o[len(o)-1]; *h = o[:len(o)-1]; e.idx = -1; return e }
func (e *vevent) cancel(v *vsim) {
	if e != nil && !e.dead && e.idx >= 0 {
		heap.Remove(&v.h, e.idx)
		e.dead = true
	}
}

// at runs fn at t (not before now).
func (v *vsim) at(t time.Time, fn func()) *vevent {
	if t.Before(v.now) {
		t = v.now
	}
	v.seq++
	e := &vevent{at: t, seq: v.seq, fn: fn}
	heap.Push(&v.h, e)
	return e
}

// every runs fn every d from now + d until the run ends.
func (v *vsim) every(d time.Duration, fn func()) {
	var tick func()
	tick = func() { fn(); v.at(v.now.Add(d), tick) }
	v.at(v.now.Add(d), tick)
}

// run processes the events up to until and leaves now there.
func (v *vsim) run(until time.Time) {
	for len(v.h) > 0 && !v.h[0].at.After(until) {
		e := heap.Pop(&v.h).(*vevent)
		e.dead = true
		v.now = e.at
		e.fn()
	}
	v.now = until
}

// vWaiter is a queued request of a simulation on a vsim: granted, it is
// served; dropped, or out of time when its wait's deadline comes (the
// timer), it is refused.
type vWaiter struct {
	Wait
	v      *vsim
	timer  *vevent
	serve  func(Ticket)
	refuse func()
}

func (w *vWaiter) Granted(t Ticket) { w.timer.cancel(w.v); w.serve(t) }
func (w *vWaiter) Dropped(error)    { w.timer.cancel(w.v); w.refuse() }

// vArrive offers r to st at v's clock: admitted, it is served at once;
// rejected, refused; queued, it waits until its slot (served), its drop
// or its wait's deadline, at which it leaves the queue (refused).
func vArrive(v *vsim, st *Stage, r Request, serve func(Ticket), refuse func()) {
	w := &vWaiter{v: v, serve: serve, refuse: refuse}
	w.Notify = w
	tk, o, _ := st.ArriveRequest(v.now, r, &w.Wait)
	switch o {
	case gate.Admitted:
		serve(tk)
	case gate.Rejected:
		refuse()
	default:
		w.timer = v.at(w.Deadline, func() {
			if st.Leave(v.now, &w.Wait, true) {
				refuse()
			}
		})
	}
}

// psServer is a CPU of `cores` cores under processor sharing, as a Go
// service's CPU-bound handlers share GOMAXPROCS: each of the n jobs in it
// progresses at min(1, cores/n) seconds of work per second.
type psServer struct {
	v     *vsim
	cores float64
	jobs  []*psJob
	last  time.Time
	next  *vevent
}

// psJob is one request's work at a psServer.
type psJob struct {
	demand, rem float64 // seconds of work: all of it, and what is left
	done        func()  // called when its work is done
	gone        bool
}

func (p *psServer) advance() {
	if n := len(p.jobs); n > 0 {
		rate := math.Min(1, p.cores/float64(n))
		dt := p.v.now.Sub(p.last).Seconds()
		for _, j := range p.jobs {
			j.rem -= rate * dt
		}
	}
	p.last = p.v.now
}

// schedule arms the next completion.
func (p *psServer) schedule() {
	p.next.cancel(p.v)
	p.next = nil
	if len(p.jobs) == 0 {
		return
	}
	least := p.jobs[0]
	for _, j := range p.jobs[1:] {
		if j.rem < least.rem {
			least = j
		}
	}
	rate := math.Min(1, p.cores/float64(len(p.jobs)))
	dt := time.Duration(math.Ceil(max(least.rem, 0) / rate * 1e9))
	p.next = p.v.at(p.v.now.Add(dt), p.complete)
}

func (p *psServer) complete() {
	p.next = nil
	p.advance()
	var done []*psJob
	keep := p.jobs[:0]
	for _, j := range p.jobs {
		if j.rem <= 1e-9 {
			j.rem = 0
			done = append(done, j)
		} else {
			keep = append(keep, j)
		}
	}
	p.jobs = keep
	p.schedule()
	for _, j := range done {
		j.gone = true
		j.done()
	}
}

// submit starts a job of demand seconds of work.
func (p *psServer) submit(demand float64, done func()) *psJob {
	p.advance()
	j := &psJob{demand: demand, rem: demand, done: done}
	p.jobs = append(p.jobs, j)
	p.schedule()
	return j
}
