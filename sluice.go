// SPDX-License-Identifier: Apache-2.0

// Package sluice is the vocabulary shared by every part of sluice: the
// measurements a controller sees once per control period, the decision it
// returns, and the Controller interface with its single step function.
//
// Controllers, gates and monitors are deterministic state machines driven
// from outside: every method that depends on time takes now as an argument,
// nothing reads the wall clock, sleeps or starts a goroutine. The live
// runtime (the proxy and the middleware) drives them with real measurements
// on a ticker; the simulator drives the same objects in virtual time.
//
// This package has no third-party imports.
package sluice

import (
	"errors"
	"fmt"
	"time"
)

// ErrRejected is returned (or wrapped) when admission control refuses a
// request. Callers answer it with an explicit, cheap rejection: HTTP 503
// with Retry-After, or a TCP reset for early discard.
var ErrRejected = errors.New("sluice: request rejected by admission control")

// ErrHog is the cause (context.Cause) with which a stage's hog rule
// cancels the context of a request in service (package stage's
// HogError wraps it): the request holds its slot longer than the rule
// allows, or its tenant holds more than its share while others wait.
// It wraps ErrRejected: the request is answered as a rejection (HTTP
// 503 with Retry-After, gRPC RESOURCE_EXHAUSTED), never silently.
var ErrHog = fmt.Errorf("sluice: request cancelled in service by the hog rule: %w", ErrRejected)

// Measurements is what a controller sees at one step: what happened since
// the previous call to Update. The zero value means "nothing observed".
//
// Every quantity is a float64 so that a missing or corrupt reading can be
// expressed as NaN; controllers treat NaN, ±Inf and out-of-range values as
// unavailable and hold their setting rather than act on them.
type Measurements struct {
	// Elapsed is the length of the interval these measurements cover: the
	// control period h for periodic controllers, or the time since the
	// previous run for SEDA's nreq/timeout trigger.
	Elapsed time.Duration

	// Class is the index of the request class these measurements belong to
	// (0 is the highest priority). Single-class controllers ignore it.
	Class int

	// Arrivals is the number of requests offered to the gate in the
	// interval (admitted + rejected). For a Voigt filter rule it is the
	// rule's "hits".
	Arrivals float64
	// Admitted is the number of requests the gate let through.
	Admitted float64
	// Rejected is the number of requests the gate refused.
	Rejected float64
	// Completed is the number of admitted requests that finished (any
	// status) in the interval.
	Completed float64
	// Failed is the part of Completed that failed: an error status, a
	// transport failure, a timeout, a client that gave up. Completed −
	// Failed is the goodput count.
	Failed float64

	// Samples is the number of response-time samples behind MeanRT and
	// P90RT. Timed-out and rejected requests are never samples.
	Samples float64
	// MeanRT is the mean response time of the samples, in seconds.
	MeanRT float64
	// P90RT is the exact 90th percentile (nearest rank) of the samples, in
	// seconds.
	P90RT float64

	// Utilization is the busy fraction of the guarded resource over the
	// interval, in [0, 1] (1 − idle fraction). NaN when no sensor is bound.
	Utilization float64

	// Queue is the length of the queue the controller watches, in the
	// queue's own unit: requests waiting for a backend slot (the papers'
	// listen queue) or the outgoing byte queue normalised to its capacity.
	Queue float64

	// The fields below describe the stage's concurrency: requests "in
	// service" are admitted requests that hold a slot of the stage's
	// concurrency limit. They are what concurrency controllers (auto,
	// gradient2, envoy-gradient, bbr) steer by, and they are measured only
	// in stages whose controller limits concurrency (zero, or NaN for the
	// statistics, elsewhere).

	// InFlight is the time-weighted mean number of requests in service
	// over the interval.
	InFlight float64
	// MaxInFlight is the largest number of requests in service at any
	// moment of the interval.
	MaxInFlight float64

	// ServiceSamples is the number of service-time samples of the
	// interval: requests that completed successfully, admitted after the
	// last decision that set Fence. The service statistics below are
	// meaningful only when it is > 0 (they are NaN otherwise).
	ServiceSamples float64
	// ServiceMean, ServiceP50, ServiceP90, ServiceP99 and ServiceMin are
	// the mean, nearest-rank percentiles and minimum of the service times,
	// in seconds. A service time runs from the moment the request got its
	// slot (was admitted, without a limit) to its completion, less any
	// time the caller spent blocked on a slow client: it is the latency
	// of the service behind the stage, without the stage's own queue.
	ServiceMean, ServiceP50, ServiceP90, ServiceP99, ServiceMin float64
	// ServiceTailSamples and ServiceTailP99 are the count and the p99 (in
	// seconds) of the service times of every request that completed
	// successfully in the interval, whatever the Fence (control.Needs.
	// ServiceTail; 0 and NaN when the stage does not measure them). A
	// fence drops the requests admitted before it, and a long request is
	// more likely to straddle one than a short one: behind a heavy tail
	// ServiceP99 reads low.
	ServiceTailSamples, ServiceTailP99 float64

	// Parallel is one more than the largest number of requests still in
	// service that had entered it before a request that left service in
	// the interval: how many earlier requests a completion overtook, plus
	// one. Behind W workers serving their queue in order it is at most
	// min(n, W) for n in service (control.Needs.Overtakes; 0 when the
	// stage does not measure it or no request left service). Where the
	// caller names the server a request went to (stage.Ticket.SentTo),
	// requests are counted among those of the same server and Parallel
	// is the sum over the servers, Σ min(n_s, W_s).
	Parallel float64
	// BackendShare is the part of the completions' time in service (from
	// admission to completion) that they spent in the backend, from the
	// moment they were written to it to the first byte of its answer,
	// over the completions whose caller reported both (stage.Ticket.Sent
	// and Answered; the proxy does): the rest is the proxy's own time
	// and the network's, in which a request holds its slot but no
	// backend worker. 0 when unknown. Measured with Parallel.
	BackendShare float64

	// QueueWaitMean and QueueWaitMin are the mean and minimum time, in
	// seconds, that the requests admitted in the interval waited for
	// their slot (0 for a request that found a free slot); NaN when none
	// was admitted. QueueWaitMin > 0 means the queue never emptied: a
	// standing queue (CoDel's signal).
	QueueWaitMean, QueueWaitMin float64
	// Expired is the number of requests that left the wait queue because
	// their deadline passed or because their predicted wait exceeded the
	// allowed one (they are also counted in Rejected).
	Expired float64
}

