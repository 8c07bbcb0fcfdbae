// SPDX-License-Identifier: Apache-2.0

// Package breakwater is Breakwater (Cho et al., "Overload Control for
// µs-scale RPCs with Breakwater", OSDI 2020) as a lab peer: a server
// issues credits from its queueing delay, clients send only with a
// credit, and an AQM drops what arrives when the delay is far above
// target. Written from the paper, the authors' C implementation
// (shenango/caladan, breakwater/src/bw_server.c, bw_client.c,
// bw_config.h) and the public Go port (pennsail/breakwater-grpc); read,
// not copied. docs/algorithms.md has the equations beside the other
// peers'.
package breakwater

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/lab/peers"
)

// Metadata keys: what a client sends with every call, and what the
// server piggybacks on every reply (admitted or dropped).
const (
	// KeyClient is the client's id (the C code's session, the port's
	// "id").
	KeyClient = "bw-client"
	// KeyDemand is how many calls were still queued at the client when
	// this one was sent (the port's "demand").
	KeyDemand = "bw-demand"
	// KeyCredits is the client's window: how many calls it may have
	// outstanding (the C code's win, the port's "credits").
	KeyCredits = "bw-credits"
)

// Config configures a Breakwater server and its clients. Start from
// DefaultConfig; durations are written like "5ms".
type Config struct {
	// RTT is how often the server updates its credit pool and a client
	// looks at its queue (default 5ms, the Go port's RTT_MICROSECOND;
	// the C code's 10 µs is its testbed's network round trip).
	RTT time.Duration `yaml:"rtt"`
	// TargetDelay is the queueing delay d_t above which the pool shrinks
	// (default 80µs, bw_config.h's SBW_MIN_DELAY_US for 10 µs RPCs; the
	// paper scales it with the service time, so tune it).
	TargetDelay time.Duration `yaml:"target_delay"`
	// DropDelay is the AQM threshold: a call that arrives while the
	// queueing delay is at least this is dropped (default 160µs,
	// 2·target_delay as in the paper).
	DropDelay time.Duration `yaml:"drop_delay"`
	// AI is α, the additive increase per client (default 0.001,
	// SBW_AI): C_total += max(⌊α·clients⌋, 1).
	AI float64 `yaml:"ai"`
	// MD is β, the multiplicative decrease (default 0.02, SBW_MD):
	// C_total ← C_total·max(1 − β·(d − d_t)/d_t, 0.5).
	MD float64 `yaml:"md"`
	// Cores is the server's parallelism: the floor of C_total, and with
	// at most this many clients each keeps the overcommitment (the C
	// code's runtime_max_cores; default 1; set it to the service's
	// worker count).
	Cores int `yaml:"cores"`
	// InitialCredits is C_total at start (default 1: the C code starts
	// at the core count, the port at 1000).
	InitialCredits int `yaml:"initial_credits"`
	// MaxWindow caps a client's window below it (default 64,
	// SRPC_MAX_WINDOW: a window is at most 63) and C_total at
	// clients·max_window.
	MaxWindow int `yaml:"max_window"`
	// ClientTTL: a client that sent nothing for this long is forgotten
	// and its credits return to the pool (default 10s; the C code drops
	// a session when its connection closes).
	ClientTTL time.Duration `yaml:"client_ttl"`
	// ClientDelay is the longest a call waits in its client's queue for
	// a credit before it is dropped there (default 100µs,
	// CRPC_MAX_CLIENT_DELAY_US of bw_client.c; the port's
	// ClientExpiration is 1 ms).
	ClientDelay time.Duration `yaml:"client_delay"`
	// QueueLimit is how many calls wait at a client at most (default 16,
	// CRPC_QLEN).
	QueueLimit int `yaml:"queue_limit"`
}

