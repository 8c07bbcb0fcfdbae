// SPDX-License-Identifier: Apache-2.0

package client

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/hopnames"
	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/internal/mathx"
)

// Config is the client side's configuration. Start from DefaultConfig;
// its YAML form is the proxy's backends.client section. The zero value of
// a field means its default (SetDefaults fills them).
type Config struct {
	// Throttle is Google's client-side adaptive throttling, per
	// destination.
	Throttle ThrottleConfig `yaml:"throttle" json:"throttle"`
	// Retry says when and how often a call is sent again.
	Retry RetryConfig `yaml:"retry" json:"retry"`
	// MinRemaining is the least time left of a call's deadline with which
	// an attempt is sent (default 1ms): with less, the attempt could not
	// come back in time, and sending it would spend the destination's
	// capacity on an answer nobody waits for. The call fails with
	// ErrDeadline instead.
	MinRemaining time.Duration `yaml:"min_remaining" json:"min_remaining"`
	// PriorityHeader (default X-Sluice-Priority), TenantHeader (default
	// X-Sluice-Tenant) and TimeoutHeader (default X-Sluice-Timeout) are
	// the headers stamped on every attempt from its context.
	PriorityHeader string `yaml:"priority_header" json:"priority_header"`
	TenantHeader   string `yaml:"tenant_header" json:"tenant_header"`
	TimeoutHeader  string `yaml:"timeout_header" json:"timeout_header"`
	// MaxDestinations bounds the destinations (host:port) with state of
	// their own (default 256); calls to others share one, labelled
	// "others" in the metrics.
	MaxDestinations int `yaml:"max_destinations" json:"max_destinations"`
}

// ThrottleConfig is client-side adaptive throttling (Beyer et al., Site
// Reliability Engineering, O'Reilly 2016, ch. 21 "Handling Overload"):
// over the last Window, a destination that refused more than 1/K of the
// attempts made to it gets each new attempt refused locally with
// probability
//
//	p = max(0, (requests − K·accepts) / (requests + 1))
//
// where requests counts every attempt the caller made, locally refused
// ones included (at least MinRequests of them, or nothing is refused),
// and accepts those the destination did not refuse for overload (any answer but 429 and 503; a transport failure, which says
// nothing about overload, counts as accepted, so that a dead destination
// is left to timeouts and health checks rather than throttled).
//
// The book's window remembers a storm for its whole span: after a crowd
// at three times what the destination accepts, the window holds twice as
// many requests as K·accepts allows, and at half the load the refused
// share falls to zero only when two thirds of the window has passed
// (about 7 s of a 10 s window) although the destination has accepted
// every attempt since the crowd ended. So by default (Forget "accepts")
// the window also forgets at an accept run: once the destination has
// accepted ForgetRun answers in a row (an attempt that got no answer, a
// timeout or a transport failure, is counted as accepted but is no
// evidence: it neither extends nor ends the run), the window drops everything it
// counted before the run (before its last refusal) and keeps the run's
// own requests and accepts, at the first accept of the run at which
// that lowers p (attempts sent in the run and not yet answered count as
// requests). A destination the throttle holds at its
// equilibrium (sent = K·accepts) accepts an attempt with probability
// 1/K, so it shows a run of n accepts with probability K^−n: the run is
// a one-sided CUSUM test (Page, "Continuous Inspection Schemes",
// Biometrika 1954) of the refused share falling from 1 − 1/K to zero,
// each accept adding ln K to the statistic and a refusal resetting it,
// with the threshold ForgetRun·ln K (10·ln 2 by default). Restarting the
// counts once a trial succeeds is what a circuit breaker does when it
// closes (Hystrix's HystrixCircuitBreaker resets its rolling statistics
// on the half-open trial's success). A destination that keeps refusing
// breaks every run, so its load stays cut to about K × its accepts. The
// run's own counts keep a graded restart: after a near-total outage
// (p ≥ 1 − 1/K) the refused share falls from p to 1 − K·(1 − p) per run,
// as the book's window lets it fall per window.
type ThrottleConfig struct {
	// Enabled turns throttling on (default true; the proxy's upstream
	// defaults it to false).
	Enabled *bool `yaml:"enabled" json:"enabled"`
	// K is the multiplier of accepts (default 2, the book's; a smaller K
	// throttles sooner).
	K float64 `yaml:"k" json:"k"`
	// Window is how far back requests and accepts count (default 10s; the
	// book counts two minutes, over which a ten-second overload moves the
	// ratio too little to throttle at all; go-zero's breaker counts 10 s).
	Window time.Duration `yaml:"window" json:"window"`
	// MinRequests is the fewest requests in the window with which the
	// throttle refuses anything (default 20): the formula's +1 alone
	// would refuse half the calls after a single 503. Ports do the same
	// (kratos/aegis waits for 100 requests, go-zero subtracts 5).
	MinRequests int `yaml:"min_requests" json:"min_requests"`
	// Forget says when the window lets go of the refusals it counted:
	// ForgetAccepts ("accepts", the default) also at an accept run of
	// ForgetRun answers, ForgetWindow ("window") only as they leave the
	// window, the SRE book's throttle as written.
	Forget string `yaml:"forget" json:"forget"`
	// ForgetRun is the accepts in a row that make the window forget what
	// came before them, with Forget "accepts" (default 10). Left 0, it is
	// set from K to ⌈10·ln 2/ln K⌉, so that a destination held at the
	// throttle's equilibrium shows such a run with probability 2^−10 per
	// attempt; with K = 1 the throttle holds the destination to what it
	// accepts, a run says nothing, and it stays 0: never.
	ForgetRun int `yaml:"forget_run" json:"forget_run"`
	// Scope is what the throttle counts apart: ScopeDestination
	// ("destination", the default) one window per destination, as the
	// SRE book's throttle is per backend; ScopeHop ("hop") one window per
	// destination and call's hop priority and tenant (sluice.Hop, what
	// the next hop's stage sheds and shares by), so that a destination
	// refusing one tenant or class over its share does not get the
	// others' calls refused by the caller (the book keeps the throttle's
	// statistics per criticality for the same reason). With "hop" each
	// such pair also has its own retry budget, floor included, and
	// counts against MaxDestinations; the metrics still sum by
	// destination.
	Scope string `yaml:"scope" json:"scope"`
}

