// SPDX-License-Identifier: Apache-2.0

package share

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ctxsleep"
	"github.com/sluicehq/sluice/internal/enum"
)

// ClientID identifies a client of a Shares: the index of a configured
// client in Config.Clients, or Shares.Others() for the implicit client
// others. An out-of-range ClientID is treated as others.
type ClientID int32

// Reason says why a request was rejected.
type Reason uint8

const (
	// RejectStandby: the client already had StandbyLimit requests waiting.
	RejectStandby Reason = iota + 1
	// RejectNoBandwidth: the client's available bandwidth d_i is 0 (the
	// paper's standby path; only a client with share 0, such as others
	// when the shares sum to 100, can get d_i = 0).
	RejectNoBandwidth
	// RejectMaxDelay: the computed delay exceeded Config.MaxDelay.
	RejectMaxDelay
)

// String returns "standby", "no_bandwidth" or "max_delay" (the metric label).
func (r Reason) String() string { return enum.Name(r, reasonNames[:], "Reason") }

var reasonNames = [...]string{RejectStandby: "standby", RejectNoBandwidth: "no_bandwidth", RejectMaxDelay: "max_delay"}

// RejectError is the explicit rejection of one request. It wraps
// sluice.ErrRejected, so errors.Is(err, sluice.ErrRejected) holds, and
// carries the inputs of the decision.
type RejectError struct {
	// Client is the client's name.
	Client string
	// Reason says which check refused the request.
	Reason Reason
	// Standby is the number of the client's requests waiting at the time.
	Standby int
	// Available is d_i at the time, in bytes per second.
	Available float64
	// Delay is the computed delay that exceeded MaxDelay (RejectMaxDelay
	// only); +Inf when it does not fit in a Duration.
	Delay float64
	// RetryAfter is a hint for the Retry-After header: for a full standby,
	// the client's last delay or the manager period, whichever is longer;
	// otherwise the manager period (the next time d_i is recomputed from
	// fresh averages).
	RetryAfter time.Duration
}

func (e *RejectError) Error() string {
	switch e.Reason {
	case RejectStandby:
		return fmt.Sprintf("share: client %q rejected: %d requests already waiting (standby limit)", e.Client, e.Standby)
	case RejectNoBandwidth:
		return fmt.Sprintf("share: client %q rejected: no bandwidth available (d_i = 0)", e.Client)
	case RejectMaxDelay:
		return fmt.Sprintf("share: client %q rejected: delay %.3gs exceeds max_delay (d_i = %.4g B/s)", e.Client, e.Delay, e.Available)
	}
	return fmt.Sprintf("share: client %q rejected", e.Client)
}

// Unwrap returns sluice.ErrRejected.
func (e *RejectError) Unwrap() error { return sluice.ErrRejected }

// clientState is the per-client state of §3.
type clientState struct {
	b      float64 // allocation b_i, bytes/s
	avg    float64 // avg_i, EWMA of per-reply bandwidth, bytes/s
	active bool    // a request was admitted since the last manager step
	held   bool    // counted active by HoldActive (busy elsewhere in a cluster)
	wait   int     // standby slots held

	lastDelay time.Duration
	lastReply time.Time
	arrivals  uint64 // Begin calls, admitted or rejected: the client's demand
	replies   uint64
	bytes     uint64
	rejects   [4]uint64 // indexed by Reason
	cancelled uint64

	// turn serialises the client's delay-and-send phases (capacity 1;
	// unused when Config.Parallel).
	turn chan struct{}
}

