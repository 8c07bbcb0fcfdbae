// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/ctxsleep"
	"github.com/sluicehq/sluice/internal/httpx"
)

// Errors of RoundTrip that no attempt was sent for.
var (
	// ErrThrottled: the destination's throttle refused the call. It wraps
	// sluice.ErrRejected, so that a proxy answers it as a rejection.
	ErrThrottled = fmt.Errorf("client: throttled: the destination refuses too many calls: %w", sluice.ErrRejected)
	// ErrDeadline: less than MinRemaining was left of the call's deadline.
	// It wraps context.DeadlineExceeded.
	ErrDeadline = fmt.Errorf("client: too little time left of the deadline to send the call: %w", context.DeadlineExceeded)
)

// Options are a Transport's run-time inputs that are not configuration.
type Options struct {
	// Registerer, when set, gets the Transport's metrics (per
	// destination: sluice_client_attempts_total, _retries_total,
	// _throttled_total, _budget_exhausted_total, _deadline_total and the
	// gauge sluice_client_throttle_probability). nil: no metrics.
	Registerer prometheus.Registerer
	// Name, when set, is the const label client="Name" of the metrics, so
	// that several Transports share a registry.
	Name string
	// Rand seeds each destination's source of the throttle's and the
	// jitter's draws (nil: seeds from the runtime's source). A seeded
	// source makes the draws reproducible for a given order of calls.
	Rand *rand.Rand
	// StampInPlace lets RoundTrip set the hop headers on the caller's
	// request itself for its first attempt, instead of on a copy, saving
	// the copy's allocations. Set it only when every request is built for
	// one call and not used after RoundTrip returns (a reverse proxy's
	// outgoing requests). Retries always go out as copies.
	StampInPlace bool
}

// Transport is sluice's client side, an http.RoundTripper in front of a
// base transport, usable in any Go client and used by sluice's proxy for
// its upstream. For each call it
//
//   - stamps on every attempt what travels with the request (from its
//     context): the priority and the tenant of sluice.HopFrom (unless the
//     request already carries those headers) and the time left of the
//     attempt's deadline in the timeout header, grpc-timeout's encoding;
//   - refuses at once, with ErrDeadline, an attempt with less than
//     MinRemaining left of its deadline;
//   - throttles the destination (host:port) adaptively (ThrottleConfig),
//     refusing with ErrThrottled;
//   - retries what is safe to retry within the destination's retry
//     budget, after an exponential back-off with full jitter and no
//     earlier than Retry-After (RetryConfig).
//
// The decisions are the deterministic Dest and Call, driven here with the
// wall clock; the simulator drives the same objects in virtual time.
//
// On the success path without a deadline or a hop to stamp, RoundTrip
// adds no allocation to the base transport's (BenchmarkTransport); with
// them it copies the request (or, with StampInPlace, allocates only the
// timeout's value). A Transport is safe for concurrent use.
type Transport struct {
	base    http.RoundTripper
	inPlace bool
	*Dests
}

// New returns a Transport sending through base (nil:
// http.DefaultTransport) with cfg (SetDefaults is applied to a copy; an
// invalid field is a *sluice.FieldError).
func New(base http.RoundTripper, cfg Config, opts Options) (*Transport, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	d, err := NewDests(canonical(cfg), opts)
	if err != nil {
		return nil, err
	}
	return &Transport{base: base, inPlace: opts.StampInPlace, Dests: d}, nil
}

// SetConfig puts cfg into force for the calls that start from now on (a
// reload): every destination keeps its counts and counters. An invalid
// cfg is an error and changes nothing.
func (t *Transport) SetConfig(cfg Config) error { return t.Dests.SetConfig(canonical(cfg)) }

// canonical returns cfg with its defaults and its header names in
// canonical form.
func canonical(cfg Config) Config {
	cfg.SetDefaults()
	cfg.PriorityHeader = http.CanonicalHeaderKey(cfg.PriorityHeader)
	cfg.TenantHeader = http.CanonicalHeaderKey(cfg.TenantHeader)
	cfg.TimeoutHeader = http.CanonicalHeaderKey(cfg.TimeoutHeader)
	return cfg
}