// The values of ThrottleConfig.Forget.
const (
	// ForgetAccepts: the window forgets at an accept run (the default).
	ForgetAccepts = "accepts"
	// ForgetWindow: the SRE book's window, which forgets only with time.
	ForgetWindow = "window"
)

// The values of ThrottleConfig.Scope.
const (
	// ScopeDestination: one throttle window per destination (the default).
	ScopeDestination = "destination"
	// ScopeHop: one per destination, hop priority and hop tenant.
	ScopeHop = "hop"
)

// forgetBits is the evidence, in bits, that an accept run must carry
// against a destination held at the throttle's equilibrium: the default
// ForgetRun is ⌈forgetBits·ln 2/ln K⌉.
const forgetBits = 10

// defaultForgetRun returns ForgetRun's default for k (0 for k ≤ 1).
func defaultForgetRun(k float64) int {
	if !(k > 1) {
		return 0
	}
	return int(math.Min(math.Ceil(forgetBits*math.Ln2/math.Log(k)-1e-9), maxForgetRun))
}

// maxForgetRun bounds ForgetRun.
const maxForgetRun = 1000000

// RetryConfig says when a call is sent again. An attempt is retried only
// when all of these hold: the request is safe to send twice (an
// idempotent method — GET, HEAD, OPTIONS, TRACE, PUT, DELETE, RFC 9110
// §9.2.2 — or an Idempotency-Key header, and a body that can be sent
// again: none, or GetBody set); it failed in a way a retry can help (a
// transport failure, or status 429, 502, 503 or 504); fewer than
// MaxAttempts attempts were made; the destination's retry budget has a
// retry left; its throttle lets the retry go; and the wait before it
// leaves at least MinRemaining of the deadline. The wait is exponential
// with full jitter (AWS, "Exponential Backoff And Jitter", 2015),
//
//	wait = U·min(MaxBackoff, Backoff·2^(n−1)),  U uniform in [0, 1), n the attempts made,
//
// and at least the Retry-After of the answer (RFC 9110 §10.2.3); an
// answer that asks to wait more than MaxRetryAfter is not retried.
//
// The budget is per destination, after Finagle's RetryBudget and Envoy's
// retry budget: over the last BudgetWindow the retries may be at most
//
//	BudgetMinPerSecond·BudgetWindow + BudgetRatio·calls
//
// so that retries add at most BudgetRatio to the load a destination sees
// however badly it fails, besides a small floor that lets a quiet caller
// retry at all. With three attempts and no budget, two hops that each
// retry can multiply a user's request ninefold; with a 10 % budget, 1.1×
// per hop.
type RetryConfig struct {
	// MaxAttempts is the most attempts of one call, the first included
	// (default 3, the SRE book's; 1: never retry).
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// BudgetRatio is the retries allowed per call made (default 0.1, the
	// SRE book's per-client budget; Finagle and Envoy use 0.2).
	BudgetRatio float64 `yaml:"budget_ratio" json:"budget_ratio"`
	// BudgetMinPerSecond is the floor of the budget in retries per second
	// (default 10, Finagle's minRetriesPerSec).
	BudgetMinPerSecond float64 `yaml:"budget_min_per_second" json:"budget_min_per_second"`
	// BudgetWindow is how far back calls and retries count (default 10s,
	// Finagle's ttl).
	BudgetWindow time.Duration `yaml:"budget_window" json:"budget_window"`
	// Backoff is the first wait's bound (default 25ms) and MaxBackoff the
	// largest (default 250ms), Envoy's retry back-off.
	Backoff    time.Duration `yaml:"backoff" json:"backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff" json:"max_backoff"`
	// MaxRetryAfter is the longest Retry-After honoured (default 5s): an
	// answer that asks for longer is returned as it is.
	MaxRetryAfter time.Duration `yaml:"max_retry_after" json:"max_retry_after"`
	// PerTryTimeout bounds each attempt (default 0: an attempt may use
	// all that is left of the call's deadline); the attempt's own
	// deadline is the earlier of the two, and it is what the timeout
	// header carries. A retry after a timed-out attempt re-sends work the
	// destination may still be doing, so leave it 0 unless the
	// destination cancels work whose caller is gone.
	PerTryTimeout time.Duration `yaml:"per_try_timeout" json:"per_try_timeout"`
}

