// SPDX-License-Identifier: Apache-2.0

// Package sim is sluice's discrete-event simulator: a virtual-time engine
// and small queueing models (FIFO and processor-sharing servers, a listen
// queue, open and closed-loop sources, a per-period recorder and the Kihl
// fluid model) from which the experiments of ALGORITHMS.md are built.
//
// The simulator never re-implements a controller or a gate: scenarios plug
// the real ones in through the Admitter hook and call their Update from an
// Engine.Every tick with the Measurements a Recorder produces.
//
// Everything runs on one goroutine with no wall clock: the same seed gives
// the same run, event for event. Nothing in this package is safe for
// concurrent use.
package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

// Forever is the largest virtual time; Run(Forever) runs until no event is
// left (or Stop is called).
const Forever = time.Duration(math.MaxInt64)

// event is one scheduled callback. Events are recycled through a free
// list; gen changes on every recycle so that a stale Timer cannot cancel a
// reused event.
type event struct {
	at    time.Duration
	seq   uint64
	fn    func()
	index int // position in the heap, −1 when not queued
	gen   uint64
}

// Engine is a discrete-event simulator: a virtual clock and a heap of
// pending events ordered by (time, sequence number), so that events at
// equal times run in the order they were scheduled and every run repeats
// exactly. The clock is a time.Duration offset from 0; Time maps it onto a
// base time.Time for code that takes a now time.Time.
//
// The zero value is not usable; call New. An Engine is not safe for
// concurrent use, and event callbacks run on the goroutine that called Run.
type Engine struct {
	now       time.Duration
	base      time.Time
	seed      uint64
	seq       uint64
	heap      []*event
	free      []*event
	rng       *rand.Rand
	processed uint64
	stopped   bool
	nextID    uint64
	anon      map[string]int
}

// DefaultBase is the wall time of virtual time 0 unless NewAt says
// otherwise: the Unix epoch in UTC.
var DefaultBase = time.Unix(0, 0).UTC()

// New returns an engine at virtual time 0 with base time DefaultBase,
// whose random streams derive from seed.
func New(seed uint64) *Engine { return NewAt(seed, DefaultBase) }

// NewAt returns an engine at virtual time 0 that maps it to base.
func NewAt(seed uint64, base time.Time) *Engine {
	e := &Engine{base: base, seed: seed, anon: map[string]int{}}
	e.rng = e.Stream("engine")
	return e
}

// Now returns the virtual time.
func (e *Engine) Now() time.Duration { return e.now }

// Time returns the virtual time as a wall time: Base() + Now(). Pass it as
// the now argument of controllers and gates.
func (e *Engine) Time() time.Time { return e.base.Add(e.now) }

// Base returns the wall time of virtual time 0.
func (e *Engine) Base() time.Time { return e.base }

// Seed returns the seed the engine was created with.
func (e *Engine) Seed() uint64 { return e.seed }

// Rand returns the engine's own random stream (the stream named "engine").
func (e *Engine) Rand() *rand.Rand { return e.rng }

// Stream returns a new random source for the named component, derived
// deterministically from the engine's seed and the name: the same seed and
// name always give the same stream, whatever else the run creates, so
// adding a component does not perturb the others. Components that need
// independent randomness must use distinct names.
func (e *Engine) Stream(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(e.seed, h.Sum64()))
}

// streamName returns name, or when name is empty a name unique within the
// engine built from kind and a counter ("open#1", "open#2", …), so that
// unnamed components get distinct but reproducible streams.
func (e *Engine) streamName(kind, name string) string {
	if name != "" {
		return name
	}
	e.anon[kind]++
	return fmt.Sprintf("%s#%d", kind, e.anon[kind])
}

// NextID returns a fresh request identifier (1, 2, 3, …).
func (e *Engine) NextID() uint64 {
	e.nextID++
	return e.nextID
}

// Processed returns the number of events run so far.
func (e *Engine) Processed() uint64 { return e.processed }

// Pending returns the number of events waiting in the heap.
func (e *Engine) Pending() int { return len(e.heap) }

// Timer is a handle on a scheduled event. The zero value is a timer that
// is not pending. Timers are small values; copy them freely.
type Timer struct {
	e   *Engine
	ev  *event
	gen uint64
}

// Pending reports whether the event is still waiting to run.
func (t Timer) Pending() bool { return t.ev != nil && t.ev.gen == t.gen && t.ev.index >= 0 }

// When returns the virtual time the event is scheduled for, and false if
// it is no longer pending.
func (t Timer) When() (time.Duration, bool) {
	if !t.Pending() {
		return 0, false
	}
	return t.ev.at, true
}

// Stop cancels the event. It returns true if the event was pending, and
// false if it had already run or been stopped.
func (t Timer) Stop() bool {
	if !t.Pending() {
		return false
	}
	t.e.remove(t.ev.index)
	t.e.recycle(t.ev)
	return true
}

// Schedule arranges for fn to run at virtual time at. A time before Now
// runs at Now (like time.AfterFunc with a negative duration); events at
// the same time run in the order they were scheduled.
func (e *Engine) Schedule(at time.Duration, fn func()) Timer {
	if at < e.now {
		at = e.now
	}
	var ev *event
	if n := len(e.free); n > 0 {
		ev = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		ev = &event{}
	}
	e.seq++
	ev.at, ev.seq, ev.fn = at, e.seq, fn
	e.push(ev)
	return Timer{e: e, ev: ev, gen: ev.gen}
}

