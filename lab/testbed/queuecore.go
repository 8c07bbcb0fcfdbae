// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"math"
	"time"
)

// queueCore is the state machine of the Queue backend: a service centre
// with c servers ("CPUs") and either a FIFO queue or processor sharing,
// driven in time by its caller. Every method takes now; nothing reads the
// clock. Not safe for concurrent use.
//
// FIFO: up to c jobs are in service, each for exactly its demand; the
// others wait in arrival order. A job that finishes at virtual time f hands
// its server to the next waiting job at f, not when the caller happens to
// observe it, so a late driver does not lose capacity.
//
// PS: all n jobs in the system are in service; each receives service at
// rate min(1, c/n) seconds of work per second, so the remaining demand
// r_i of every job decreases as dr_i/dt = −min(1, c/n) until it reaches 0.
//
// The busy level is min(n, c)/c in both disciplines (n jobs in service or
// waiting) and its windowed mean is the utilization.
type queueCore struct {
	servers int
	ps      bool
	limit   int // maximum jobs in the system; 0 means unlimited

	started bool
	t       time.Time // virtual time of the last processed event or advance

	fifoWait  []coreJob // FIFO waiting jobs, in arrival order (head at waitHead)
	waitHead  int
	inService []coreJob // FIFO: jobs with finish times; PS: all jobs with remaining work

	busy busyWindow
}

// coreJob is one job: its identity, demand and progress.
type coreJob struct {
	id        uint64
	demand    float64   // seconds of work
	remaining float64   // PS: seconds of work left
	finish    time.Time // FIFO: completion time once in service
}

// completion reports one finished job.
type completion struct {
	id uint64
	// at is the virtual completion time.
	at time.Time
	// utilization is the windowed busy fraction at that time.
	utilization float64
}

// workEpsilon is the remaining work (seconds) below which a PS job counts
// as finished; it absorbs rounding of times to whole nanoseconds.
const workEpsilon = 1e-9

func newQueueCore(servers int, ps bool, limit int, window time.Duration) *queueCore {
	c := &queueCore{servers: servers, ps: ps, limit: limit}
	c.busy.init(window)
	return c
}

// inSystem returns the number of jobs in service or waiting.
func (c *queueCore) inSystem() int {
	return len(c.inService) + len(c.fifoWait) - c.waitHead
}

func (c *queueCore) level() float64 {
	return float64(min(c.inSystem(), c.servers)) / float64(c.servers)
}

// arrive advances to now (appending finished jobs to done) and then admits
// a job with the given demand (seconds). It reports false, without
// admitting the job, when the system already holds limit jobs.
func (c *queueCore) arrive(now time.Time, id uint64, demand float64, done []completion) ([]completion, bool) {
	done = c.advance(now, done)
	if c.limit > 0 && c.inSystem() >= c.limit {
		return done, false
	}
	demand = math.Max(demand, 0)
	switch {
	case c.ps:
		c.inService = append(c.inService, coreJob{id: id, demand: demand, remaining: demand})
	case len(c.inService) < c.servers:
		c.inService = append(c.inService, coreJob{id: id, demand: demand, finish: c.t.Add(ceilSeconds(demand))})
	default:
		c.fifoWait = append(c.fifoWait, coreJob{id: id, demand: demand})
	}
	c.busy.set(c.t, c.level())
	// A job with zero demand finishes at once.
	return c.advance(c.t, done), true
}

// ceilSeconds converts s seconds to a Duration, rounding up to whole
// nanoseconds so that a job is never declared finished early.
func ceilSeconds(s float64) time.Duration {
	return time.Duration(math.Ceil(s * 1e9))
}

// advance processes every event up to now in time order and appends the
// jobs that finished to done. A now earlier than the last one seen is
// treated as that time.
func (c *queueCore) advance(now time.Time, done []completion) []completion {
	if !c.started {
		c.started, c.t = true, now
		c.busy.set(now, 0)
	}
	if now.Before(c.t) {
		now = c.t
	}
	if c.ps {
		return c.advancePS(now, done)
	}
	return c.advanceFIFO(now, done)
}