// Defaults of Config.
const (
	DefaultK                  = 2
	DefaultThrottleWindow     = 10 * time.Second
	DefaultMinRequests        = 20
	DefaultMaxAttempts        = 3
	DefaultBudgetRatio        = 0.1
	DefaultBudgetMinPerSecond = 10
	DefaultBudgetWindow       = 10 * time.Second
	DefaultBackoff            = 25 * time.Millisecond
	DefaultMaxBackoff         = 250 * time.Millisecond
	DefaultMaxRetryAfter      = 5 * time.Second
	DefaultMinRemaining       = time.Millisecond
	DefaultMaxDestinations    = 256
)

// DefaultConfig returns the defaults: Throttle.Enabled true, K 2, Window
// 10s, MinRequests 20, Forget "accepts", ForgetRun 10, Scope
// "destination"; Retry.MaxAttempts 3, BudgetRatio 0.1,
// BudgetMinPerSecond 10, BudgetWindow 10s, Backoff 25ms, MaxBackoff
// 250ms, MaxRetryAfter 5s, PerTryTimeout 0; MinRemaining 1ms;
// PriorityHeader X-Sluice-Priority, TenantHeader X-Sluice-Tenant,
// TimeoutHeader X-Sluice-Timeout; MaxDestinations 256.
func DefaultConfig() Config {
	var c Config
	c.SetDefaults()
	return c
}