// RoundTrip sends req, and its retries (see Transport).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	deadline, _ := ctx.Deadline()
	hop := sluice.HopFrom(ctx)
	var call LiveCall
	v := t.BeginHop(&call, req.URL.Host, hop, time.Now(), safeToRetry(req), deadline)
	cfg := call.Config()
	switch v {
	case Throttled:
		httpx.CloseRequestBody(req)
		return nil, ErrThrottled
	case Late:
		httpx.CloseRequestBody(req)
		return nil, ErrDeadline
	}
	for first := true; ; first = false {
		out, cancel, err := t.attempt(cfg, req, first, hop, deadline)
		if err != nil {
			httpx.CloseRequestBody(req)
			return nil, err
		}
		resp, err := t.base.RoundTrip(out)
		if err != nil && ctx.Err() != nil {
			// The caller is gone or out of time: nothing to retry for,
			// and nothing learnt of the destination.
			call.Done(time.Now(), Result{Outcome: sluice.Ignore})
			if cancel != nil {
				cancel()
			}
			return resp, err
		}
		now := time.Now()
		res := Result{Outcome: sluice.Failure}
		if err == nil {
			res.Status = resp.StatusCode
			res.Outcome = sluice.OutcomeOf(resp.StatusCode < 500)
			res.RetryAfter, res.HasRetryAfter = RetryAfter(resp.Header, now)
		}
		stop, wait := call.Done(now, res)
		if stop != StopRetry || !ctxsleep.Sleep(ctx, wait) {
			if cancel != nil {
				if resp != nil {
					resp.Body = httpx.CancelOnClose(resp.Body, cancel)
				} else {
					cancel()
				}
			}
			return resp, err
		}
		if call.Overran(time.Now()) {
			// The wait overran: the last answer stands.
			if cancel != nil {
				resp.Body = httpx.CancelOnClose(resp.Body, cancel)
			}
			return resp, err
		}
		if resp != nil {
			drain(resp.Body)
		}
		if cancel != nil {
			cancel()
		}
	}
}

// attempt returns the request of one attempt with its hop headers, and
// the cancel of a per-try timeout's context (nil when none).
func (t *Transport) attempt(cfg *Config, req *http.Request, first bool, hop sluice.Hop, deadline time.Time) (*http.Request, context.CancelFunc, error) {
	now := time.Now()
	try := deadline
	var cancel context.CancelFunc
	ctx := req.Context()
	if pt := cfg.Retry.PerTryTimeout; pt > 0 && (try.IsZero() || now.Add(pt).Before(try)) {
		try = now.Add(pt)
		ctx, cancel = context.WithDeadline(ctx, try)
	}
	h := req.Header
	stamp := !try.IsZero() ||
		(hop.Priority != "" && len(h[cfg.PriorityHeader]) == 0) ||
		(hop.Tenant != "" && len(h[cfg.TenantHeader]) == 0)
	if first && !stamp && cancel == nil {
		return req, nil, nil
	}
	out := req
	if !first || !t.inPlace {
		out = new(http.Request)
		*out = *req
		// A new map with room for the hop headers, sharing the caller's
		// value slices: they are only ever replaced, never written.
		out.Header = make(http.Header, len(req.Header)+3)
		for k, v := range req.Header {
			out.Header[k] = v
		}
	}
	if cancel != nil {
		out = out.WithContext(ctx)
	}
	if !first && req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			if cancel != nil {
				cancel()
			}
			return nil, nil, err
		}
		out.Body = body
	}
	oh := out.Header
	var vals []string // one allocation for the new headers' values
	set := func(key, v string) {
		if vals == nil {
			vals = make([]string, 0, 3)
		}
		vals = append(vals, v)
		oh[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if hop.Priority != "" && len(oh[cfg.PriorityHeader]) == 0 {
		set(cfg.PriorityHeader, hop.Priority)
	}
	if hop.Tenant != "" && len(oh[cfg.TenantHeader]) == 0 {
		set(cfg.TenantHeader, hop.Tenant)
	}
	if !try.IsZero() {
		v := sluice.FormatTimeout(try.Sub(now))
		if vs := oh[cfg.TimeoutHeader]; len(vs) == 1 && out == req {
			vs[0] = v // the caller's own slice (StampInPlace)
		} else {
			set(cfg.TimeoutHeader, v)
		}
	}
	return out, cancel, nil
}

// drainBytes is how much of a retried answer's body is read so that its
// connection can be reused.
const drainBytes = 4 << 10

func drain(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, drainBytes)
	_ = body.Close()
}

// safeToRetry reports whether req may be sent twice: an idempotent method
// (RFC 9110 §9.2.2) or an Idempotency-Key header (as net/http's own
// transport treats it), and a body that can be sent again.
func safeToRetry(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// RetryAfter returns the wait an answer's Retry-After asks for at now
// (RFC 9110 §10.2.3: delay-seconds or an HTTP-date; a date in the past is
// 0), and false when there is none or it is malformed.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := h["Retry-After"]
	if len(v) == 0 {
		return 0, false
	}
	s := strings.TrimSpace(v[0])
	if s == "" {
		return 0, false
	}
	if s[0] >= '0' && s[0] <= '9' {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	when, err := http.ParseTime(s)
	if err != nil {
		return 0, false
	}
	return max(when.Sub(now), 0), true
}

// CloseIdleConnections closes the base transport's idle connections, when
// it has that method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// IsThrottled reports whether err is the throttle's refusal.
func IsThrottled(err error) bool { return errors.Is(err, ErrThrottled) }
