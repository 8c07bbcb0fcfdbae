// SPDX-License-Identifier: Apache-2.0

package sluice

import "time"

// RetryState is what a stage knows, when it rejects a request, about
// when a retry of that request could be admitted. The stage fills it at
// the rejection from its gate, its queue and its controller's schedule;
// it never blocks or allocates.
type RetryState struct {
	// NextStep is when the controller next updates its setting: its last
	// step plus its period (a sample-triggered controller, SEDA, may run
	// sooner).
	NextStep time.Time
	// TokenWait is, for a rate gate, the time until the gate holds a
	// token for the request's class (0 when one is there, or for another
	// gate).
	TokenWait time.Duration
	// Queue is the number of requests waiting for a concurrency slot, and
	// Limit the concurrency limit (0 for other gates).
	Queue, Limit int
	// ServiceMean is the mean service time of the stage's last period (0
	// when unknown or not measured).
	ServiceMean time.Duration
}

// Drain returns the predicted time for the queue ahead of a retry, and
// the retry itself, to drain through the concurrency limit:
//
//	drain = (Queue + 1) · ServiceMean / Limit
//
// (Little's law for Limit servers each busy ServiceMean per request). It
// is 0 when the limit or the service time is unknown.
func (r RetryState) Drain() time.Duration {
	if r.Limit <= 0 || r.ServiceMean <= 0 {
		return 0
	}
	return time.Duration(float64(r.Queue+1) * float64(r.ServiceMean) / float64(r.Limit))
}

// RetryAdvisor is implemented by a controller whose state says when a
// rejected request's retry could be admitted, in place of the stage's
// default for its gate: for a rate gate the time to the next token of
// the request's class (RetryState.TokenWait), for a concurrency limit the
// predicted drain time of the queue ahead (RetryState.Drain), for a drop
// probability the time to the controller's next step. The stage bounds
// the answer by its configured minimum and maximum and sends it as
// Retry-After in whole seconds (RFC 9110 §10.2.3). RetryAfter must not
// block or allocate; it is called on the rejection path, concurrently
// with Update.
type RetryAdvisor interface {
	RetryAfter(now time.Time, s RetryState) time.Duration
}
