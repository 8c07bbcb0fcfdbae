// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

// RequestType is a kind of request (a stage: a URL class, a page type)
// with its own service demand and reply size.
type RequestType struct {
	// Name labels the type in reports.
	Name string
	// Demand is the CPU service demand in seconds; nil means 0.
	Demand dist.Dist
	// Size is the reply size in bytes; nil means 0.
	Size dist.Dist
}

// picker draws an index with probability proportional to its weight.
type picker struct{ cum []float64 }

// newPicker validates weights (finite, ≥ 0, positive sum) for n choices.
// what names the field in errors.
func newPicker(what string, weights []float64, n int) (picker, error) {
	if len(weights) != n {
		return picker{}, fmt.Errorf("sim: %s has %d weights for %d request types", what, len(weights), n)
	}
	cum := make([]float64, n)
	sum := 0.0
	for i, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return picker{}, fmt.Errorf("sim: %s[%d] = %v: must be a finite number ≥ 0", what, i, w)
		}
		sum += w
		cum[i] = sum
	}
	if !(sum > 0) {
		return picker{}, fmt.Errorf("sim: %s = %v: weights must not all be 0", what, weights)
	}
	return picker{cum: cum}, nil
}

func (p picker) pick(r *rand.Rand) int {
	u := r.Float64() * p.cum[len(p.cum)-1]
	for i, c := range p.cum {
		if u < c {
			return i
		}
	}
	return len(p.cum) - 1
}

// Markov is a Markov chain over request types: TPC-W style navigation of a
// closed-loop user from one page type to the next. It is immutable.
type Markov struct {
	start picker
	rows  []picker
}

// markovTolerance is how far from 1 a row of probabilities may sum.
const markovTolerance = 1e-6