// Shares is the measurement-based per-client bandwidth allocation of Li &
// Jamin ("A Measurement-Based Admission-Controlled Web Server", seed
// 002_f89aef679b555bfe; docs/algorithms.md §3). Each client i has an
// allocation b_i = share_i/100 · B. Per completed reply,
//
//	new_bw = bytes / response_time,  avg_i = α·new_bw + (1−α)·avg_i.
//
// Every manager period, Tick decays the average of each client that had no
// request admitted since the previous step (avg_i = (1−α)·avg_i, an EWMA
// with a zero sample), clears the active flags, and raises the maximum
// measured bandwidth Â = max(Â, Σ avg_j) (Â starts at B, or at
// Config.InitialMaxBandwidth). Per request, the available bandwidth is
//
//	unsatisfied (some active j has avg_j < b_j):
//	    d_i = 2·b_i − avg_i  if avg_i < b_i,  else  d_i = b_i
//	otherwise:
//	    d_i = B − (Σ avg_j − avg_i)  if B − Σ avg_j > 0,  else  d_i = b_i
//	d_i = max(d_i, 0)
//
// and the reply of size bytes is delayed by (1/d_i − 1/Â)·size, or 0 when
// that is negative. d_i = 0 rejects the request (the standby path), as does
// a delay above Config.MaxDelay or a client with StandbyLimit requests
// already waiting.
//
// d_i is computed per request, from the averages and flags of that moment,
// as the paper's child processes do: a reply then reacts to the replies
// that finished just before it rather than to a value up to one period old.
// The sum Σ avg_j and the number of unsatisfied active clients are kept
// incrementally, so a request costs O(1) whatever the number of clients;
// Tick recomputes the sum exactly.
//
// Shares is a deterministic state machine: every method that depends on
// time takes now (or a response time) as an argument, none reads the
// clock, sleeps or starts a goroutine, except Run (the live manager loop)
// and the blocking Reservation.Wait. All methods are safe for concurrent
// use; each holds one mutex for a few arithmetic operations.
type Shares struct {
	mu sync.Mutex

	cfg      Config
	matcher  *Matcher
	names    []string
	shares   []float64
	alpha    float64
	total    float64 // B
	limit    int
	maxDelay float64 // seconds
	period   time.Duration

	clients  []clientState
	sum      float64 // Σ avg_j over all clients, others included
	ahat     float64 // Â
	unsat    int     // number of clients with (active || held) && avg < b
	ticks    uint64
	lastTick time.Time
}

// New validates cfg and returns a Shares in its initial state: every
// average 0, no client active, Â = B (or InitialMaxBandwidth). The error
// is a *sluice.FieldError naming the bad field.
func New(cfg Config) (*Shares, error) {
	cc, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	cfg.Clients = append([]ClientConfig(nil), cfg.Clients...)
	s := &Shares{
		cfg:      cfg,
		matcher:  newMatcher(cc, cfg.CacheSize),
		names:    cc.names,
		shares:   cc.shares,
		alpha:    cfg.Alpha,
		total:    float64(cfg.TotalBandwidth),
		limit:    cfg.StandbyLimit,
		maxDelay: cfg.MaxDelay.Seconds(),
		period:   cfg.Period,
		clients:  make([]clientState, len(cc.names)),
		ahat:     float64(cfg.TotalBandwidth),
	}
	if cfg.InitialMaxBandwidth != 0 {
		s.ahat = float64(cfg.InitialMaxBandwidth)
	}
	for i := range s.clients {
		s.clients[i].b = cc.shares[i] / 100 * s.total
		s.clients[i].turn = make(chan struct{}, 1)
	}
	return s, nil
}

// Config returns a copy of the configuration s was built from.
func (s *Shares) Config() Config {
	c := s.cfg
	c.Clients = append([]ClientConfig(nil), c.Clients...)
	return c
}

// Matcher returns the matcher of s's configuration (shared, safe for
// concurrent use).
func (s *Shares) Matcher() *Matcher { return s.matcher }

// Others returns the ClientID of the implicit client others.
func (s *Shares) Others() ClientID { return ClientID(len(s.names) - 1) }

// NumClients returns the number of clients, others included.
func (s *Shares) NumClients() int { return len(s.names) }

// Lookup returns the ClientID of the client with the given name ("others"
// included) and whether it exists.
func (s *Shares) Lookup(name string) (ClientID, bool) {
	for i, n := range s.names {
		if n == name {
			return ClientID(i), true
		}
	}
	return s.Others(), false
}

// Name returns the name of client c.
func (s *Shares) Name(c ClientID) string { return s.names[s.idx(c)] }

