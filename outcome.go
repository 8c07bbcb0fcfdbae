// SPDX-License-Identifier: Apache-2.0

package sluice

// Outcome is how an admitted request, or an attempt of a call, ended as
// its caller judges it: the one finishing vocabulary of the middleware
// (Admission.Done), the stage API (package stage: Ticket.Done and the
// done function of Stage.Admit) and the client side (package client:
// Result.Outcome). The zero value is Success.
type Outcome uint8

const (
	// Success: the service did its work (an HTTP status below 500, a
	// gRPC status that is the caller's own error, or none). The request
	// is a response-time sample.
	Success Outcome = iota
	// Failure: the service did not do its work: an error status (5xx),
	// a transport failure, a timeout, a panic, a client that went away
	// while it waited for the answer. It counts in Measurements.Failed.
	Failure
	// Ignore: the request says nothing about the service, neither a
	// sample nor a failure (a request its caller cancelled for reasons
	// of its own, a request refused by a rule outside admission
	// control). It is counted as completed, with no response time. On
	// the client side it is an attempt whose caller gave up: the
	// destination did not refuse it, and the call stops.
	Ignore
)

// OutcomeOf returns Success when ok, Failure otherwise.
func OutcomeOf(ok bool) Outcome {
	if ok {
		return Success
	}
	return Failure
}

// String returns the outcome's name: "success", "failure" or "ignore".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignore:
		return "ignore"
	}
	return "unknown"
}