func (c *queueCore) advanceFIFO(now time.Time, done []completion) []completion {
	for {
		// Find the earliest finishing job in service.
		best := -1
		for i := range c.inService {
			if best < 0 || c.inService[i].finish.Before(c.inService[best].finish) {
				best = i
			}
		}
		if best < 0 || c.inService[best].finish.After(now) {
			break
		}
		j := c.inService[best]
		c.t = j.finish
		last := len(c.inService) - 1
		c.inService[best] = c.inService[last]
		c.inService = c.inService[:last]
		c.dispatchFIFO()
		c.busy.set(c.t, c.level())
		done = append(done, completion{id: j.id, at: c.t, utilization: c.busy.mean(c.t)})
	}
	c.t = now
	c.busy.advance(now)
	return done
}

// dispatchFIFO starts waiting jobs at c.t while a server is free.
func (c *queueCore) dispatchFIFO() {
	for len(c.inService) < c.servers && c.waitHead < len(c.fifoWait) {
		next := c.fifoWait[c.waitHead]
		c.fifoWait[c.waitHead] = coreJob{}
		c.waitHead++
		if c.waitHead == len(c.fifoWait) {
			c.fifoWait, c.waitHead = c.fifoWait[:0], 0
		}
		next.finish = c.t.Add(ceilSeconds(next.demand))
		c.inService = append(c.inService, next)
	}
}

// setServers advances to now and changes the number of servers: more
// start waiting jobs at now (FIFO) or speed every job up (PS); fewer let
// the jobs in service finish and serve fewer from then on.
func (c *queueCore) setServers(now time.Time, n int, done []completion) []completion {
	done = c.advance(now, done)
	c.servers = n
	if !c.ps {
		c.dispatchFIFO()
	}
	c.busy.set(c.t, c.level())
	return done
}

func (c *queueCore) advancePS(now time.Time, done []completion) []completion {
	for len(c.inService) > 0 {
		rate := math.Min(1, float64(c.servers)/float64(len(c.inService)))
		minRem := math.Inf(1)
		for _, j := range c.inService {
			minRem = math.Min(minRem, j.remaining)
		}
		step := ceilSeconds(math.Max(minRem, 0) / rate)
		next := c.t.Add(step)
		if next.After(now) {
			work := rate * now.Sub(c.t).Seconds()
			for i := range c.inService {
				c.inService[i].remaining -= work
			}
			break
		}
		work := rate * step.Seconds()
		c.t = next
		kept := c.inService[:0]
		var finished []coreJob
		for _, j := range c.inService {
			j.remaining -= work
			if j.remaining <= workEpsilon {
				finished = append(finished, j)
				continue
			}
			kept = append(kept, j)
		}
		clear(c.inService[len(kept):])
		c.inService = kept
		c.busy.set(c.t, c.level())
		u := c.busy.mean(c.t)
		for _, j := range finished {
			done = append(done, completion{id: j.id, at: c.t, utilization: u})
		}
	}
	c.t = now
	c.busy.advance(now)
	return done
}

// nextEvent returns the virtual time of the next completion, if any job is
// in service.
func (c *queueCore) nextEvent() (time.Time, bool) {
	if len(c.inService) == 0 {
		return time.Time{}, false
	}
	if c.ps {
		rate := math.Min(1, float64(c.servers)/float64(len(c.inService)))
		minRem := math.Inf(1)
		for _, j := range c.inService {
			minRem = math.Min(minRem, j.remaining)
		}
		return c.t.Add(ceilSeconds(math.Max(minRem, 0) / rate)), true
	}
	best := c.inService[0].finish
	for _, j := range c.inService[1:] {
		if j.finish.Before(best) {
			best = j.finish
		}
	}
	return best, true
}

// utilization advances to now and returns the windowed busy fraction.
func (c *queueCore) utilization(now time.Time, done []completion) ([]completion, float64) {
	done = c.advance(now, done)
	return done, c.busy.mean(c.t)
}
