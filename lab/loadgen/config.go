// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/lab/dist"
)

// Mode is the loop mode of a run.
type Mode string

const (
	// ModeOpen sends requests at arrival times from a pacer, whether or
	// not earlier requests have finished (sclient, httperf).
	ModeOpen Mode = "open"
	// ModeClosed runs users that each send a request, wait for the
	// response, think, and send the next (TPC-W emulated browsers, SEDA's
	// e-mail users).
	ModeClosed Mode = "closed"
)

// Defaults for optional Config fields left at their zero value.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxInflight  = 10000
	DefaultMaxConns     = 256
	DefaultClassHeader  = "X-Sluice-Class"
	DefaultClientHeader = "X-Client-Id"
)

// Limits on Config values.
const (
	maxInflightLimit = 100000
	maxUsersLimit    = 100000
)

// Config describes one load run. Fill it, call SetDefaults for the optional
// fields, then Validate (Run does both on a copy).
type Config struct {
	// Target is the base URL: http or https, host in 127.0.0.0/8, ::1 or
	// "localhost". Workload paths are sent to its scheme and host; its own
	// path is ignored (the default CLI workload requests it).
	Target string
	// Mode selects open or closed loop.
	Mode Mode
	// Duration is how long requests are issued; > 0. In-flight requests
	// are then allowed to finish (at most Timeout).
	Duration time.Duration
	// Seed seeds every random choice of the run (arrival times, workload
	// choices, classes, think times).
	Seed uint64
	// Timeout aborts a request that has not completed (body included)
	// Timeout after its intended send time and counts a timeout.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// ConnectTimeout, when > 0, aborts a request whose TCP connection is
	// not established within ConnectTimeout of the start of its dial and
	// counts it as a transport error, as the Voigt & Gunningberg paper's
	// load generator (sclient) aborts "requests that do not establish a
	// connection to the server in a specified amount of time": a SYN the
	// server dropped (kernel early discard) is then a refused request, not
	// one delayed by TCP's 1 s SYN retransmission. Zero (the default): the
	// dial may take until the request's deadline.
	ConnectTimeout time.Duration
	// Workload chooses the requests; required.
	Workload Workload

	// Arrivals paces open-loop requests (dist.Poisson or dist.Constant over
	// a rate schedule); required in open loop, must be nil in closed loop.
	Arrivals dist.Arrivals
	// MaxInflight bounds concurrent open-loop requests (= worker
	// goroutines); an arrival finding MaxInflight requests in flight is
	// not sent and counts as Dropped (an error). Zero means
	// DefaultMaxInflight. Open loop only.
	MaxInflight int
	// MaxConns bounds the open loop's connections per source address; a
	// request finding all of them busy waits for one (the wait counts in
	// its latency and against its deadline). Zero means
	// min(DefaultMaxConns, MaxInflight). Set it to MaxInflight to give
	// every request in flight its own connection (sclient-like; on this
	// two-core machine thousands of connections cost the target more CPU
	// than the requests themselves). Open loop only (closed-loop users keep
	// one connection each).
	MaxConns int

	// Users is the number of active closed-loop users over time (rounded
	// to the nearest integer); required in closed loop, zero in open loop.
	Users dist.Schedule
	// Think is the think-time distribution in seconds between a response
	// and the user's next request; required in closed loop (use det:0 for
	// none).
	Think dist.Dist
	// RetryWait, when positive, makes a closed-loop user whose request was
	// rejected (503/429) wait RetryWait and send the same request again,
	// instead of thinking and moving on. SEDA's users wait 5 s.
	RetryWait time.Duration

	// Classes, when set, assigns a class to each user (closed loop, in
	// proportion to the weights) or request (open loop, drawn at random),
	// sent in the ClassHeader header.
	Classes []Weighted
	// ClassHeader is the header carrying the class; "" means
	// DefaultClassHeader.
	ClassHeader string
	// Clients, when set, assigns a client identity like Classes, sent in
	// the ClientHeader header. With SourceAddrs too, client i also uses
	// source address i (the lists must have the same length).
	Clients []Weighted
	// ClientHeader is the header carrying the client identity; ""
	// means DefaultClientHeader.
	ClientHeader string
	// SourceAddrs, when set, gives each client identity its own source
	// address in 127.0.0.0/8 (and its own http.Transport). Without
	// Clients, the addresses themselves are the identities, equally
	// weighted, and no client header is sent.
	SourceAddrs []netip.Addr

	// DisableKeepAlives opens a new connection per request (like sclient's
	// HTTP/1.0) instead of reusing idle connections.
	DisableKeepAlives bool

	// Transport, when non-nil, sends every request instead of the tuned
	// transports Run builds (in-process experiments and tests). It cannot
	// be combined with SourceAddrs.
	Transport http.RoundTripper
	// GRPC, when non-nil, makes every request a gRPC call to grpc-go's
	// interop test service (see GRPCConfig); workload paths name the
	// methods. It cannot be combined with Transport.
	GRPC *GRPCConfig
	// Progress, when non-nil, is called about once per second from Run's
	// goroutine with a snapshot of the run.
	Progress func(Progress)
	// OnRequest, when non-nil, is called once per finished request
	// (including drops) from the goroutine that ran it; it must be safe for
	// concurrent use and fast.
	OnRequest func(RequestRecord)
}

