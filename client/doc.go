// SPDX-License-Identifier: Apache-2.0

// Package client is sluice's client side: what a caller does so that
// overload at the next hop does not turn into a retry storm. Transport is
// an http.RoundTripper usable in any Go client (sluice's proxy uses it
// for its upstream). For every call it
//
//   - carries the request's priority, tenant and deadline to the next hop
//     (sluice.Hop and the context's deadline, as the X-Sluice-Priority,
//     X-Sluice-Tenant and X-Sluice-Timeout headers), so that the next
//     hop sheds the lowest priority first and drops work whose caller
//     has given up;
//   - refuses to send an attempt that could not come back in time;
//   - throttles a destination that refuses calls, locally and cheaply:
//     Google's client-side adaptive throttling, refusing with probability
//     max(0, (requests − K·accepts)/(requests + 1)) (Beyer et al., Site
//     Reliability Engineering, O'Reilly 2016, ch. 21);
//   - retries only what is safe to send twice (idempotent methods, or an
//     Idempotency-Key), only failures a retry can help (transport
//     failures, 429, 502, 503, 504), at most Retry.MaxAttempts times and
//     within a per-destination retry budget of a ratio of the calls plus
//     a floor per second (Finagle's RetryBudget, Envoy's retry budget;
//     the SRE book's 10 %), after an exponential back-off with full
//     jitter and no earlier than the answer's Retry-After.
//
// The decisions are deterministic state machines: Dest (a destination's
// throttle and budget) and Call (one call's attempts), whose methods take
// the time and the random source as arguments and start no goroutine.
// Transport drives them with the wall clock; sluice's simulator drives
// the same objects in virtual time.
//
// Metrics go to the prometheus.Registerer given to New; nothing is
// registered globally.
package client