// Allocation returns b_i of client c in bytes per second (the configured
// share of B, or the part SetAllocations gave it).
func (s *Shares) Allocation(c ClientID) float64 {
	i := s.idx(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[i].b
}

func (s *Shares) idx(c ClientID) int {
	if c < 0 || int(c) >= len(s.names) {
		return len(s.names) - 1
	}
	return int(c)
}

// unsatisfiedMember reports whether c counts toward unsatisfaction: it is
// active (or held active) and below its allocation.
func (c *clientState) unsatisfiedMember() bool { return (c.active || c.held) && c.avg < c.b }

// available computes d_i; s.mu must be held.
func (s *Shares) available(i int) float64 {
	c := &s.clients[i]
	var d float64
	if s.unsat > 0 { // Erratum: unsatisfied when ANY active client is below its allocation.
		if c.avg < c.b {
			d = 2*c.b - c.avg
		} else {
			d = c.b
		}
	} else if s.total-s.sum > 0 {
		d = s.total - (s.sum - c.avg)
	} else {
		d = c.b
	}
	return math.Max(d, 0)
}

// delaySeconds returns (1/d − 1/Â)·size, at least 0; d must be > 0.
func (s *Shares) delaySeconds(d float64, size int64) float64 {
	if size <= 0 {
		return 0
	}
	return math.Max(0, (1/d-1/s.ahat)*float64(size))
}

// Reservation is one admitted request: its client, its admission time (the
// start of its response time) and its standby slot. The zero value holds
// nothing. A Reservation belongs to one goroutine; its methods are not
// safe for concurrent use on the same Reservation.
type Reservation struct {
	s      *Shares
	client ClientID
	start  time.Time
	held   bool
	// turn is true while the reservation holds its client's turn;
	// turnStart is when it got it (the start of its measured response
	// time in serialised mode).
	turn      bool
	turnStart time.Time
}

// Begin admits a request of client c at now: it takes one of the client's
// standby slots and sets the client's active flag. It rejects the request
// at once, with a *RejectError wrapping sluice.ErrRejected, when the
// client already has StandbyLimit requests waiting or when its available
// bandwidth d_i is 0 (which does not depend on the reply size). The
// returned Reservation must be released (Release, Wait or Done).
func (s *Shares) Begin(now time.Time, c ClientID) (Reservation, error) {
	i := s.idx(c)
	s.mu.Lock()
	cl := &s.clients[i]
	cl.arrivals++
	if cl.wait >= s.limit {
		cl.rejects[RejectStandby]++
		e := &RejectError{Client: s.names[i], Reason: RejectStandby, Standby: cl.wait,
			Available: s.available(i), RetryAfter: max(cl.lastDelay, s.period)}
		s.mu.Unlock()
		return Reservation{}, e
	}
	if d := s.available(i); d <= 0 {
		cl.rejects[RejectNoBandwidth]++
		s.mu.Unlock()
		return Reservation{}, &RejectError{Client: s.names[i], Reason: RejectNoBandwidth, Standby: cl.wait, RetryAfter: s.period}
	}
	cl.wait++
	if !cl.active {
		before := cl.unsatisfiedMember()
		cl.active = true
		if !before && cl.avg < cl.b {
			s.unsat++
		}
	}
	s.mu.Unlock()
	return Reservation{s: s, client: ClientID(i), start: now, held: true}, nil
}

// Delay returns the delay to inject before sending a reply of size bytes
// to client c: (1/d_i − 1/Â)·size, or 0 when negative. It returns a
// *RejectError (wrapping sluice.ErrRejected) when d_i = 0 or when the
// delay exceeds Config.MaxDelay; the request should then be answered with
// an explicit rejection. The computation does not depend on now (d_i
// depends on the averages and flags only); it is an argument so that every
// request-path call takes its time the same way.
func (s *Shares) Delay(now time.Time, c ClientID, size int64) (time.Duration, error) {
	i := s.idx(c)
	s.mu.Lock()
	cl := &s.clients[i]
	d := s.available(i)
	if d <= 0 {
		cl.rejects[RejectNoBandwidth]++
		s.mu.Unlock()
		return 0, &RejectError{Client: s.names[i], Reason: RejectNoBandwidth, Standby: cl.wait, RetryAfter: s.period}
	}
	sec := s.delaySeconds(d, size)
	if sec > s.maxDelay {
		cl.rejects[RejectMaxDelay]++
		s.mu.Unlock()
		return 0, &RejectError{Client: s.names[i], Reason: RejectMaxDelay, Standby: cl.wait, Available: d, Delay: sec, RetryAfter: s.period}
	}
	delay := time.Duration(math.Round(sec * 1e9))
	cl.lastDelay = delay
	s.mu.Unlock()
	return delay, nil
}

// Done records a completed reply of client c: bytes sent and its response
// time, from admission to the last byte sent, the injected delay included
// (see the package documentation). It updates avg_i = α·bytes/rt +
// (1−α)·avg_i. A reply with bytes ≤ 0 or rt ≤ 0 is counted but is not a
// bandwidth sample (an empty reply says nothing about bandwidth and would
// only drag the average down). now is recorded as the client's last reply
// time. Done does not release a standby slot; see Reservation.Done.
func (s *Shares) Done(now time.Time, c ClientID, bytes int64, rt time.Duration) {
	i := s.idx(c)
	s.mu.Lock()
	cl := &s.clients[i]
	cl.replies++
	cl.lastReply = now
	if bytes > 0 {
		cl.bytes += uint64(bytes)
	}
	if bytes > 0 && rt > 0 {
		before := cl.unsatisfiedMember()
		old := cl.avg
		cl.avg = s.alpha*(float64(bytes)/rt.Seconds()) + (1-s.alpha)*old
		s.sum += cl.avg - old
		if after := cl.unsatisfiedMember(); after != before {
			if after {
				s.unsat++
			} else {
				s.unsat--
			}
		}
	}
	s.mu.Unlock()
}

// release frees one standby slot of client i.
func (s *Shares) release(i int) {
	s.mu.Lock()
	if s.clients[i].wait > 0 {
		s.clients[i].wait--
	}
	s.mu.Unlock()
}

// cancelled counts a request whose client went away while it waited.
func (s *Shares) cancelled(i int) {
	s.mu.Lock()
	s.clients[i].cancelled++
	s.mu.Unlock()
}

// Tick is one step of the bandwidth manager at now: it decays the average
// of every client that had no request admitted since the previous step
// toward 0 (avg_i = (1−α)·avg_i), clears every active flag, recomputes
// Σ avg_j and sets Â = max(Â, Σ avg_j). Call it every Config.Period (Run
// does); the simulator calls it in virtual time.
func (s *Shares) Tick(now time.Time) {
	s.mu.Lock()
	sum := 0.0
	s.unsat = 0
	for i := range s.clients {
		c := &s.clients[i]
		if !c.active && !c.held {
			c.avg *= 1 - s.alpha
		}
		c.active = false
		sum += c.avg
		if c.unsatisfiedMember() {
			s.unsat++
		}
	}
	s.sum = sum
	s.ahat = math.Max(s.ahat, sum)
	s.ticks++
	s.lastTick = now
	s.mu.Unlock()
}

// SetAllocations makes s enforce a part of the configured total: total
// becomes the B that d_i and the work-conserving branch use (bytes per
// second, finite and > 0), and alloc[i] the allocation b_i of client i
// (bytes per second, finite and ≥ 0, one entry per client in
// configuration order with others last, summing to at most total). Â is
// scaled with B (Â·total/B_old, but never below Σ avg_j), so that the
// ratio Â/B the package documentation's Accuracy section asks for holds
// for the part too. Averages, active flags, standby slots and counters
// are kept. Cluster mode calls it once per sync period with this
// instance's part of the cluster's B; a bad argument is an error and
// changes nothing. Safe for concurrent use.
func (s *Shares) SetAllocations(total float64, alloc []float64) error {
	if !(total > 0) || math.IsInf(total, 0) || total > maxTotalBandwidth {
		return fmt.Errorf("share: total %g is invalid: must be > 0 and at most %g bytes per second", total, maxTotalBandwidth)
	}
	if len(alloc) != len(s.names) {
		return fmt.Errorf("share: %d allocations for %d clients (others included)", len(alloc), len(s.names))
	}
	sum := 0.0
	for i, b := range alloc {
		if !(b >= 0) || math.IsInf(b, 0) {
			return fmt.Errorf("share: allocation of client %q: %g is invalid: must be finite and ≥ 0", s.names[i], b)
		}
		sum += b
	}
	if sum > total*(1+1e-9) {
		return fmt.Errorf("share: allocations sum to %g, more than the total %g", sum, total)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ahat = math.Max(s.sum, s.ahat*total/s.total)
	s.total = total
	s.unsat = 0
	for i := range s.clients {
		c := &s.clients[i]
		c.b = alloc[i]
		if c.unsatisfiedMember() {
			s.unsat++
		}
	}
	return nil
}

// HoldActive counts the clients whose entry in held is true as active
// until the next call, whether or not a request of theirs was admitted
// since the last manager step: Tick does not decay their averages and
// they take part in the unsatisfied test. Cluster mode holds a client
// active on an instance where it sends (its smoothed demand there is not
// 0) while it sent somewhere in the cluster during the last sync: a
// client whose requests are spread over N instances reaches each one
// only every N-th request, and would otherwise look idle there in some
// manager periods, lose its average and let the others take its
// bandwidth. nil holds no client (the single-instance behaviour). A
// held of another length than NumClients is an error and changes
// nothing. Safe for concurrent use.
func (s *Shares) HoldActive(held []bool) error {
	if held != nil && len(held) != len(s.names) {
		return fmt.Errorf("share: %d hold flags for %d clients (others included)", len(held), len(s.names))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsat = 0
	for i := range s.clients {
		c := &s.clients[i]
		c.held = held != nil && held[i]
		if c.unsatisfiedMember() {
			s.unsat++
		}
	}
	return nil
}

// Period returns the manager period.
func (s *Shares) Period() time.Duration { return s.period }

// Run calls Tick every manager period with the wall-clock time until ctx
// is done, then returns ctx.Err(). It is the live driver of the manager;
// run it in its own goroutine. The simulator calls Tick instead.
func (s *Shares) Run(ctx context.Context) error {
	ctxsleep.Every(ctx, s.period, s.Tick)
	return ctx.Err()
}

// Available returns client c's available bandwidth d_i now, in bytes per
// second.
func (s *Shares) Available(c ClientID) float64 {
	i := s.idx(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.available(i)
}

// Average returns client c's measured bandwidth avg_i, in bytes per second.
func (s *Shares) Average(c ClientID) float64 {
	i := s.idx(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[i].avg
}

// MaxMeasured returns Â, the maximum measured bandwidth, in bytes per
// second.
func (s *Shares) MaxMeasured() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ahat
}

// Unsatisfied reports whether some active client is below its allocation.
func (s *Shares) Unsatisfied() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsat > 0
}

// Standby returns the number of standby slots client c holds.
func (s *Shares) Standby(c ClientID) int {
	i := s.idx(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[i].wait
}

// Client returns the client of the reservation.
func (r *Reservation) Client() ClientID { return r.client }

// Start returns the admission time passed to Begin: the start of the
// request's response time.
func (r *Reservation) Start() time.Time { return r.start }

// Held reports whether the reservation still holds its standby slot.
func (r *Reservation) Held() bool { return r.held }

// Delay is Shares.Delay for the reservation's client.
func (r *Reservation) Delay(now time.Time, size int64) (time.Duration, error) {
	if r.s == nil {
		return 0, nil
	}
	return r.s.Delay(now, r.client, size)
}

// Release frees the standby slot and the client's turn if they are still
// held. It is idempotent.
func (r *Reservation) Release() {
	r.releaseStandby()
	r.releaseTurn()
}

func (r *Reservation) releaseStandby() {
	if r.held {
		r.held = false
		r.s.release(int(r.client))
	}
}

func (r *Reservation) releaseTurn() {
	if r.turn {
		r.turn = false
		<-r.s.clients[r.client].turn
	}
}

// Turn waits until the reservation's client has no other reply in its
// delay-and-send phase, and takes the client's turn (held until Done or
// Release). With Config.Parallel it returns at once. If ctx is done first
// (the client disconnected), the standby slot is freed at once, the
// request is counted as cancelled and ctx.Err() is returned. Turn starts
// no goroutine.
func (r *Reservation) Turn(ctx context.Context) error {
	if r.s == nil || r.s.cfg.Parallel || r.turn {
		return nil
	}
	select {
	case r.s.clients[r.client].turn <- struct{}{}:
		r.turn, r.turnStart = true, time.Now()
		return nil
	case <-ctx.Done():
		r.s.cancelled(int(r.client))
		r.releaseStandby()
		return ctx.Err()
	}
}

// Wait blocks for d or until ctx is done, whichever comes first, and then
// frees the standby slot: a request stops waiting, for the purpose of the
// standby limit, when its delay is over. If ctx is done first (the client
// disconnected), the slot is freed at once, the request is counted as
// cancelled (not as a bandwidth sample) and ctx.Err() is returned. Wait
// starts no goroutine and stops its timer before returning.
func (r *Reservation) Wait(ctx context.Context, d time.Duration) error {
	err := Wait(ctx, d)
	if err != nil && r.s != nil {
		r.s.cancelled(int(r.client))
		r.releaseTurn()
	}
	r.releaseStandby()
	return err
}

// Done records the reply with Shares.Done and frees the standby slot and
// the turn if they are still held. The response time is now − Start(), or
// now − the start of the turn when the reply took one (serialised mode:
// the time spent waiting behind the client's own earlier replies is not
// part of this reply's bandwidth).
func (r *Reservation) Done(now time.Time, bytes int64) {
	if r.s == nil {
		return
	}
	start := r.start
	if r.turn {
		start = r.turnStart
	}
	r.Release()
	r.s.Done(now, r.client, bytes, now.Sub(start))
}

// Wait blocks for d or until ctx is done, whichever comes first. It
// returns nil after the full delay and ctx.Err() when ctx is done first
// (also when ctx is already done, even for d ≤ 0). It starts no goroutine
// and stops its timer before returning, so a cancelled wait leaves nothing
// behind.
func Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !ctxsleep.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}
