// SPDX-License-Identifier: Apache-2.0

// Package retry holds the retry policies that the chain figures (graph,
// graph-crowd) compare with sluice's client side: what services without
// overload control do when a call to the next hop fails. Each policy is
// a deterministic state machine shaped like package client's Dest and
// Call — time is an argument, randomness comes from the caller's
// *rand.Rand, nothing reads the clock or starts a goroutine — so that
// the simulator drives the very objects the live tiers drive (Transport).
//
// Every policy makes up to MaxAttempts attempts of a call, retrying the
// failures a retry can help (Retryable: a transport failure or an
// attempt's timeout, 429, 502, 503, 504) after a fixed Backoff, and
// ignores Retry-After, as a service that was never told about overload
// does. They differ in what bounds the retries:
//
//   - Naive: nothing but MaxAttempts.
//   - Budget: a retry budget per destination, Finagle's RetryBudget and
//     Envoy's retry budget: over the last BudgetWindow at most
//     BudgetMinPerSecond·BudgetWindow + BudgetRatio·calls retries. It is
//     package client's budget (client.Call on a client.Dest with its
//     throttle off), with the policy's fixed back-off.
//   - Throttle: grpc-go's retry throttling (gRFC A6, "retryThrottling"): a
//     token count per destination, starting at MaxTokens; every failed
//     attempt takes one token (not below 0), every successful one gives
//     back TokenRatio (not above MaxTokens), and a failed attempt is
//     retried only while more than MaxTokens/2 tokens are left. First
//     attempts are never refused. The semantics are implemented here
//     from the gRFC's description; a per-try timeout counts as a failure
//     (gRPC has no per-try timeout; its UNAVAILABLE is the closest).
//
// Only the caller's attempts are bounded: a deadline is not carried to
// the next hop (these services do not know about deadlines); an attempt
// ends at the policy's PerTry timeout or when the caller goes away.
package retry

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// Kind names a retry policy.
type Kind string

// The policies.
const (
	// Naive retries every retryable failure, up to MaxAttempts attempts.
	Naive Kind = "naive"
	// Budget retries within a per-destination retry budget (Finagle,
	// Envoy).
	Budget Kind = "budget"
	// Throttle retries while grpc-go's per-destination token count allows
	// (gRFC A6 retry throttling).
	Throttle Kind = "grpc-throttle"
)

// Kinds lists the policies.
var Kinds = []Kind{Naive, Budget, Throttle}

// Defaults of Config.
const (
	DefaultMaxAttempts        = 3
	DefaultBudgetRatio        = 0.2 // Finagle's percentCanRetry, Envoy's budget_percent
	DefaultBudgetMinPerSecond = 10  // Finagle's minRetriesPerSec
	DefaultBudgetWindow       = 10 * time.Second
	DefaultMaxTokens          = 10  // the gRFC's example
	DefaultTokenRatio         = 0.1 // the gRFC's example
)

// Config is a retry policy. The zero value of a field means its default
// (SetDefaults); Backoff and PerTry default to 0.
type Config struct {
	// Kind is the policy (default Naive).
	Kind Kind `json:"kind"`
	// MaxAttempts is the most attempts of a call, the first included
	// (default 3).
	MaxAttempts int `json:"max_attempts"`
	// Backoff is the wait before every retry (default 0: at once).
	Backoff time.Duration `json:"backoff"`
	// PerTry is each attempt's timeout (default 0: none); an attempt
	// that reaches it fails as a transport failure would (status 0).
	PerTry time.Duration `json:"per_try"`
	// BudgetRatio, BudgetMinPerSecond and BudgetWindow are Budget's
	// (defaults 0.2, 10/s, 10s: Finagle's).
	BudgetRatio        float64       `json:"budget_ratio"`
	BudgetMinPerSecond float64       `json:"budget_min_per_second"`
	BudgetWindow       time.Duration `json:"budget_window"`
	// MaxTokens and TokenRatio are Throttle's (defaults 10 and 0.1, the
	// gRFC's example).
	MaxTokens  float64 `json:"max_tokens"`
	TokenRatio float64 `json:"token_ratio"`
}

// SetDefaults fills the fields whose zero value means a default.
func (c *Config) SetDefaults() {
	c.Kind = cmp.Or(c.Kind, Naive)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.BudgetRatio = cmp.Or(c.BudgetRatio, DefaultBudgetRatio)
	c.BudgetMinPerSecond = cmp.Or(c.BudgetMinPerSecond, DefaultBudgetMinPerSecond)
	c.BudgetWindow = cmp.Or(c.BudgetWindow, DefaultBudgetWindow)
	c.MaxTokens = cmp.Or(c.MaxTokens, DefaultMaxTokens)
	c.TokenRatio = cmp.Or(c.TokenRatio, DefaultTokenRatio)
}