// SetDefaults fills every field whose zero value means its default.
func (c *Config) SetDefaults() {
	t := &c.Throttle
	if t.Enabled == nil {
		on := true
		t.Enabled = &on
	}
	t.K = cmp.Or(t.K, DefaultK)
	t.Window = cmp.Or(t.Window, DefaultThrottleWindow)
	t.MinRequests = cmp.Or(t.MinRequests, DefaultMinRequests)
	t.Forget = cmp.Or(t.Forget, ForgetAccepts)
	t.Scope = cmp.Or(t.Scope, ScopeDestination)
	if t.ForgetRun == 0 {
		t.ForgetRun = defaultForgetRun(t.K)
	}
	r := &c.Retry
	r.MaxAttempts = cmp.Or(r.MaxAttempts, DefaultMaxAttempts)
	r.BudgetMinPerSecond = cmp.Or(r.BudgetMinPerSecond, DefaultBudgetMinPerSecond)
	r.BudgetRatio = cmp.Or(r.BudgetRatio, DefaultBudgetRatio)
	r.BudgetWindow = cmp.Or(r.BudgetWindow, DefaultBudgetWindow)
	r.Backoff = cmp.Or(r.Backoff, DefaultBackoff)
	r.MaxBackoff = cmp.Or(r.MaxBackoff, DefaultMaxBackoff)
	r.MaxRetryAfter = cmp.Or(r.MaxRetryAfter, DefaultMaxRetryAfter)
	c.MinRemaining = cmp.Or(c.MinRemaining, DefaultMinRemaining)
	hopnames.SetDefaults(&c.PriorityHeader, &c.TenantHeader, &c.TimeoutHeader)
	c.MaxDestinations = cmp.Or(c.MaxDestinations, DefaultMaxDestinations)
}

// Validate reports the first invalid field as a *sluice.FieldError naming
// its YAML path (call SetDefaults first).
func (c *Config) Validate() error {
	t, r := &c.Throttle, &c.Retry
	if err := fielderr.First(
		fielderr.If(!mathx.Finite(t.K) || t.K < 1, "throttle.k", t.K, "must be ≥ 1 (2 is the SRE book's)"),
		fielderr.PositiveDuration("throttle.window", t.Window, "10s"),
		fielderr.AtLeast("throttle.min_requests", t.MinRequests, 1),
		fielderr.If(t.Forget != ForgetAccepts && t.Forget != ForgetWindow, "throttle.forget", t.Forget,
			fmt.Sprintf("must be %q (the default) or %q (the SRE book's window)", ForgetAccepts, ForgetWindow)),
		fielderr.If(t.Scope != ScopeDestination && t.Scope != ScopeHop, "throttle.scope", t.Scope,
			fmt.Sprintf("must be %q (the default) or %q (per hop priority and tenant)", ScopeDestination, ScopeHop)),
		fielderr.If(t.ForgetRun < 0 || t.ForgetRun > maxForgetRun, "throttle.forget_run", t.ForgetRun,
			fmt.Sprintf("must be within [1, %d] accepts in a row (0: the default from throttle.k)", maxForgetRun)),
		fielderr.If(r.MaxAttempts < 1 || r.MaxAttempts > 10, "retry.max_attempts", r.MaxAttempts, "must be within [1, 10] (1: no retries)"),
		fielderr.If(!mathx.Finite(r.BudgetRatio) || r.BudgetRatio <= 0 || r.BudgetRatio > 1, "retry.budget_ratio", r.BudgetRatio,
			"must be within (0, 1], such as 0.1"),
		fielderr.If(!mathx.Finite(r.BudgetMinPerSecond) || r.BudgetMinPerSecond < 0, "retry.budget_min_per_second", r.BudgetMinPerSecond,
			"must be a finite number ≥ 0"),
		fielderr.PositiveDuration("retry.budget_window", r.BudgetWindow, "10s"),
		fielderr.PositiveDuration("retry.backoff", r.Backoff, "25ms"),
		fielderr.If(r.MaxBackoff < r.Backoff, "retry.max_backoff", r.MaxBackoff, fmt.Sprintf("must be ≥ retry.backoff (%v)", r.Backoff)),
		fielderr.PositiveDuration("retry.max_retry_after", r.MaxRetryAfter, "5s"),
		fielderr.If(r.PerTryTimeout < 0, "retry.per_try_timeout", r.PerTryTimeout, "must be a positive duration, or 0 for none"),
		fielderr.If(c.MinRemaining < 0, "min_remaining", c.MinRemaining, "must be a duration ≥ 0 such as 1ms"),
		fielderr.AtLeast("max_destinations", c.MaxDestinations, 1),
	); err != nil {
		return err
	}
	for _, h := range []struct{ path, v string }{{"priority_header", c.PriorityHeader},
		{"tenant_header", c.TenantHeader}, {"timeout_header", c.TimeoutHeader}} {
		if !httpx.IsToken(h.v) {
			return fielderr.Errorf(h.path, "%q is not a valid header name", h.v)
		}
	}
	return nil
}
