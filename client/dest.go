// SPDX-License-Identifier: Apache-2.0

package client

import (
	"math"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Dest is the client side's state for one destination: the adaptive
// throttle (requests and accepts of the last Throttle.Window) and the
// retry budget (calls and retries of the last Retry.BudgetWindow), with
// counters for metrics. It is a deterministic state machine: time is an
// argument and randomness comes from the *rand.Rand its callers pass;
// nothing in it reads the clock, sleeps or starts a goroutine, so the
// simulator drives it in virtual time as Transport drives it live. It is
// not safe for concurrent use (Transport holds a lock per destination),
// except its counters (Counts), which may be read at any time.
type Dest struct {
	cfg      *Config
	throttle window // a: requests, b: accepts
	budget   window // a: calls, b: retries
	// run counts, as throttle does, the requests and accepts since the
	// destination's last refusal, and runLen is the accepts since then
	// (the accept run, ThrottleConfig.Forget).
	run    window
	runLen int

	attempts, retries, throttled, exhausted, late, forgot atomic.Uint64
	prob                                                  atomic.Uint64 // last throttle probability, float64 bits
}

// NewDest returns the state of a destination under cfg, which must be
// valid (SetDefaults, Validate); Dest keeps the pointer.
func NewDest(cfg *Config) *Dest {
	d := &Dest{cfg: cfg}
	d.throttle.init(cfg.Throttle.Window)
	d.run.init(cfg.Throttle.Window)
	d.budget.init(cfg.Retry.BudgetWindow)
	return d
}

// ThrottleProbability returns the probability with which an attempt at
// now is refused locally:
//
//	p = max(0, (requests − K·accepts) / (requests + 1))
//
// over the last Throttle.Window (since the last accept run's start, when
// one made the window forget: ThrottleConfig.Forget), or 0 when
// throttling is off or the window holds fewer than Throttle.MinRequests
// requests.
func (d *Dest) ThrottleProbability(now time.Time) float64 {
	t := &d.cfg.Throttle
	if t.Enabled == nil || !*t.Enabled {
		return 0
	}
	req, acc := d.throttle.sums(now)
	return t.probability(req, acc)
}

// probability is the SRE book's p for req requests and acc accepts, 0
// below MinRequests requests.
func (t *ThrottleConfig) probability(req, acc float64) float64 {
	if req < float64(t.MinRequests) {
		return 0
	}
	return math.Max(0, (req-t.K*acc)/(req+1))
}

// admit decides whether an attempt at now goes out: it counts the attempt
// as a request and, with probability p, refuses it. It draws from rng
// only when p > 0.
func (d *Dest) admit(now time.Time, rng *rand.Rand) bool {
	p := d.ThrottleProbability(now)
	d.prob.Store(math.Float64bits(p))
	d.throttle.add(now, 1, 0)
	d.run.add(now, 1, 0)
	if p > 0 && rng.Float64() < p {
		d.throttled.Add(1)
		return false
	}
	d.attempts.Add(1)
	return true
}

// answered counts how an attempt ended at now: accepted unless the
// destination refused it for overload; answered unless it got no answer
// at all (a timeout, a transport failure, a caller gone), which the
// window counts as accepted, as the book does, but which is no evidence
// that the destination accepts again. A refusal starts a new accept run;
// from the ForgetRun-th answer in a row that was accepted, such an answer
// makes the window forget what it counted before the run if that lowers
// p (ThrottleConfig.Forget "accepts").
func (d *Dest) answered(now time.Time, accepted, answered bool) {
	if !accepted {
		d.run.init(d.cfg.Throttle.Window)
		d.runLen = 0
		return
	}
	d.throttle.add(now, 0, 1)
	d.run.add(now, 0, 1)
	if !answered {
		return
	}
	d.runLen++
	if t := &d.cfg.Throttle; t.Forget == ForgetAccepts && t.ForgetRun > 0 && d.runLen >= t.ForgetRun {
		// The window from now on is the run's: what it counted before
		// the destination's last refusal is forgotten, unless that
		// would refuse more (the run began so long ago that the window
		// holds nothing older, or attempts sent in the run are still
		// unanswered: then at a later accept of the run).
		if t.probability(d.run.sums(now)) < t.probability(d.throttle.sums(now)) {
			d.throttle = d.run
			d.forgot.Add(1)
		}
	}
}

// canRetry reports whether the budget has a retry left at now:
//
//	retries + 1 ≤ BudgetMinPerSecond·BudgetWindow + BudgetRatio·calls
func (d *Dest) canRetry(now time.Time) bool {
	r := &d.cfg.Retry
	calls, retries := d.budget.sums(now)
	return retries+1 <= r.BudgetMinPerSecond*r.BudgetWindow.Seconds()+r.BudgetRatio*calls
}

// Counts are a destination's counters since it was made.
type Counts struct {
	// Attempts were sent (first attempts and retries); Retries of them
	// were retries.
	Attempts, Retries uint64
	// Throttled attempts were refused by the throttle; BudgetExhausted
	// retries were not made for want of budget; Deadline attempts were
	// not sent for want of time (MinRemaining).
	Throttled, BudgetExhausted, Deadline uint64
	// Forgets are the accept runs that made the throttle's window forget
	// what came before them (ThrottleConfig.Forget).
	Forgets uint64
	// ThrottleProbability is the probability of the last decision.
	ThrottleProbability float64
}

// Counts returns the counters. Safe for concurrent use.
func (d *Dest) Counts() Counts {
	return Counts{Attempts: d.attempts.Load(), Retries: d.retries.Load(), Throttled: d.throttled.Load(),
		BudgetExhausted: d.exhausted.Load(), Deadline: d.late.Load(), Forgets: d.forgot.Load(),
		ThrottleProbability: math.Float64frombits(d.prob.Load())}
}

// Verdict is what the client side decides about an attempt.
type Verdict uint8

const (
	// Send: the attempt goes out.
	Send Verdict = iota
	// Throttled: the throttle refused it (ErrThrottled).
	Throttled
	// Late: less than MinRemaining of the deadline is left (ErrDeadline).
	Late
)

// Stop says why a call made no further attempt.
type Stop uint8

const (
	// StopDone: the answer is final (a success, or a failure a retry
	// would not help).
	StopDone Stop = iota
	// StopUnsafe: the request is not safe to send twice.
	StopUnsafe
	// StopAttempts: MaxAttempts were made.
	StopAttempts
	// StopBudget: the destination's retry budget is spent.
	StopBudget
	// StopThrottled: the throttle refused the retry.
	StopThrottled
	// StopRetryAfter: the answer asked to wait longer than MaxRetryAfter.
	StopRetryAfter
	// StopDeadline: the wait would leave less than MinRemaining.
	StopDeadline
	// StopRetry: not a stop; the call is retried.
	StopRetry
)

// String names the stop for logs and tests.
func (s Stop) String() string {
	switch s {
	case StopDone:
		return "done"
	case StopUnsafe:
		return "unsafe"
	case StopAttempts:
		return "attempts"
	case StopBudget:
		return "budget"
	case StopThrottled:
		return "throttled"
	case StopRetryAfter:
		return "retry_after"
	case StopDeadline:
		return "deadline"
	case StopRetry:
		return "retry"
	}
	return "unknown"
}

// Result is how an attempt ended, as the client side judges it.
type Result struct {
	// Outcome is the attempt's end in sluice's finishing vocabulary.
	// sluice.Ignore is an attempt whose caller gave up (its context
	// ended): the destination did not refuse it, it got no answer the
	// destination chose, and the call stops (StopDone). Success and
	// Failure (the zero value is Success) leave the judgement to the
	// fields below, which say more than success or failure: whether the
	// destination refused the attempt for overload, and whether a retry
	// may help.
	Outcome sluice.Outcome
	// Status is the answer's status code (0: no answer, a transport
	// failure or a timeout of the attempt).
	Status int
	// RetryAfter is the answer's Retry-After, when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Judged marks a result that its caller judged itself instead of by
	// an HTTP status (a gRPC status, package grpcsluice): Status is then
	// ignored, Retryable says whether a retry may help, Refused whether
	// the destination refused the attempt for overload, and NoAnswer
	// whether the attempt got no answer the destination chose (a
	// timeout, a transport failure), as Status 0 says of an HTTP result.
	Judged, Retryable, Refused, NoAnswer bool
}

// retryable reports whether a retry may help after r.
func (r Result) retryable() bool {
	if r.Judged {
		return r.Retryable
	}
	switch r.Status {
	case 0, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// answered reports whether the attempt got an answer the destination
// chose (not a timeout or a transport failure).
func (r Result) answered() bool {
	if r.Judged {
		return !r.NoAnswer
	}
	return r.Status != 0
}

// accepted reports whether the destination took the attempt (any answer
// but an overload refusal; a transport failure says nothing of overload).
func (r Result) accepted() bool {
	if r.Judged {
		return !r.Refused
	}
	return r.Status != http.StatusTooManyRequests && r.Status != http.StatusServiceUnavailable
}

// Call is one call (a request and its retries) to one destination,
// decided at times passed in: Begin decides the first attempt, Done each
// attempt's sequel. The zero value is ready for Begin; a Call must not be
// copied once begun, nor used by two goroutines at once (the Dest under
// it is shared: its callers serialise their calls on it).
type Call struct {
	d *Dest
	// cfg is d's configuration when the call began: a reload replaces
	// d.cfg under the destination's lock, and a call keeps the one it
	// started with (read without the lock by Overran and the transport).
	cfg      *Config
	safe     bool
	deadline time.Time // zero: none
	attempts int
}

// Begin starts a call to d at now: safe says whether the request may be
// sent twice, deadline is the caller's (zero: none). It counts the call
// in the retry budget and decides the first attempt: Late when less than
// MinRemaining of the deadline is left, Throttled when the throttle
// refuses it (drawing from rng), Send otherwise.
func (c *Call) Begin(d *Dest, now time.Time, safe bool, deadline time.Time, rng *rand.Rand) Verdict {
	*c = Call{d: d, cfg: d.cfg, safe: safe, deadline: deadline}
	d.budget.add(now, 1, 0)
	if c.short(now) {
		d.late.Add(1)
		return Late
	}
	if !d.admit(now, rng) {
		return Throttled
	}
	c.attempts = 1
	return Send
}

// short reports whether less than MinRemaining of the deadline is left at t.
func (c *Call) short(t time.Time) bool {
	return !c.deadline.IsZero() && c.deadline.Sub(t) < c.cfg.MinRemaining
}

// Attempts returns the attempts sent so far.
func (c *Call) Attempts() int { return c.attempts }

// Done records at now how the last attempt ended and decides the next:
// StopRetry with the wait before the retry, which is then sent (Done has
// taken its retry from the budget and let it through the throttle), or
// why the call stops. It draws from rng for the jitter and the throttle.
//
// An attempt whose caller gave up (r.Outcome is sluice.Ignore) is
// counted as accepted and not answered, draws nothing and stops the call.
func (c *Call) Done(now time.Time, r Result, rng *rand.Rand) (Stop, time.Duration) {
	d, cfg := c.d, &c.cfg.Retry
	if r.Outcome == sluice.Ignore {
		d.answered(now, true, false)
		return StopDone, 0
	}
	d.answered(now, r.accepted(), r.answered())
	switch {
	case !r.retryable():
		return StopDone, 0
	case !c.safe:
		return StopUnsafe, 0
	case c.attempts >= cfg.MaxAttempts:
		return StopAttempts, 0
	case r.HasRetryAfter && r.RetryAfter > cfg.MaxRetryAfter:
		return StopRetryAfter, 0
	}
	wait := Backoff(cfg.Backoff, cfg.MaxBackoff, c.attempts, rng.Float64())
	if r.HasRetryAfter && r.RetryAfter > wait {
		wait = r.RetryAfter
	}
	if c.short(now.Add(wait)) {
		d.late.Add(1)
		return StopDeadline, 0
	}
	if !d.canRetry(now) {
		d.exhausted.Add(1)
		return StopBudget, 0
	}
	if !d.admit(now, rng) {
		return StopThrottled, 0
	}
	d.budget.add(now, 0, 1)
	c.attempts++
	d.retries.Add(1)
	return StopRetry, wait
}

// Backoff returns the wait before retry n (n ≥ 1 attempts made), with
// full jitter: u·min(max, base·2^(n−1)), u in [0, 1).
func Backoff(base, maxWait time.Duration, n int, u float64) time.Duration {
	b := maxWait
	if n < 40 {
		b = min(maxWait, base<<(n-1))
		if b <= 0 { // overflow
			b = maxWait
		}
	}
	return time.Duration(u * float64(b))
}