// Validate reports the first invalid field (call SetDefaults first).
func (c *Config) Validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case c.Kind != Naive && c.Kind != Budget && c.Kind != Throttle:
		return fmt.Errorf("retry: kind %q: want %s, %s or %s", c.Kind, Naive, Budget, Throttle)
	case c.MaxAttempts < 1 || c.MaxAttempts > 10:
		return fmt.Errorf("retry: max_attempts %d: want 1..10", c.MaxAttempts)
	case c.Backoff < 0:
		return fmt.Errorf("retry: backoff %v: want ≥ 0", c.Backoff)
	case c.PerTry < 0:
		return fmt.Errorf("retry: per_try %v: want ≥ 0 (0: none)", c.PerTry)
	case !finite(c.BudgetRatio) || c.BudgetRatio <= 0 || c.BudgetRatio > 1:
		return fmt.Errorf("retry: budget_ratio %v: want (0, 1]", c.BudgetRatio)
	case !finite(c.BudgetMinPerSecond) || c.BudgetMinPerSecond < 0:
		return fmt.Errorf("retry: budget_min_per_second %v: want ≥ 0", c.BudgetMinPerSecond)
	case c.BudgetWindow <= 0:
		return fmt.Errorf("retry: budget_window %v: want > 0", c.BudgetWindow)
	case !finite(c.MaxTokens) || c.MaxTokens <= 0 || c.MaxTokens > 1000:
		return fmt.Errorf("retry: max_tokens %v: want (0, 1000] (gRPC's bound)", c.MaxTokens)
	case !finite(c.TokenRatio) || c.TokenRatio <= 0:
		return fmt.Errorf("retry: token_ratio %v: want > 0", c.TokenRatio)
	}
	return nil
}

// Retryable reports whether a retry may help after an attempt that ended
// with status (0: no answer — a transport failure or the attempt's
// timeout): the same failures as package client retries.
func Retryable(status int) bool {
	switch status {
	case 0, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// success reports whether an answer is a success for Throttle's tokens.
func success(status int) bool { return status >= 200 && status < 400 }

// Dest is a policy's state for one destination: Budget's calls and
// retries of the last window (a client.Dest whose throttle is off),
// Throttle's token count. It is not safe for concurrent use (Transport
// holds a lock per destination).
type Dest struct {
	cfg    Config
	budget *client.Dest
	tokens float64
}

// NewDest returns the state of a destination under cfg (SetDefaults is
// applied to a copy).
func NewDest(cfg Config) (*Dest, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Dest{cfg: cfg, tokens: cfg.MaxTokens}
	if cfg.Kind == Budget {
		off := false
		cc := client.Config{
			Throttle: client.ThrottleConfig{Enabled: &off},
			Retry: client.RetryConfig{MaxAttempts: cfg.MaxAttempts, BudgetRatio: cfg.BudgetRatio,
				BudgetMinPerSecond: cfg.BudgetMinPerSecond, BudgetWindow: cfg.BudgetWindow,
				// The wait is the policy's fixed Backoff, not the client
				// side's jitter (Done replaces it).
				Backoff: time.Nanosecond, MaxBackoff: time.Nanosecond},
			MinRemaining: time.Nanosecond,
		}
		cc.SetDefaults()
		if err := cc.Validate(); err != nil {
			return nil, err
		}
		d.budget = client.NewDest(&cc)
	}
	return d, nil
}

// Config returns the policy with its defaults.
func (d *Dest) Config() Config { return d.cfg }

// Tokens returns Throttle's token count (MaxTokens for the other kinds).
func (d *Dest) Tokens() float64 { return d.tokens }

// Call is one call (a request and its retries) to one destination under
// its policy: Begin decides the first attempt, Done each attempt's
// sequel. The zero value is ready for Begin; a Call must not be copied
// once begun.
type Call struct {
	d        *Dest
	inner    client.Call // Budget's
	attempts int
}

// Begin starts a call to d at now. The first attempt is always sent
// (none of these policies refuses a first attempt); Budget counts the
// call in its budget.
func (c *Call) Begin(d *Dest, now time.Time, rng *rand.Rand) client.Verdict {
	*c = Call{d: d, attempts: 1}
	if d.budget != nil {
		return c.inner.Begin(d.budget, now, true, time.Time{}, rng)
	}
	return client.Send
}

// Attempts returns the attempts sent so far.
func (c *Call) Attempts() int { return c.attempts }

// Done records at now how the last attempt ended (r.Status; Retry-After
// is ignored) and decides the next: client.StopRetry with the wait
// before the retry, which is then sent, or why the call stops
// (client.StopDone, StopAttempts, StopBudget, StopThrottled).
func (c *Call) Done(now time.Time, r client.Result, rng *rand.Rand) (client.Stop, time.Duration) {
	d, cfg := c.d, &c.d.cfg
	retryable := Retryable(r.Status)
	if d.cfg.Kind == Throttle {
		switch {
		case success(r.Status):
			d.tokens = math.Min(cfg.MaxTokens, d.tokens+cfg.TokenRatio)
		case retryable:
			d.tokens = math.Max(0, d.tokens-1)
		}
	}
	switch {
	case !retryable:
		if d.budget != nil {
			c.inner.Done(now, client.Result{Status: r.Status}, rng)
		}
		return client.StopDone, 0
	case c.attempts >= cfg.MaxAttempts:
		return client.StopAttempts, 0
	}
	switch d.cfg.Kind {
	case Budget:
		if stop, _ := c.inner.Done(now, client.Result{Status: r.Status}, rng); stop != client.StopRetry {
			return stop, 0
		}
	case Throttle:
		if d.tokens <= cfg.MaxTokens/2 {
			return client.StopThrottled, 0
		}
	}
	c.attempts++
	return client.StopRetry, cfg.Backoff
}

// Abandon records at now that the last attempt ended because the caller
// gave up: the call stops, and nothing is learnt of the destination.
func (c *Call) Abandon(now time.Time) {
	if c.d.budget != nil {
		c.inner.Done(now, client.Result{Outcome: sluice.Ignore}, nil)
	}
}
