// SPDX-License-Identifier: Apache-2.0

// Package peers holds what the lab's peers for service graphs share: the
// research's overload controllers (Breakwater, DAGOR, Rajomon, TopFull;
// sub-packages), written here from their papers and their public code, so
// that sluice can be compared with each of them in the same graph.
//
// Every peer is a deterministic state machine, as sluice's controllers
// are: each method takes the time now, nothing reads a clock, sleeps or
// starts a goroutine, and randomness comes from an injected source. Two
// drivers run the same objects: the simulator (package
// lab/figure/simulated) in virtual time, and the gRPC interceptors of
// this package (LiveServer, LiveClient) on real calls.
//
// A peer has up to two sides, both behind small interfaces:
//
//   - Server, at every service that admits calls: Admit decides on a call
//     as it arrives (and what is piggybacked back if it is refused), Done
//     sees it end (and returns what is piggybacked on its reply), Update
//     runs the periodic control law on the period's Signal.
//   - Client, at every caller: Send decides whether a call goes now, is
//     refused locally, or waits (in the peer's own queue); Received takes
//     the reply's metadata; Cancel lets a waiting call go when its
//     context ends; Update runs the caller's periodic law. Calls a client
//     lets go later come back as Releases.
//
// What a peer piggybacks travels as Metadata (gRPC metadata, one value a
// key). What a service passes on to the calls it makes while serving a
// request (DAGOR's priorities, Rajomon's tokens) is Admission.Forward,
// which the client side of the same service reads as Call.Meta.
//
// Nothing in this package's state machines is safe for concurrent use;
// the live drivers hold a lock around every call into them.
package peers

import (
	"fmt"
	"strconv"
	"time"
)

// Metadata is what a peer piggybacks on a call or on its reply: gRPC
// metadata with one value a key, keys in lower case.
type Metadata map[string]string

// Call is one call as a peer sees it, on either side.
type Call struct {
	// ID identifies the call within one driver: the live interceptors
	// number their calls, the simulator uses its request ids.
	ID uint64
	// Method is the API the call invokes: a gRPC full method
	// ("/pkg.Service/Method") or a lab name. Peers that need one (DAGOR's
	// business priority, TopFull's per-API rate) never fail without it:
	// a missing method is "".
	Method string
	// User is the end user on whose behalf the call runs ("": unknown).
	User string
	// Deadline is the call's deadline; the zero time means none.
	Deadline time.Time
	// Meta is, on the server side, the peer's metadata the call arrived
	// with; on the client side, what the server side of the same service
	// forwarded from the request being served (Admission.Forward), empty
	// at an end user.
	Meta Metadata
	// Sent is when the client side let the call go (set by the client's
	// driver before Received; zero before).
	Sent time.Time
}

// Outcome is how a call ended.
type Outcome uint8

const (
	// OK: the call was served.
	OK Outcome = iota
	// Rejected: a peer refused it, at this hop or further down (gRPC
	// RESOURCE_EXHAUSTED, as every port answers a refusal).
	Rejected
	// Failed: another error.
	Failed
	// Canceled: the caller left or the deadline passed first.
	Canceled
)

// String returns "ok", "rejected", "failed" or "canceled".
func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Rejected:
		return "rejected"
	case Failed:
		return "failed"
	case Canceled:
		return "canceled"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Admission is a server side's decision on an arriving call.
type Admission struct {
	// Admit says the call may be served.
	Admit bool
	// Reply is piggybacked on the refusal (a refused call's only reply).
	Reply Metadata
	// Forward travels on with the calls the service makes while serving
	// an admitted call (the client side reads it as Call.Meta).
	Forward Metadata
	// Reason says why, in a few words, for logs and tests.
	Reason string
}

// Signal is a server's load over one period: the queueing delay the
// peers read. Which source fills it is the driver's choice (a QueueMeter
// over the service's own queue, or the Go scheduler's latency,
// SchedLatency); each peer's doc comment says which field it reads.
type Signal struct {
	// Delay is the largest queueing delay of the period: the longest
	// wait of a request that began service in it, or the age of the
	// oldest request still waiting at its end, whichever is larger.
	Delay time.Duration
	// Mean is the mean wait of the requests that began service in the
	// period (0 if none did).
	Mean time.Duration
	// Began is how many requests began service in the period.
	Began int
}

// Server is a peer's side at a service that admits calls.
type Server interface {
	// Admit decides on a call as it arrives.
	Admit(now time.Time, c *Call) Admission
	// Done is called exactly once for every admitted call, when it ends,
	// and returns what is piggybacked on its reply.
	Done(now time.Time, c *Call, o Outcome) Metadata
	// Update runs the periodic law on the period's signal.
	Update(now time.Time, s Signal)
	// Period is how often Update should run.
	Period() time.Duration
}

// Verdict is a client side's decision on a call.
type Verdict uint8

const (
	// Send: the call goes now.
	Send Verdict = iota
	// Deny: the call is refused locally (gRPC RESOURCE_EXHAUSTED).
	Deny
	// Wait: the call waits in the client side's queue; a later Release
	// lets it go or refuses it.
	Wait
)

// String returns "send", "deny" or "wait".
func (v Verdict) String() string {
	switch v {
	case Send:
		return "send"
	case Deny:
		return "deny"
	case Wait:
		return "wait"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Decision is a client side's decision on a call.
type Decision struct {
	Verdict Verdict
	// Meta is attached to the call when it is sent.
	Meta Metadata
	// Reason says why, in a few words.
	Reason string
}

// Release is the fate of a call that waited: Decision.Verdict is Send or
// Deny.
type Release struct {
	Call     *Call
	Decision Decision
}

// Client is a peer's side at a caller.
type Client interface {
	// Send decides on a call about to be made.
	Send(now time.Time, c *Call) Decision
	// Received takes the end of a sent call: its reply's metadata (nil
	// if none came) and its outcome. It is called exactly once for every
	// sent call, also when the caller left (Canceled).
	Received(now time.Time, c *Call, reply Metadata, o Outcome) []Release
	// Cancel takes a waiting call out of the queue: its context ended.
	// It is a no-op for a call that does not wait.
	Cancel(now time.Time, c *Call) []Release
	// Update runs the periodic law.
	Update(now time.Time) []Release
	// Period is how often Update should run.
	Period() time.Duration
}

// Peer builds a peer's objects for the services of one graph. Services
// are named by the driver; a graph's entry service is the one the end
// users call. A nil Server or Client means the peer has no such side
// there (TopFull has no server side; Breakwater's end users and tiers
// have the same client).
type Peer interface {
	// Name is the peer's name (breakwater, dagor, rajomon, topfull).
	Name() string
	// Server returns the server side of the named service.
	Server(service string, entry bool) (Server, error)
	// Client returns the client side of a caller (an end-user population
	// "" or a service) toward a service.
	Client(from, to string) (Client, error)
}

// MetaInt reads an integer from m (ok false if absent or malformed).
func MetaInt(m Metadata, key string) (int64, bool) {
	v, err := strconv.ParseInt(m[key], 10, 64)
	return v, err == nil
}

// LoadObserver is implemented by a peer side that reads the services'
// utilization (TopFull's entry): the driver reports each service's CPU
// utilization of its quota, in [0, 1], before each Update.
type LoadObserver interface {
	ObserveLoad(now time.Time, service string, utilization float64)
}