// NewMarkov returns a chain with initial distribution start and transition
// matrix p, where p[i][j] is the probability of going from type i to type
// j. start and every row must hold finite probabilities ≥ 0 that sum to 1
// (within 1e-6); errors name the row.
func NewMarkov(start []float64, p [][]float64) (*Markov, error) {
	n := len(p)
	if n == 0 {
		return nil, fmt.Errorf("sim: Markov: empty transition matrix")
	}
	check := func(what string, row []float64) (picker, error) {
		if len(row) != n {
			return picker{}, fmt.Errorf("sim: Markov %s has %d entries, want %d", what, len(row), n)
		}
		sum := 0.0
		for j, x := range row {
			if !(x >= 0) || math.IsInf(x, 0) {
				return picker{}, fmt.Errorf("sim: Markov %s entry %d = %v: must be a probability ≥ 0", what, j, x)
			}
			sum += x
		}
		if math.Abs(sum-1) > markovTolerance {
			return picker{}, fmt.Errorf("sim: Markov %s sums to %v, want 1", what, sum)
		}
		return newPicker("Markov "+what, row, n)
	}
	m := &Markov{rows: make([]picker, n)}
	var err error
	if m.start, err = check("start distribution", start); err != nil {
		return nil, err
	}
	for i, row := range p {
		if m.rows[i], err = check(fmt.Sprintf("row %d", i), row); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// States returns the number of states (request types).
func (m *Markov) States() int { return len(m.rows) }

// Start draws an initial state.
func (m *Markov) Start(r *rand.Rand) int { return m.start.pick(r) }

// Next draws the state that follows from.
func (m *Markov) Next(r *rand.Rand, from int) int { return m.rows[from].pick(r) }

// newRequest draws a request of type t.
func newRequest(e *Engine, rng *rand.Rand, types []RequestType, t int) *Request {
	r := &Request{ID: e.NextID(), Type: t, User: -1, Sent: e.Now()}
	if d := types[t].Demand; d != nil {
		r.Demand = d.Sample(rng)
	}
	if d := types[t].Size; d != nil {
		r.Size = d.Sample(rng)
	}
	return r
}

func checkTypes(what string, types []RequestType) error {
	if len(types) == 0 {
		return fmt.Errorf("sim: %s.Types is empty", what)
	}
	return nil
}

// OpenConfig configures an open source.
type OpenConfig struct {
	// Name names the source's random stream (Engine.Stream); empty gives
	// a unique name from a counter.
	Name string
	// Arrivals paces the requests; offsets are from Start. Required.
	Arrivals dist.Arrivals
	// Types are the request types; at least one.
	Types []RequestType
	// Mix weighs the types (len(Types) weights ≥ 0, not all 0); nil means
	// all equal.
	Mix []float64
	// Class and Client are copied into every request.
	Class, Client int
	// Target receives the requests; required.
	Target Handler
	// OnFinish, if set, is called for every finished request.
	OnFinish func(r *Request)
}

// Open is an open source: requests arrive by a dist.Arrivals process
// whatever happens to earlier ones, each of a type drawn from Mix.
type Open struct {
	e        *Engine
	cfg      OpenConfig
	rng      *rand.Rand
	mix      picker
	origin   time.Duration
	last     time.Duration
	timer    Timer
	running  bool
	fire     func()
	finish   func(r *Request)
	sent     int
	finished int
}

// NewOpen validates cfg and returns a stopped open source.
func NewOpen(e *Engine, cfg OpenConfig) (*Open, error) {
	if err := checkEngine("NewOpen", e); err != nil {
		return nil, err
	}
	if cfg.Arrivals == nil {
		return nil, fmt.Errorf("sim: OpenConfig.Arrivals is nil")
	}
	if cfg.Target == nil {
		return nil, fmt.Errorf("sim: OpenConfig.Target is nil")
	}
	if err := checkTypes("OpenConfig", cfg.Types); err != nil {
		return nil, err
	}
	mix := cfg.Mix
	if mix == nil {
		mix = equalWeights(len(cfg.Types))
	}
	p, err := newPicker("OpenConfig.Mix", mix, len(cfg.Types))
	if err != nil {
		return nil, err
	}
	o := &Open{e: e, cfg: cfg, mix: p, rng: e.Stream(e.streamName("open", cfg.Name))}
	o.fire = o.onFire
	o.finish = o.onFinish
	return o, nil
}

func equalWeights(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// Start starts the arrivals at Now; schedule offsets count from here. A
// source started again after Stop restarts its schedule from offset 0.
func (o *Open) Start() {
	if o.running {
		return
	}
	o.running = true
	o.origin, o.last = o.e.Now(), 0
	o.scheduleNext()
}

// Stop stops sending; requests in flight still finish.
func (o *Open) Stop() {
	o.running = false
	o.timer.Stop()
}

// Sent returns the number of requests sent so far.
func (o *Open) Sent() int { return o.sent }

// Finished returns the number of requests finished so far.
func (o *Open) Finished() int { return o.finished }

func (o *Open) scheduleNext() {
	next := o.cfg.Arrivals.Next(o.rng, o.last)
	if next == dist.Never || next <= o.last {
		o.running = false
		return
	}
	o.last = next
	o.timer = o.e.Schedule(addSat(o.origin, next), o.fire)
}

func (o *Open) onFire() {
	t := o.mix.pick(o.rng)
	r := newRequest(o.e, o.rng, o.cfg.Types, t)
	r.Class, r.Client = o.cfg.Class, o.cfg.Client
	r.OnFinish = o.finish
	o.sent++
	o.scheduleNext()
	o.cfg.Target.Handle(r)
}

func (o *Open) onFinish(r *Request) {
	o.finished++
	if o.cfg.OnFinish != nil {
		o.cfg.OnFinish(r)
	}
}

// UsersConfig configures a group of closed-loop users.
type UsersConfig struct {
	// Name names the group's random stream (Engine.Stream); empty gives a
	// unique name from a counter.
	Name string
	// Count is the number of active users over time, offsets from Start
	// (for example "0s:3,10s:1000"); values are rounded to integers.
	Count dist.Schedule
	// Think is the think time in seconds between a completed request and
	// the user's next one (for example exp 0.7 s capped at 7 s, or det
	// 20 ms); required. A new user also thinks once before its first
	// request, so users joining together do not send in lockstep.
	Think dist.Dist
	// RetryWait is the wait in seconds after a rejected or timed-out
	// request before the user sends the same type again (for example det
	// 5 s); nil means Think.
	RetryWait dist.Dist
	// Types are the request types; at least one.
	Types []RequestType
	// Nav, if set, is the navigation between types: after a completed
	// request the next type is Nav.Next(current). It must have
	// len(Types) states. When nil, every request's type is drawn from Mix.
	Nav *Markov
	// Mix weighs the types when Nav is nil; nil means all equal.
	Mix []float64
	// Class is the priority class of every user of the group.
	Class int
	// ClientBase is the client id of user 0; user i is ClientBase + i.
	ClientBase int
	// Target receives the requests; required.
	Target Handler
	// OnFinish, if set, is called for every finished request.
	OnFinish func(r *Request)
}

// Users is a group of closed-loop users: each user sends one request,
// waits for it to finish, thinks (or, after a rejection or a timeout,
// waits RetryWait and retries the same type), and sends the next. The
// number of active users follows Count; users beyond the count stop after
// their request in flight.
type Users struct {
	e       *Engine
	cfg     UsersConfig
	rng     *rand.Rand
	mix     picker
	users   []*user
	active  int
	origin  time.Duration
	change  Timer
	finish  func(r *Request)
	sent    int
	started bool
}

type user struct {
	g       *Users
	idx     int
	wanted  bool // within the active count
	running bool // has a pending send or a request in flight
	state   int  // type of the next request
	attempt int
	timer   Timer
	send    func()
}

// NewUsers validates cfg and returns a stopped group.
func NewUsers(e *Engine, cfg UsersConfig) (*Users, error) {
	if err := checkEngine("NewUsers", e); err != nil {
		return nil, err
	}
	if cfg.Think == nil {
		return nil, fmt.Errorf("sim: UsersConfig.Think is nil")
	}
	if cfg.Target == nil {
		return nil, fmt.Errorf("sim: UsersConfig.Target is nil")
	}
	if err := checkTypes("UsersConfig", cfg.Types); err != nil {
		return nil, err
	}
	if cfg.Nav != nil && cfg.Nav.States() != len(cfg.Types) {
		return nil, fmt.Errorf("sim: UsersConfig.Nav has %d states for %d request types", cfg.Nav.States(), len(cfg.Types))
	}
	mix := cfg.Mix
	if mix == nil {
		mix = equalWeights(len(cfg.Types))
	}
	p, err := newPicker("UsersConfig.Mix", mix, len(cfg.Types))
	if err != nil {
		return nil, err
	}
	u := &Users{e: e, cfg: cfg, mix: p, rng: e.Stream(e.streamName("users", cfg.Name))}
	u.finish = u.onFinish
	return u, nil
}

// Start activates users according to Count, with offsets from Now.
func (g *Users) Start() {
	if g.started {
		return
	}
	g.started = true
	g.origin = g.e.Now()
	g.applyCount()
}

// Active returns the current target number of users.
func (g *Users) Active() int { return g.active }

// Sent returns the number of requests sent so far (retries included).
func (g *Users) Sent() int { return g.sent }

func (g *Users) applyCount() {
	elapsed := g.e.Now() - g.origin
	g.SetCount(int(math.Round(g.cfg.Count.At(elapsed))))
	if next, ok := g.cfg.Count.NextChange(elapsed); ok {
		g.change = g.e.Schedule(addSat(g.origin, next), g.applyCount)
	}
}

// SetCount sets the number of active users now (the Count schedule does it
// at each of its steps; a scenario may also call it directly, without
// Start, for manual control). New users start by thinking; users beyond n
// stop at once if thinking, or after their request in flight.
func (g *Users) SetCount(n int) {
	n = max(n, 0)
	g.active = n
	for len(g.users) < n {
		u := &user{g: g, idx: len(g.users)}
		u.send = u.onSend
		g.users = append(g.users, u)
	}
	for i, u := range g.users {
		u.wanted = i < n
		switch {
		case u.wanted && !u.running:
			u.running = true
			u.attempt = 0
			if g.cfg.Nav != nil {
				u.state = g.cfg.Nav.Start(g.rng)
			} else {
				u.state = g.mix.pick(g.rng)
			}
			u.timer = g.e.After(Seconds(g.cfg.Think.Sample(g.rng)), u.send)
		case !u.wanted && u.timer.Pending():
			u.timer.Stop()
			u.running = false
		}
	}
}

func (u *user) onSend() {
	g := u.g
	if !u.wanted {
		u.running = false
		return
	}
	r := newRequest(g.e, g.rng, g.cfg.Types, u.state)
	r.Class, r.Client, r.User, r.Attempt = g.cfg.Class, g.cfg.ClientBase+u.idx, u.idx, u.attempt
	r.OnFinish = g.finish
	g.sent++
	g.cfg.Target.Handle(r)
}

func (g *Users) onFinish(r *Request) {
	if g.cfg.OnFinish != nil {
		g.cfg.OnFinish(r)
	}
	u := g.users[r.User]
	var wait float64
	if r.Outcome == Completed {
		u.attempt = 0
		if g.cfg.Nav != nil {
			u.state = g.cfg.Nav.Next(g.rng, u.state)
		} else {
			u.state = g.mix.pick(g.rng)
		}
		wait = g.cfg.Think.Sample(g.rng)
	} else {
		u.attempt++
		d := g.cfg.RetryWait
		if d == nil {
			d = g.cfg.Think
		}
		wait = d.Sample(g.rng)
	}
	if !u.wanted {
		u.running = false
		return
	}
	u.timer = g.e.After(Seconds(wait), u.send)
}