// DefaultConfig returns the paper's parameters: RTT 5ms, TargetDelay
// 80µs, DropDelay 160µs, AI 0.001, MD 0.02, Cores 1, InitialCredits 1,
// MaxWindow 64, ClientTTL 10s, ClientDelay 100µs, QueueLimit 16.
func DefaultConfig() Config {
	return Config{RTT: 5 * time.Millisecond, TargetDelay: 80 * time.Microsecond, DropDelay: 160 * time.Microsecond,
		AI: 0.001, MD: 0.02, Cores: 1, InitialCredits: 1, MaxWindow: 64, ClientTTL: 10 * time.Second,
		ClientDelay: 100 * time.Microsecond, QueueLimit: 16}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.RTT <= 0:
		return fielderr.Invalid("rtt", c.RTT, "a duration > 0 such as 5ms")
	case c.TargetDelay <= 0:
		return fielderr.Invalid("target_delay", c.TargetDelay, "a duration > 0 such as 80us")
	case c.DropDelay < c.TargetDelay:
		return fielderr.Invalid("drop_delay", c.DropDelay, fmt.Sprintf("a duration ≥ target_delay (%s)", c.TargetDelay))
	case !(c.AI > 0) || c.AI > 1e6:
		return fielderr.Invalid("ai", c.AI, "a number > 0")
	case !(c.MD > 0) || c.MD > 1e6:
		return fielderr.Invalid("md", c.MD, "a number > 0")
	case c.Cores < 1:
		return fielderr.Invalid("cores", c.Cores, "an integer ≥ 1")
	case c.MaxWindow < 2:
		return fielderr.Invalid("max_window", c.MaxWindow, "an integer ≥ 2")
	case c.InitialCredits < 1:
		return fielderr.Invalid("initial_credits", c.InitialCredits, "an integer ≥ 1")
	case c.ClientTTL <= 0:
		return fielderr.Invalid("client_ttl", c.ClientTTL, "a duration > 0 such as 10s")
	case c.ClientDelay <= 0:
		return fielderr.Invalid("client_delay", c.ClientDelay, "a duration > 0 such as 100us")
	case c.QueueLimit < 1:
		return fielderr.Invalid("queue_limit", c.QueueLimit, "an integer ≥ 1")
	}
	return nil
}

// Server is Breakwater's server side. Every RTT (Update) it reads the
// queueing delay d (Signal.Delay: the largest of the period) and moves
// its credit pool C_total:
//
//	d ≥ d_t:  C_total ← ⌊C_total · max(1 − β·(d − d_t)/d_t, 0.5)⌋
//	d < d_t:  C_total ← C_total + max(⌊α·clients⌋, 1)
//	C_total within [cores, clients·max_window]
//
// A call arriving while d ≥ drop_delay is dropped (the AQM), with the
// client's window in the refusal. Every reply (bw_server.c's
// srpc_update_window) recomputes the window w of the call's client from
// its pending calls p (admitted, not yet answered), its demand q (calls
// queued at it) and the pool's state:
//
//	open = C_total − C_issued,  oc = max(⌊open / clients⌋, 1)     (overcommitment)
//	C_issued < C_total:  w ← min(p + q + oc, w + open)              (demand speculation)
//	C_issued > C_total:  w ← w − 1
//	clients ≤ cores:     w ← max(w, oc)
//	w fell to 0 (not on a drop): w ← oc
//	w ← min(max(w, p), max_window − 1, p + q + oc)
//
// and C_issued, the sum of the windows, follows. A call's arrival with a
// smaller demand shrinks the window to p + q at once.
//
// Departures from the C implementation:
//   - The AQM compares the delay measured at the last update (every
//     RTT), as the Go port does, not the queue's age at each arrival.
//   - Unary gRPC has no server push, so the C code's WINUPDATE to a
//     drained session (window 0) cannot be sent: a client always keeps
//     one credit when nothing of its is outstanding (the Go port keeps a
//     floor of 1 for the same reason), which stands in for it.
//   - Sessions end when a client has been idle for client_ttl (there
//     is no connection to close), returning its credits.
//
// Port bugs fixed (pennsail/breakwater-grpc): settings are this value's,
// not package globals; every reply carries credits, refusals included
// (the port's client restores credits only on success, so a burst of
// failures locks it out); clients are counted once and forgotten.
type Server struct {
	cfg     Config
	total   int // C_total
	issued  int // C_issued
	delay   time.Duration
	clients map[string]*session
}

type session struct {
	win, pending, demand int
	last                 time.Time
}

var _ peers.Server = (*Server)(nil)