// After arranges for fn to run d after Now; d ≤ 0 runs at Now. The time
// saturates at Forever.
func (e *Engine) After(d time.Duration, fn func()) Timer {
	return e.Schedule(addSat(e.now, d), fn)
}

// addSat returns a + d, saturating at Forever.
func addSat(a, d time.Duration) time.Duration {
	if d > 0 && a > Forever-d {
		return Forever
	}
	return a + d
}

// Seconds converts a float64 number of seconds, as dist distributions
// produce, to a time.Duration rounded to the nanosecond. Negative and NaN
// values give 0; values too large for a Duration give Forever.
func Seconds(s float64) time.Duration {
	switch {
	case !(s > 0): // includes NaN
		return 0
	case s*1e9 >= float64(Forever):
		return Forever
	}
	return time.Duration(math.Round(s * 1e9))
}

// Run runs events in order until the next one is later than until, no
// event is left, or Stop is called; an event at exactly until runs. The
// clock then reads until (unless Stop ended the run early, in which case
// it reads the time of the last event). A Run with until < Now runs
// nothing.
func (e *Engine) Run(until time.Duration) {
	e.stopped = false
	for len(e.heap) > 0 && !e.stopped {
		ev := e.heap[0]
		if ev.at > until {
			break
		}
		e.remove(0)
		e.now = ev.at
		fn := ev.fn
		e.recycle(ev)
		e.processed++
		fn()
	}
	if !e.stopped && e.now < until && until != Forever {
		e.now = until
	}
}

// Step runs the next event, whatever its time, and reports whether there
// was one.
func (e *Engine) Step() bool {
	if len(e.heap) == 0 {
		return false
	}
	ev := e.heap[0]
	e.remove(0)
	e.now = ev.at
	fn := ev.fn
	e.recycle(ev)
	e.processed++
	fn()
	return true
}

// Stop makes the current Run return after the event that is running.
func (e *Engine) Stop() { e.stopped = true }

// Ticker runs a function periodically in virtual time; see Engine.Every.
type Ticker struct {
	e       *Engine
	period  time.Duration
	origin  time.Duration
	k       int64
	fn      func()
	timer   Timer
	tick    func()
	stopped bool
}

// Every runs fn at Now+h, Now+2h, Now+3h, … until the returned Ticker is
// stopped. Tick times are computed as multiples of h from the start, so
// they do not drift. h must be positive.
func (e *Engine) Every(h time.Duration, fn func()) (*Ticker, error) {
	if h <= 0 {
		return nil, fmt.Errorf("sim: Every: period %v must be positive", h)
	}
	if fn == nil {
		return nil, fmt.Errorf("sim: Every: nil function")
	}
	t := &Ticker{e: e, period: h, origin: e.now, fn: fn}
	t.tick = t.run
	t.schedule()
	return t, nil
}

func (t *Ticker) schedule() {
	t.k++
	at := Forever
	if t.k <= int64(Forever-t.origin)/int64(t.period) {
		at = t.origin + time.Duration(t.k)*t.period
	}
	t.timer = t.e.Schedule(at, t.tick)
}

func (t *Ticker) run() {
	if t.stopped {
		return
	}
	t.schedule() // before fn, so that fn may Stop the ticker
	t.fn()
}

// Stop stops the ticker; fn will not run again.
func (t *Ticker) Stop() {
	t.stopped = true
	t.timer.Stop()
}

// Period returns the tick period.
func (t *Ticker) Period() time.Duration { return t.period }

// The heap: a binary min-heap of events by (at, seq).

func less(a, b *event) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

func (e *Engine) push(ev *event) {
	ev.index = len(e.heap)
	e.heap = append(e.heap, ev)
	e.up(ev.index)
}

// remove takes the event at heap index i out of the heap.
func (e *Engine) remove(i int) {
	h := e.heap
	last := len(h) - 1
	ev := h[i]
	if i != last {
		h[i] = h[last]
		h[i].index = i
	}
	h[last] = nil
	e.heap = h[:last]
	if i != last {
		if !e.down(i) {
			e.up(i)
		}
	}
	ev.index = -1
}

func (e *Engine) recycle(ev *event) {
	ev.gen++
	ev.fn = nil
	ev.index = -1
	e.free = append(e.free, ev)
}

func (e *Engine) up(i int) {
	h := e.heap
	ev := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !less(ev, h[p]) {
			break
		}
		h[i] = h[p]
		h[i].index = i
		i = p
	}
	h[i] = ev
	ev.index = i
}

// down sifts the event at i down and reports whether it moved.
func (e *Engine) down(i int) bool {
	h := e.heap
	n := len(h)
	ev := h[i]
	start := i
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && less(h[r], h[c]) {
			c = r
		}
		if !less(h[c], ev) {
			break
		}
		h[i] = h[c]
		h[i].index = i
		i = c
	}
	h[i] = ev
	ev.index = i
	return i > start
}