// Progress is a snapshot of a running load.
type Progress struct {
	// Elapsed is the time since the start; Duration the configured length.
	Elapsed, Duration time.Duration
	// Counts are the totals of the requests finished so far.
	Counts
	// InFlight is the number of requests in flight now.
	InFlight int64
	// Users is the number of active closed-loop users now.
	Users int
	// Last is the most recent finalised second (valid when HaveLast).
	Last     Second
	HaveLast bool
}

// RequestRecord describes one finished request, for Config.OnRequest.
type RequestRecord struct {
	// Type, Class and Client label the request ("" when not configured).
	Type, Class, Client string
	// URL is the request URL ("" for drops).
	URL string
	// Intended, Sent and Done are offsets from the start of the run: the
	// intended send time, the actual send time and the end of the response.
	// Sent and Done equal Intended for drops.
	Intended, Sent, Done time.Duration
	// Latency is Done − Intended.
	Latency time.Duration
	// Status is the HTTP status, or 0 when no response was read.
	Status int
	// Outcome is "ok", "rejected", "http_error", "transport_error",
	// "timeout", "dropped" or "aborted".
	Outcome string
	// Bytes is the number of response body bytes read.
	Bytes int64
	// Err is the transport error, if any.
	Err error
	// GRPCCode is the call's gRPC status code ("OK", "RESOURCE_EXHAUSTED",
	// …) in gRPC mode, "" otherwise; Status is then 200 for OK, 429 for
	// RESOURCE_EXHAUSTED, 503 for UNAVAILABLE, 500 for other codes, 0 for
	// timeouts and transport failures.
	GRPCCode string
}

var outcomeNames = [...]string{
	outOK: "ok", outRejected: "rejected", outHTTPError: "http_error",
	outTransportError: "transport_error", outTimeout: "timeout",
	outDropped: "dropped", outAborted: "aborted",
}

