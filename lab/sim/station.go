// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"time"
)

// Outcome is how a job or a request ended.
type Outcome uint8

const (
	// Completed: served in full.
	Completed Outcome = iota
	// Rejected: refused on arrival (a gate said no, or a bounded queue was
	// full).
	Rejected
	// TimedOut: waited in a queue longer than the queue's timeout.
	TimedOut
)

// String returns "completed", "rejected" or "timed_out".
func (o Outcome) String() string {
	switch o {
	case Completed:
		return "completed"
	case Rejected:
		return "rejected"
	case TimedOut:
		return "timed_out"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Job is one visit of a request to a Station: Work units of service (seconds
// at a CPU or FIFO server, bytes at a link), after which the station calls
// Done. A Job may be reused once Done has been called.
type Job struct {
	// Req is the request the job belongs to; stations do not look at it.
	Req *Request
	// Work is the service demand in the station's work unit: seconds of
	// service for a FIFO server or a CPU, bytes for a link. Negative or NaN
	// work counts as 0.
	Work float64
	// OnStart, when set on a job submitted to a FIFO, switches the job to
	// hold mode: when a server becomes free the FIFO calls OnStart instead
	// of serving Work, and the server stays occupied until Release. This is
	// how a listen queue in front of a pool of worker processes is modelled.
	// PS ignores it.
	OnStart func(j *Job)
	// Done is called exactly once per Submit, when the job leaves the
	// station, with Outcome and Finished set. It may be nil.
	Done func(j *Job)

	// Outcome says how the job left the station.
	Outcome Outcome
	// Enqueued, Started and Finished are the virtual times at which the job
	// was submitted, entered service and left the station.
	Enqueued, Started, Finished time.Duration

	state jobState
	tag   float64 // PS: finish tag in attained service; FIFO: end time in seconds
	seq   uint64
	index int // PS heap index
	timer Timer
}

type jobState uint8

const (
	jobIdle jobState = iota
	jobWaiting
	jobServing
	jobDone
)

// Station is a service center that jobs visit. Both models report their
// state for the per-period recorder.
type Station interface {
	// Submit hands the job to the station; its Done is called exactly once
	// later (or synchronously, for a job rejected by a full queue).
	Submit(j *Job)
	// InSystem returns the number of jobs waiting or in service.
	InSystem() int
	// Waiting returns the number of jobs waiting for service (not in
	// service).
	Waiting() int
	// Busy returns the cumulative busy time since the station was created,
	// in seconds, weighted by the fraction of the station's capacity in use:
	// the utilization over an interval is the difference of two readings
	// divided by the interval's length in seconds, a value in [0, 1].
	Busy() float64
	// Backlog returns the work not yet served, in the station's work unit
	// (seconds or bytes), of the jobs waiting and in service.
	Backlog() float64
}

// Compile-time guards.
var (
	_ Station = (*FIFO)(nil)
	_ Station = (*PS)(nil)
)

func workOf(j *Job) float64 {
	if !(j.Work > 0) {
		return 0
	}
	return j.Work
}

// FIFOConfig configures a FIFO station.
type FIFOConfig struct {
	// Servers is the number of servers c; ≥ 1.
	Servers int
	// QueueLimit is the maximum number of jobs waiting for a server (not
	// counting those in service); a job arriving to a full queue is
	// Rejected at once. 0 means unbounded.
	QueueLimit int
	// Timeout is the longest a job may wait for a server; a job still
	// waiting after Timeout leaves with outcome TimedOut. 0 means no
	// timeout. Time in service is never limited.
	Timeout time.Duration
}

// Validate reports the first invalid field, or nil.
func (c FIFOConfig) Validate() error {
	if c.Servers < 1 {
		return fmt.Errorf("sim: FIFOConfig.Servers = %d: must be ≥ 1", c.Servers)
	}
	if c.QueueLimit < 0 {
		return fmt.Errorf("sim: FIFOConfig.QueueLimit = %d: must be ≥ 0 (0 means unbounded)", c.QueueLimit)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("sim: FIFOConfig.Timeout = %v: must be ≥ 0 (0 means none)", c.Timeout)
	}
	return nil
}

// FIFO is a first-come-first-served station with c identical servers and
// an optionally bounded waiting room with an optional per-job timeout: the
// M/G/c queue, and with QueueLimit and Timeout the listen queue of the
// papers. A job is served for Work seconds, or, in hold mode (Job.OnStart
// set), occupies its server until Release.
//
// Busy counts the fraction of servers occupied: utilization =
// ∫ min(n, c)/c dt over the interval.
type FIFO struct {
	e        *Engine
	cfg      FIFOConfig
	queue    []*Job // waiting jobs from head on; timed-out ones are skipped
	head     int
	waiting  int
	waitWork float64
	busy     int
	endSum   float64 // Σ end time (s) of timed jobs in service
	timed    int     // timed jobs in service
	area     float64
	last     time.Duration
	seq      uint64
	inLoop   bool
}

// NewFIFO returns an empty FIFO station on e.
func NewFIFO(e *Engine, cfg FIFOConfig) (*FIFO, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &FIFO{e: e, cfg: cfg, last: e.Now()}, nil
}

// Config returns the station's configuration.
func (f *FIFO) Config() FIFOConfig { return f.cfg }

// SetServers changes the number of servers at Now (a service that gains
// or loses parallelism). More servers start waiting jobs at once; fewer
// take effect as jobs in service finish. n must be ≥ 1.
func (f *FIFO) SetServers(n int) error {
	if n < 1 {
		return fmt.Errorf("sim: SetServers(%d): must be ≥ 1", n)
	}
	f.touch()
	f.cfg.Servers = n
	f.dispatch()
	return nil
}

func (f *FIFO) touch() {
	now := f.e.Now()
	f.area += (now - f.last).Seconds() * float64(f.busy) / float64(f.cfg.Servers)
	f.last = now
}

// Submit queues the job, or starts it at once if a server is free. A job
// arriving to a full waiting room leaves at once with outcome Rejected and
// its Done is called before Submit returns.
func (f *FIFO) Submit(j *Job) {
	now := f.e.Now()
	j.Enqueued, j.Started, j.Finished = now, 0, 0
	j.Outcome = Completed
	if f.cfg.QueueLimit > 0 && f.waiting >= f.cfg.QueueLimit {
		j.state = jobDone
		j.Outcome, j.Started, j.Finished = Rejected, now, now
		if j.Done != nil {
			j.Done(j)
		}
		return
	}
	f.seq++
	j.seq = f.seq
	j.state = jobWaiting
	f.queue = append(f.queue, j)
	f.waiting++
	f.waitWork += workOf(j)
	if f.cfg.Timeout > 0 && (f.busy >= f.cfg.Servers || f.waiting > 1) {
		j.timer = f.e.After(f.cfg.Timeout, func() { f.expire(j) })
	}
	f.dispatch()
}

// expire removes a job that waited too long.
func (f *FIFO) expire(j *Job) {
	if j.state != jobWaiting {
		return
	}
	j.state = jobDone
	f.waiting--
	f.waitWork -= workOf(j)
	now := f.e.Now()
	j.Outcome, j.Started, j.Finished = TimedOut, now, now
	if j.Done != nil {
		j.Done(j)
	}
}

// pop returns the next waiting job, or nil.
func (f *FIFO) pop() *Job {
	for f.head < len(f.queue) {
		j := f.queue[f.head]
		f.queue[f.head] = nil
		f.head++
		if j.state == jobWaiting {
			if f.head > 64 && f.head*2 > len(f.queue) {
				n := copy(f.queue, f.queue[f.head:])
				f.queue = f.queue[:n]
				f.head = 0
			}
			return j
		}
	}
	f.queue = f.queue[:0]
	f.head = 0
	return nil
}

// dispatch starts waiting jobs while servers are free. It is not
// re-entered: a callback that submits or releases during dispatch is
// picked up by the running loop.
func (f *FIFO) dispatch() {
	if f.inLoop {
		return
	}
	f.inLoop = true
	defer func() { f.inLoop = false }()
	for f.busy < f.cfg.Servers {
		j := f.pop()
		if j == nil {
			return
		}
		f.touch()
		f.busy++
		f.waiting--
		f.waitWork -= workOf(j)
		j.timer.Stop()
		j.state = jobServing
		j.Started = f.e.Now()
		if j.OnStart != nil {
			j.tag = math.NaN()
			j.OnStart(j)
			continue
		}
		w := workOf(j)
		j.tag = j.Started.Seconds() + w
		f.endSum += j.tag
		f.timed++
		j.timer = f.e.After(Seconds(w), func() { f.finish(j) })
	}
}

// finish ends the service of a timed job.
func (f *FIFO) finish(j *Job) {
	f.endSum -= j.tag
	f.timed--
	f.complete(j)
}

func (f *FIFO) complete(j *Job) {
	f.touch()
	f.busy--
	if f.busy == 0 {
		f.endSum, f.timed = 0, 0
	}
	j.state = jobDone
	j.Outcome, j.Finished = Completed, f.e.Now()
	if j.Done != nil {
		j.Done(j)
	}
	f.dispatch()
}

// Release frees the server held by a hold-mode job (one submitted with
// OnStart) and completes it: its Done is called with outcome Completed,
// then the next waiting job starts. It reports false, and does nothing,
// if j is not a hold-mode job in service at this station.
func (f *FIFO) Release(j *Job) bool {
	if j.state != jobServing || !math.IsNaN(j.tag) {
		return false
	}
	f.complete(j)
	return true
}

// InSystem returns the number of jobs waiting or in service.
func (f *FIFO) InSystem() int { return f.waiting + f.busy }

// Waiting returns the number of jobs in the waiting room: the listen
// queue length.
func (f *FIFO) Waiting() int { return f.waiting }

// InService returns the number of occupied servers.
func (f *FIFO) InService() int { return f.busy }

// Busy returns the cumulative busy time in seconds, as the fraction of
// servers occupied integrated over time.
func (f *FIFO) Busy() float64 {
	return f.area + (f.e.Now()-f.last).Seconds()*float64(f.busy)/float64(f.cfg.Servers)
}

// Backlog returns the unserved work in seconds: the Work of the waiting
// jobs plus the remaining service of timed jobs in service (hold-mode jobs
// count 0).
func (f *FIFO) Backlog() float64 {
	b := f.waitWork + f.endSum - float64(f.timed)*f.e.Now().Seconds()
	return math.Max(b, 0)
}

// PSConfig configures a processor-sharing station.
type PSConfig struct {
	// Capacity is the total service rate in work units per second: the
	// number of cores for a CPU (work in seconds), bytes per second for a
	// link (work in bytes). Finite and > 0.
	Capacity float64
	// MaxRate is the most service one job can receive per second: 1 for a
	// CPU (one job uses at most one core), 0 for no per-job limit (a link
	// gives a lone transfer all of its bandwidth). Finite and ≥ 0.
	MaxRate float64
}

// Validate reports the first invalid field, or nil.
func (c PSConfig) Validate() error {
	if !(c.Capacity > 0) || math.IsInf(c.Capacity, 0) {
		return fmt.Errorf("sim: PSConfig.Capacity = %v: must be a finite number > 0", c.Capacity)
	}
	if !(c.MaxRate >= 0) || math.IsInf(c.MaxRate, 0) {
		return fmt.Errorf("sim: PSConfig.MaxRate = %v: must be a finite number ≥ 0 (0 means no per-job limit)", c.MaxRate)
	}
	return nil
}

// PS is an exact processor-sharing station: with n jobs present each one
// is served at rate r(n) = min(MaxRate, Capacity/n) work units per second,
// so with c cores and MaxRate 1 each job gets min(1, c/n) of a core. It is
// event-driven: every arrival and departure recomputes the single pending
// departure. Internally each job's finish tag is the attained service V at
// its arrival plus its work, where V grows at r(n); the job with the
// smallest tag leaves next, at now + (tag − V)/r(n) rounded up to the
// nanosecond.
//
// Busy counts the fraction of capacity in use, n·r(n)/Capacity.
type PS struct {
	e      *Engine
	cfg    PSConfig
	jobs   []*Job // heap by (tag, seq)
	v      float64
	sumTag float64
	last   time.Duration
	area   float64
	seq    uint64
	timer  Timer
	depart func()
	out    []*Job
}

// NewPS returns an empty processor-sharing station on e.
func NewPS(e *Engine, cfg PSConfig) (*PS, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &PS{e: e, cfg: cfg, last: e.Now()}
	p.depart = p.onDepart
	return p, nil
}

// NewCPU returns a processor-sharing CPU with the given number of cores
// (> 0): work is in seconds of CPU time and one job uses at most one core.
func NewCPU(e *Engine, cores float64) (*PS, error) {
	return NewPS(e, PSConfig{Capacity: cores, MaxRate: 1})
}

// NewLink returns a processor-sharing link of the given capacity in bytes
// per second (> 0): work is in bytes and the transfers in progress share
// the capacity equally.
func NewLink(e *Engine, bytesPerSecond float64) (*PS, error) {
	return NewPS(e, PSConfig{Capacity: bytesPerSecond})
}

// Config returns the station's configuration.
func (p *PS) Config() PSConfig { return p.cfg }

// rate returns the per-job service rate with n jobs present.
func (p *PS) rate(n int) float64 {
	r := p.cfg.Capacity / float64(n)
	if p.cfg.MaxRate > 0 && p.cfg.MaxRate < r {
		r = p.cfg.MaxRate
	}
	return r
}

// advance brings V and the busy area up to Now.
func (p *PS) advance() {
	now := p.e.Now()
	if n := len(p.jobs); n > 0 {
		dt := (now - p.last).Seconds()
		r := p.rate(n)
		p.v += r * dt
		p.area += dt * float64(n) * r / p.cfg.Capacity
	}
	p.last = now
}

// Submit starts serving the job at once, sharing the capacity.
func (p *PS) Submit(j *Job) {
	p.advance()
	now := p.e.Now()
	j.Enqueued, j.Started, j.Finished = now, now, 0
	j.Outcome = Completed
	j.state = jobServing
	p.seq++
	j.seq = p.seq
	j.tag = p.v + workOf(j)
	p.sumTag += j.tag
	p.push(j)
	p.reschedule()
}

// reschedule replaces the pending departure event.
func (p *PS) reschedule() {
	p.timer.Stop()
	if len(p.jobs) == 0 {
		return
	}
	dt := (p.jobs[0].tag - p.v) / p.rate(len(p.jobs))
	ns := math.Ceil(dt * 1e9)
	at := Forever
	switch {
	case !(ns > 0):
		at = p.e.Now()
	case ns < float64(Forever-p.e.Now()):
		at = p.e.Now() + time.Duration(ns)
	}
	p.timer = p.e.Schedule(at, p.depart)
}

func (p *PS) onDepart() {
	p.advance()
	// The event was scheduled for the first job, rounded up, so it is
	// due; jobs with equal (or, by rounding, smaller) tags leave with it.
	if first := p.jobs[0].tag; p.v < first {
		p.v = first
	}
	p.out = p.out[:0]
	for len(p.jobs) > 0 && p.jobs[0].tag <= p.v {
		j := p.pop()
		p.sumTag -= j.tag
		p.out = append(p.out, j)
	}
	if len(p.jobs) == 0 {
		p.v, p.sumTag = 0, 0
	}
	p.reschedule()
	now := p.e.Now()
	for _, j := range p.out {
		j.state = jobDone
		j.Outcome, j.Finished = Completed, now
		if j.Done != nil {
			j.Done(j)
		}
	}
}

// Cancel takes job j out of service before it finished, as a handler
// stops when its request's context ends: the work it had left is not
// done, and its Done is not called (the canceller finishes its request).
// It returns the work j had received, in work units, and false if j was
// not in service here.
func (p *PS) Cancel(j *Job) (worked float64, ok bool) {
	if j.state != jobServing || j.index < 0 || j.index >= len(p.jobs) || p.jobs[j.index] != j {
		return 0, false
	}
	p.advance()
	left := math.Max(j.tag-p.v, 0)
	i := j.index
	last := len(p.jobs) - 1
	if i != last {
		p.swap(i, last)
	}
	p.jobs[last] = nil
	p.jobs = p.jobs[:last]
	if i != last {
		p.fix(i)
	}
	j.index = -1
	p.sumTag -= j.tag
	if len(p.jobs) == 0 {
		p.v, p.sumTag = 0, 0
	}
	j.state = jobDone
	j.Finished = p.e.Now()
	p.reschedule()
	return math.Max(workOf(j)-left, 0), true
}

// fix restores the heap order around index i after its job changed.
func (p *PS) fix(i int) { p.down(p.up(i)) }

// InSystem returns the number of jobs in service.
func (p *PS) InSystem() int { return len(p.jobs) }

// Waiting returns 0: a processor-sharing station serves every job at once.
func (p *PS) Waiting() int { return 0 }

// Busy returns the cumulative busy time in seconds, as the fraction of
// capacity in use integrated over time.
func (p *PS) Busy() float64 {
	n := len(p.jobs)
	if n == 0 {
		return p.area
	}
	r := p.rate(n)
	return p.area + (p.e.Now()-p.last).Seconds()*float64(n)*r/p.cfg.Capacity
}

// Backlog returns the unserved work of the jobs in service, in work units
// (for a link: the bytes still to send, the outgoing queue).
func (p *PS) Backlog() float64 {
	n := len(p.jobs)
	if n == 0 {
		return 0
	}
	v := p.v + p.rate(n)*(p.e.Now()-p.last).Seconds()
	return math.Max(p.sumTag-float64(n)*v, 0)
}

// The job heap, by (tag, seq).

func jobLess(a, b *Job) bool { return a.tag < b.tag || (a.tag == b.tag && a.seq < b.seq) }

func (p *PS) push(j *Job) {
	j.index = len(p.jobs)
	p.jobs = append(p.jobs, j)
	p.up(j.index)
}

func (p *PS) pop() *Job {
	h := p.jobs
	j := h[0]
	last := len(h) - 1
	p.swap(0, last)
	h[last] = nil
	p.jobs = h[:last]
	p.down(0)
	j.index = -1
	return j
}

// up moves the job at index i towards the root while it is less than its
// parent, and returns its new index.
func (p *PS) up(i int) int {
	for i > 0 {
		q := (i - 1) / 2
		if !jobLess(p.jobs[i], p.jobs[q]) {
			break
		}
		p.swap(i, q)
		i = q
	}
	return i
}

// down moves the job at index i towards the leaves while a child is less.
func (p *PS) down(i int) {
	h := p.jobs
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && jobLess(h[r], h[c]) {
			c = r
		}
		if !jobLess(h[c], h[i]) {
			return
		}
		p.swap(i, c)
		i = c
	}
}

func (p *PS) swap(i, k int) {
	p.jobs[i], p.jobs[k] = p.jobs[k], p.jobs[i]
	p.jobs[i].index = i
	p.jobs[k].index = k
}