// NewServer returns a server for a validated copy of cfg.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, total: max(cfg.InitialCredits, cfg.Cores), clients: make(map[string]*session)}, nil
}

// Period returns the RTT.
func (s *Server) Period() time.Duration { return s.cfg.RTT }

// Credits returns C_total and C_issued.
func (s *Server) Credits() (total, issued int) { return s.total, s.issued }

// Window returns client id's window (0 if unknown).
func (s *Server) Window(id string) int {
	if ss := s.clients[id]; ss != nil {
		return ss.win
	}
	return 0
}

// Admit registers the call's client and demand, and drops the call if
// the last measured delay is at least drop_delay.
func (s *Server) Admit(now time.Time, c *peers.Call) peers.Admission {
	id := c.Meta[KeyClient]
	ss := s.clients[id]
	if ss == nil {
		ss = &session{}
		s.clients[id] = ss
	}
	ss.last = now
	if q, ok := peers.MetaInt(c.Meta, KeyDemand); ok && q >= 0 {
		ss.demand = int(q)
	}
	ss.pending++
	if lim := ss.pending + ss.demand; ss.win > lim {
		s.issued -= ss.win - lim
		ss.win = lim
	}
	if s.delay >= s.cfg.DropDelay {
		ss.pending--
		s.window(ss, true)
		return peers.Admission{Reply: s.reply(ss),
			Reason: fmt.Sprintf("AQM: queueing delay %s ≥ drop_delay %s", s.delay, s.cfg.DropDelay)}
	}
	return peers.Admission{Admit: true, Reason: "admitted"}
}

// Done answers an admitted call with its client's new window.
func (s *Server) Done(now time.Time, c *peers.Call, _ peers.Outcome) peers.Metadata {
	ss := s.clients[c.Meta[KeyClient]]
	if ss == nil {
		return peers.Metadata{KeyCredits: "1"}
	}
	ss.last = now
	ss.pending = max(ss.pending-1, 0)
	s.window(ss, false)
	return s.reply(ss)
}

func (s *Server) reply(ss *session) peers.Metadata {
	return peers.Metadata{KeyCredits: fmt.Sprint(ss.win)}
}

// window is srpc_update_window.
func (s *Server) window(ss *session, dropped bool) {
	n := max(len(s.clients), 1)
	open := s.total - s.issued
	oc := max(open/n, 1)
	old := ss.win
	w := ss.win
	switch {
	case s.issued < s.total:
		w = min(ss.pending+ss.demand+oc, w+open)
	case s.issued > s.total:
		w--
	}
	if n <= s.cfg.Cores {
		w = max(w, oc)
	}
	if old > 0 && w <= 0 && !dropped {
		w = oc
	}
	w = max(w, ss.pending)
	w = min(w, s.cfg.MaxWindow-1, ss.pending+ss.demand+oc)
	w = max(w, 0)
	ss.win = w
	s.issued += w - old
}

// Update moves C_total on the period's delay (Signal.Delay) and forgets
// idle clients.
func (s *Server) Update(now time.Time, sig peers.Signal) {
	for id, ss := range s.clients {
		if ss.pending == 0 && now.Sub(ss.last) >= s.cfg.ClientTTL {
			s.issued -= ss.win
			delete(s.clients, id)
		}
	}
	d, t := sig.Delay, s.cfg.TargetDelay
	s.delay = d
	n := len(s.clients)
	if d >= t {
		f := max(1-s.cfg.MD*float64(d-t)/float64(t), 0.5)
		s.total = int(float64(s.total) * f)
	} else {
		s.total += max(int(float64(n)*s.cfg.AI), 1)
	}
	s.total = min(max(s.total, s.cfg.Cores), max(n, 1)*s.cfg.MaxWindow)
}

// Client is Breakwater's client side (bw_client.c): a call goes while
// fewer than the window's calls are outstanding (at least one, see
// Server), else it waits in a FIFO queue of queue_limit calls (a call
// that finds it full is refused), and a call that waited client_delay is
// dropped there; every call carries the client's id and its demand (the
// calls still queued), every reply's window replaces the client's, and
// every end of a call, whatever its outcome, frees its credit. A waiting
// call whose context ends leaves the queue (the port's waits ignore the
// context).
//
// Departure: the C client drops its oldest call when the queue is full;
// here the newcomer is refused (Send cannot release another call).
type Client struct {
	cfg   Config
	id    string
	avail int // the window from the last reply
	used  int // calls outstanding
	queue []waiter
}