// SetDefaults fills the optional fields left at their zero value: Timeout,
// MaxInflight and MaxConns (open loop), ClassHeader and ClientHeader.
func (c *Config) SetDefaults() {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	if c.MaxInflight == 0 && c.Mode == ModeOpen {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.MaxConns == 0 && c.Mode == ModeOpen {
		c.MaxConns = min(DefaultMaxConns, c.MaxInflight)
	}
	c.ClassHeader = cmp.Or(c.ClassHeader, DefaultClassHeader)
	c.ClientHeader = cmp.Or(c.ClientHeader, DefaultClientHeader)
}

// fieldErr returns a *sluice.FieldError naming a Config field.
func fieldErr(field, format string, args ...any) error {
	return &sluice.FieldError{Path: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports the first invalid field, naming it and its value.
func (c Config) Validate() error {
	if _, err := CheckLoopbackURL("Target", c.Target); err != nil {
		return err
	}
	if c.Duration <= 0 {
		return fieldErr("Duration", "%v must be positive", c.Duration)
	}
	if c.Timeout <= 0 {
		return fieldErr("Timeout", "%v must be positive", c.Timeout)
	}
	if c.ConnectTimeout < 0 {
		return fieldErr("ConnectTimeout", "%v must be ≥ 0", c.ConnectTimeout)
	}
	if c.Workload == nil {
		return fieldErr("Workload", "required")
	}
	switch c.Mode {
	case ModeOpen:
		if c.Arrivals == nil {
			return fieldErr("Arrivals", "required in open loop")
		}
		if c.MaxInflight < 1 || c.MaxInflight > maxInflightLimit {
			return fieldErr("MaxInflight", "%d must be in [1, %d]", c.MaxInflight, maxInflightLimit)
		}
		if c.MaxConns < 1 || c.MaxConns > c.MaxInflight {
			return fieldErr("MaxConns", "%d must be in [1, MaxInflight=%d]", c.MaxConns, c.MaxInflight)
		}
		if c.Users.Max() != 0 {
			return fieldErr("Users", "%v is a closed-loop setting but Mode is open", c.Users)
		}
		if c.Think != nil {
			return fieldErr("Think", "%v is a closed-loop setting but Mode is open", c.Think)
		}
		if c.RetryWait != 0 {
			return fieldErr("RetryWait", "%v is a closed-loop setting but Mode is open", c.RetryWait)
		}
	case ModeClosed:
		if c.Arrivals != nil {
			return fieldErr("Arrivals", "set but Mode is closed (closed-loop users pace themselves)")
		}
		if c.MaxInflight != 0 {
			return fieldErr("MaxInflight", "%d is an open-loop setting but Mode is closed (the number of users bounds in-flight requests)", c.MaxInflight)
		}
		if c.MaxConns != 0 {
			return fieldErr("MaxConns", "%d is an open-loop setting but Mode is closed (each user keeps one connection)", c.MaxConns)
		}
		if m := c.Users.Max(); m < 0.5 || m > maxUsersLimit {
			return fieldErr("Users", "schedule %v must reach between 1 and %d users", c.Users, maxUsersLimit)
		}
		if c.Think == nil {
			return fieldErr("Think", "required in closed loop (use det:0 for no think time)")
		}
		if m := c.Think.Mean(); math.IsNaN(m) || m < 0 {
			return fieldErr("Think", "%v has an invalid mean %v", c.Think, m)
		}
		if c.RetryWait < 0 {
			return fieldErr("RetryWait", "%v must be >= 0", c.RetryWait)
		}
	default:
		return fieldErr("Mode", "%q must be %q or %q", c.Mode, ModeOpen, ModeClosed)
	}
	if err := checkNames("Classes", c.Classes); err != nil {
		return err
	}
	if err := checkNames("Clients", c.Clients); err != nil {
		return err
	}
	if !httpx.IsToken(c.ClassHeader) {
		return fieldErr("ClassHeader", "%q is not a valid header name", c.ClassHeader)
	}
	if !httpx.IsToken(c.ClientHeader) {
		return fieldErr("ClientHeader", "%q is not a valid header name", c.ClientHeader)
	}
	for i, a := range c.SourceAddrs {
		if !a.Is4() || !a.IsLoopback() {
			return fmt.Errorf("SourceAddrs[%d]: %v is not in 127.0.0.0/8", i, a)
		}
	}
	if len(c.SourceAddrs) > maxSourceAddrs {
		return fieldErr("SourceAddrs", "%d addresses, at most %d", len(c.SourceAddrs), maxSourceAddrs)
	}
	if len(c.SourceAddrs) > 0 && len(c.Clients) > 0 && len(c.SourceAddrs) != len(c.Clients) {
		return fieldErr("SourceAddrs", "%d addresses but %d Clients; client i uses address i, so the counts must match", len(c.SourceAddrs), len(c.Clients))
	}
	if c.GRPC != nil {
		if c.Transport != nil {
			return fieldErr("GRPC", "cannot be used with a custom Transport")
		}
		if err := c.GRPC.validate(); err != nil {
			return err
		}
	}
	if c.Transport != nil && len(c.SourceAddrs) > 0 {
		return fieldErr("SourceAddrs", "cannot be used with a custom Transport")
	}
	return nil
}

func checkNames(field string, ws []Weighted) error {
	seen := map[string]bool{}
	for i, w := range ws {
		if w.Name == "" || !validHeaderValue(w.Name) {
			return fmt.Errorf("%s[%d]: name %q must be non-empty printable ASCII without spaces", field, i, w.Name)
		}
		if !(w.Weight > 0) || math.IsInf(w.Weight, 0) {
			return fmt.Errorf("%s[%d] (%s): weight %v must be positive and finite", field, i, w.Name, w.Weight)
		}
		if seen[w.Name] {
			return fmt.Errorf("%s[%d]: name %q appears twice", field, i, w.Name)
		}
		seen[w.Name] = true
	}
	return nil
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