// Throughput returns Completed per second over Elapsed, or 0 when Elapsed
// is not positive.
func (m Measurements) Throughput() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return m.Completed / m.Elapsed.Seconds()
}

// Goodput returns successful completions (Completed − Failed) per second
// over Elapsed, or 0 when Elapsed is not positive. A NaN or negative
// Failed counts as 0.
func (m Measurements) Goodput() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	ok := m.Completed
	if m.Failed > 0 {
		ok -= m.Failed
	}
	return ok / m.Elapsed.Seconds()
}

// Kind says what a decision's setting means and in which unit it is
// expressed.
type Kind uint8

const (
	// KindNone: no admission control; the gate admits every request.
	KindNone Kind = iota
	// KindRate: a token rate in admissions per second for a token bucket.
	KindRate
	// KindDropProbability: the probability in [0, 1] that a request is
	// dropped on arrival.
	KindDropProbability
	// KindConcurrency: the maximum number of requests in flight.
	KindConcurrency
	// KindQuality: a service quality level in [q_min, 1] handed to the
	// backend (SEDA service degradation).
	KindQuality
)

// String returns the snake_case name of the kind, as used in metrics and
// JSON.
func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindRate:
		return "rate"
	case KindDropProbability:
		return "drop_probability"
	case KindConcurrency:
		return "concurrency"
	case KindQuality:
		return "quality"
	}
	return "unknown"
}