type waiter struct {
	c  *peers.Call
	at time.Time
}

var _ peers.Client = (*Client)(nil)

// NewClient returns a client with id (unique among a server's clients).
func NewClient(cfg Config, id string) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, id: id, avail: 1}, nil
}

// Period returns the RTT.
func (c *Client) Period() time.Duration { return c.cfg.RTT }

// Window returns the window from the last reply and the calls
// outstanding.
func (c *Client) Window() (avail, used int) { return c.avail, c.used }

// Queued returns how many calls wait.
func (c *Client) Queued() int { return len(c.queue) }

func (c *Client) window() int { return max(c.avail, 1) }

func (c *Client) send(demand int) peers.Decision {
	c.used++
	return peers.Decision{Verdict: peers.Send, Reason: fmt.Sprintf("credit %d of %d", c.used, c.window()),
		Meta: peers.Metadata{KeyClient: c.id, KeyDemand: fmt.Sprint(demand)}}
}

// Send sends the call if a credit is free and nobody waits, else queues
// it (or refuses it if the queue is full).
func (c *Client) Send(now time.Time, call *peers.Call) peers.Decision {
	if len(c.queue) == 0 && c.used < c.window() {
		return c.send(0)
	}
	if len(c.queue) >= c.cfg.QueueLimit {
		return peers.Decision{Verdict: peers.Deny, Reason: fmt.Sprintf("client queue full (%d)", c.cfg.QueueLimit)}
	}
	c.queue = append(c.queue, waiter{c: call, at: now})
	return peers.Decision{Verdict: peers.Wait, Reason: fmt.Sprintf("no credit (%d of %d outstanding)", c.used, c.window())}
}

// Received frees the call's credit, takes the reply's window and drains
// the queue.
func (c *Client) Received(now time.Time, _ *peers.Call, reply peers.Metadata, _ peers.Outcome) []peers.Release {
	c.used = max(c.used-1, 0)
	if w, ok := peers.MetaInt(reply, KeyCredits); ok && w >= 0 {
		c.avail = int(w)
	}
	return c.drain(now)
}

// Cancel takes a waiting call out of the queue.
func (c *Client) Cancel(_ time.Time, call *peers.Call) []peers.Release {
	for i, w := range c.queue {
		if w.c == call {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			break
		}
	}
	return nil
}

// Update drops the calls that waited too long and sends what the window
// allows.
func (c *Client) Update(now time.Time) []peers.Release { return c.drain(now) }

func (c *Client) drain(now time.Time) []peers.Release {
	var out []peers.Release
	for len(c.queue) > 0 && now.Sub(c.queue[0].at) > c.cfg.ClientDelay {
		out = append(out, peers.Release{Call: c.queue[0].c, Decision: peers.Decision{Verdict: peers.Deny,
			Reason: fmt.Sprintf("waited %s > client_delay %s", now.Sub(c.queue[0].at), c.cfg.ClientDelay)}})
		c.queue = c.queue[1:]
	}
	for len(c.queue) > 0 && c.used < c.window() {
		w := c.queue[0]
		c.queue = c.queue[1:]
		out = append(out, peers.Release{Call: w.c, Decision: c.send(len(c.queue))})
	}
	return out
}

// Peer builds Breakwater for a graph: a server at every service and a
// client at every caller, all with cfg; ids number the clients.
type Peer struct {
	Config Config
	n      int
}

var _ peers.Peer = (*Peer)(nil)

// Name returns "breakwater".
func (p *Peer) Name() string { return "breakwater" }

// Server returns a server.
func (p *Peer) Server(string, bool) (peers.Server, error) { return NewServer(p.Config) }

// Client returns a client with a fresh id.
func (p *Peer) Client(from, to string) (peers.Client, error) {
	p.n++
	return NewClient(p.Config, fmt.Sprintf("%s->%s#%d", from, to, p.n))
}