// MarshalText returns the kind's name (String), so that JSON and YAML
// carry "rate" or "concurrency" rather than a number.
func (k Kind) MarshalText() ([]byte, error) {
	if k > KindQuality {
		return nil, fmt.Errorf("sluice: unknown kind %d", uint8(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText sets k from its name (String); an unknown name is an
// error.
func (k *Kind) UnmarshalText(b []byte) error {
	for c := KindNone; c <= KindQuality; c++ {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("sluice: unknown kind %q (want none, rate, drop_probability, concurrency or quality)", b)
}

// Unit returns the unit of a setting of this kind.
func (k Kind) Unit() string {
	switch k {
	case KindRate:
		return "req/s"
	case KindDropProbability:
		return "probability"
	case KindConcurrency:
		return "requests"
	case KindQuality:
		return "level"
	}
	return ""
}

// Decision is the outcome of one controller step: the new setting, the old
// one, the inputs it was computed from and a short human-readable reason.
// A runner applies New to its gate; the admin API and the reports show the
// rest.
type Decision struct {
	// At is the time the step ran (the now passed to Update).
	At time.Time
	// Controller is the registry name of the controller ("seda", "kihl", …).
	Controller string
	// Kind says what Old and New mean.
	Kind Kind
	// Class is the class whose measurements triggered the step.
	Class int
	// Old and New are the setting before and after the step, in Kind's
	// unit. Both are always finite.
	Old, New float64
	// ClassRates holds, for multi-class controllers, the new rate of every
	// class in priority order (index 0 is the highest priority); nil for
	// single-class controllers. A step for one class may change the rates
	// of lower classes.
	ClassRates []float64
	// Quality is the service quality level in [q_min, 1] that a degrading
	// stage hands to its backend; 0 when the controller does not degrade.
	Quality float64
	// GateOff is true when admission control is switched off and the gate
	// must admit everything (a degradation controller above its lowest
	// quality, or the none baseline).
	GateOff bool
	// Acted is false when a guard held the setting (not enough samples,
	// unusable input, a hits or queue guard); Reason then says which.
	Acted bool
	// Inputs are the measurements the step saw.
	Inputs Measurements
	// Reason explains the step in one short line, with the numbers used.
	Reason string

	// The fields below steer the wait queue of a KindConcurrency stage;
	// their zero values keep the stage's configured queue.

	// MaxWait, when > 0, is the longest a request arriving from now on may
	// wait for a slot; when < 0, a request that finds no free slot is
	// rejected at once (no queue).
	MaxWait time.Duration
	// Drain, when > 0, is the expected rate at which slots free up, in
	// requests per second: a request whose predicted wait, (waiters ahead
	// of it + 1) / Drain, exceeds the allowed wait is rejected at once
	// instead of waiting to time out.
	Drain float64
	// Fence, when true, makes requests admitted before this decision stop
	// counting as service-time samples: the next measurements describe
	// only requests admitted under the new setting (a probe of the limit,
	// or Envoy's minRTT window).
	Fence bool
	// MaxReject, when > 0, is the largest fraction of a step's arrivals
	// the stage may reject: a request whose rejection would exceed it is
	// admitted past the limit instead (auto's max_reject_fraction).
	MaxReject float64
}

// Controller is one admission-control law. Implementations are
// deterministic state machines: the same sequence of Update calls yields
// the same sequence of decisions. They are not safe for concurrent use; a
// runner serialises calls.
type Controller interface {
	// Update runs one step of the control law at time now with the
	// measurements of the interval that just ended, and returns the new
	// setting. The returned setting is always finite and within the
	// controller's configured bounds.
	Update(now time.Time, m Measurements) Decision
	// Current returns the setting in force: the last decision, or the
	// initial setting before the first Update.
	Current() Decision
	// Period returns the control period h: the interval at which a runner
	// calls Update (for SEDA, the timeout after which it runs even without
	// nreq completions).
	Period() time.Duration
}

// SampleTriggered is implemented by controllers that also run after a
// number of completions, not only on their period (SEDA's nreq). A runner
// calls Update as soon as TriggerSamples completions have been recorded
// since the previous Update, or Period has elapsed, whichever comes first.
// A value ≤ 0 means the controller runs on its period only. A runner reads
// it again after every Update, so a controller may change it from one step
// to the next (Envoy's minRTT window waits for request_count samples).
type SampleTriggered interface {
	TriggerSamples() int
}

// Stepper is a control loop's step, apart from its loop: the measurements
// of the interval that just ended, the controller's Update and its
// decisions put into force, at a now passed in. A stage with its
// controller (stage.Stage) and the connection policer with its own
// (policer.Policer) are Steppers; one runner drives either, live on the
// wall clock (stage.Runner) and in virtual time on the simulator's clock
// (the lab's sim.Runner, which runs stage.Runner's step).
type Stepper interface {
	// Step runs the control steps due at now, puts their decisions into
	// force and returns them (none when nothing was due).
	Step(now time.Time) []Decision
	// Poll returns how often a runner calls Step: the control period, or
	// less for a loop that also steps on samples (SEDA's nreq).
	Poll() time.Duration
}
