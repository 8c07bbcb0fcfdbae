// SPDX-License-Identifier: Apache-2.0

// Package dagor is DAGOR (Zhou et al., "Overload Control for Scaling
// WeChat Microservices", SoCC 2018) as a lab peer: priority-based load
// shedding in a service graph. The entry service gives every request a
// compound priority, its business priority (by API) and its user
// priority (a hash of the user id); every service sheds by an admission
// level it adapts to its own queueing time, and piggybacks that level
// on its replies so that its callers shed locally what it would refuse.
// Written from the paper and the public Go port (Jiali-Xing/dagor-grpc;
// read, not copied); docs/algorithms.md has the equations.
package dagor

import (
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/lab/peers"
)

// Metadata keys.
const (
	// KeyBusiness and KeyUser are a request's business and user
	// priorities (1 is the highest), set by the entry and carried to
	// every sub-request (the port's "b" and "u").
	KeyBusiness = "dagor-b"
	KeyUser     = "dagor-u"
	// KeyLevelB and KeyLevelU are the replying service's admission level
	// (B*, U*), on every reply (the port's "b-star" and "u-star").
	KeyLevelB = "dagor-b-star"
	KeyLevelU = "dagor-u-star"
)

// Config configures DAGOR. Start from DefaultConfig.
type Config struct {
	// Period is how often Update reads the queueing signal (default
	// 10ms); a window ends at the first update after Window or
	// WindowRequests, so it also bounds how late.
	Period time.Duration `yaml:"period"`
	// QueueThreshold: a service is overloaded when its mean queueing
	// time over a window exceeds it (default 20ms, the paper's).
	QueueThreshold time.Duration `yaml:"queue_threshold"`
	// Window and WindowRequests end a monitoring window, whichever comes
	// first (defaults 1s and 2000, the paper's).
	Window         time.Duration `yaml:"window"`
	WindowRequests int           `yaml:"window_requests"`
	// Alpha and Beta are the fractions by which the expected number of
	// admitted requests falls on overload and rises otherwise (defaults
	// 0.05 and 0.01, the paper's).
	Alpha float64 `yaml:"alpha"`
	Beta  float64 `yaml:"beta"`
	// BusinessLevels and UserLevels are the numbers of business and user
	// priorities (defaults 64 and 128; the paper uses 128 user
	// priorities).
	BusinessLevels int `yaml:"business_levels"`
	UserLevels     int `yaml:"user_levels"`
	// Business maps an API (Call.Method) to its business priority in
	// [1, business_levels] at the entry (1 is the highest); an API not
	// listed gets DefaultBusiness.
	Business map[string]int `yaml:"business"`
	// DefaultBusiness is the business priority of an unlisted API
	// (default: business_levels, the lowest; the port draws one at
	// random).
	DefaultBusiness int `yaml:"default_business"`
	// SaltPeriod is how often the user priorities are reshuffled: the
	// hash of a user id takes the time divided by it as salt (default
	// 1h, the paper's hourly change).
	SaltPeriod time.Duration `yaml:"salt_period"`
	// LevelTTL: a caller forgets a service's admission level it has not
	// heard for this long, so a caller whose every call is shed locally
	// tries again (default 1s; 0 never forgets, the paper's and the
	// port's behaviour).
	LevelTTL time.Duration `yaml:"level_ttl"`
}

// DefaultConfig returns the paper's parameters: Period 10ms,
// QueueThreshold 20ms, Window 1s, WindowRequests 2000, Alpha 0.05, Beta
// 0.01, BusinessLevels 64, UserLevels 128, DefaultBusiness 64 (the
// lowest), SaltPeriod 1h, LevelTTL 1s.
func DefaultConfig() Config {
	return Config{Period: 10 * time.Millisecond, QueueThreshold: 20 * time.Millisecond, Window: time.Second,
		WindowRequests: 2000, Alpha: 0.05, Beta: 0.01, BusinessLevels: 64, UserLevels: 128, DefaultBusiness: 64,
		SaltPeriod: time.Hour, LevelTTL: time.Second}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Period <= 0:
		return fielderr.Invalid("period", c.Period, "a duration > 0 such as 10ms")
	case c.QueueThreshold <= 0:
		return fielderr.Invalid("queue_threshold", c.QueueThreshold, "a duration > 0 such as 20ms")
	case c.Window < c.Period:
		return fielderr.Invalid("window", c.Window, fmt.Sprintf("a duration ≥ period (%s)", c.Period))
	case c.WindowRequests < 1:
		return fielderr.Invalid("window_requests", c.WindowRequests, "an integer ≥ 1")
	case !(c.Alpha > 0 && c.Alpha < 1):
		return fielderr.Invalid("alpha", c.Alpha, "a number in (0, 1)")
	case !(c.Beta > 0 && c.Beta < 10):
		return fielderr.Invalid("beta", c.Beta, "a number in (0, 10)")
	case c.BusinessLevels < 1 || c.BusinessLevels > 1<<12:
		return fielderr.Invalid("business_levels", c.BusinessLevels, "an integer in [1, 4096]")
	case c.UserLevels < 1 || c.UserLevels > 1<<12:
		return fielderr.Invalid("user_levels", c.UserLevels, "an integer in [1, 4096]")
	case c.DefaultBusiness < 1 || c.DefaultBusiness > c.BusinessLevels:
		return fielderr.Invalid("default_business", c.DefaultBusiness, fmt.Sprintf("an integer in [1, business_levels = %d]", c.BusinessLevels))
	case c.SaltPeriod <= 0:
		return fielderr.Invalid("salt_period", c.SaltPeriod, "a duration > 0 such as 1h")
	case c.LevelTTL < 0:
		return fielderr.Invalid("level_ttl", c.LevelTTL, "a duration ≥ 0 (0: never forget)")
	}
	for api, b := range c.Business {
		if b < 1 || b > c.BusinessLevels {
			return fielderr.Invalid("business."+api, b, fmt.Sprintf("an integer in [1, business_levels = %d]", c.BusinessLevels))
		}
	}
	return nil
}

// levels is the number of compound admission levels.
func (c *Config) levels() int { return c.BusinessLevels * c.UserLevels }

// level returns the compound level of (b, u): 1 for (1, 1), the highest
// priority, up to levels() for the lowest.
func (c *Config) level(b, u int) int { return (b-1)*c.UserLevels + u }

// split returns (B, U) of a compound level.
func (c *Config) split(l int) (int, int) { return (l-1)/c.UserLevels + 1, (l-1)%c.UserLevels + 1 }

// UserPriority returns user's priority in [1, user_levels] at now: an
// FNV-1a hash of the user id and the salt ⌊now / salt_period⌋.
func (c *Config) UserPriority(now time.Time, user string) int {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d", user, now.UnixNano()/int64(c.SaltPeriod))
	return int(h.Sum64()%uint64(c.UserLevels)) + 1
}

// priority returns the call's (B, U): assigned at the entry, read from
// the metadata elsewhere; a call without them has the lowest priority.
func (c *Config) priority(now time.Time, call *peers.Call, entry bool) (int, int) {
	if entry {
		b, ok := c.Business[call.Method]
		if !ok {
			b = c.DefaultBusiness
		}
		u := c.UserLevels
		if call.User != "" {
			u = c.UserPriority(now, call.User)
		}
		return b, u
	}
	b, okB := peers.MetaInt(call.Meta, KeyBusiness)
	u, okU := peers.MetaInt(call.Meta, KeyUser)
	if !okB || b < 1 || b > int64(c.BusinessLevels) {
		b = int64(c.BusinessLevels)
	}
	if !okU || u < 1 || u > int64(c.UserLevels) {
		u = int64(c.UserLevels)
	}
	return int(b), int(u)
}

// Server is DAGOR at one service. A call of compound priority (B, U) is
// admitted iff it is within the admission level (B*, U*):
//
//	B < B*, or B = B* and U ≤ U*     (1 is the highest priority)
//
// Levels are ordered (1,1) < (1,2) < … < (1,U_max) < (2,1) < …; the
// level starts at the lowest (everything admitted). Over a monitoring
// window (window or window_requests, whichever first) the server counts
// every arriving call in a histogram C[level] (N calls, N_adm admitted)
// and sums the queueing times of the calls that began service
// (Signal.Mean · Signal.Began). At the window's end it is overloaded iff
// the mean queueing time exceeds queue_threshold, and moves the level:
//
//	overloaded:  N_exp = (1 − α)·N_adm; while level > (1,1) and prefix(level) > N_exp: level−−
//	otherwise:   N_exp = max((1 + β)·N_adm, N_adm + 1); while level < lowest and prefix(level) < N_exp: level++
//
// with prefix(l) = Σ_{k ≤ l} C[k], the calls of this window that level l
// would have admitted. So the level sheds about α of the admitted calls,
// lowest priorities first, and opens by about β. The entry service
// assigns B from business (by API) and U by hashing the user id with an
// hourly salt (Config.UserPriority), and forwards both; other services
// read them. Every reply (refusals included) carries (B*, U*).
//
// Departures from the paper: the window's end is checked at each
// update (every period), so a window may run up to a period past its
// 2000th call; the increase is at least one call (N_adm + 1) so that a
// window that admitted nothing still opens a level.
//
// Port bugs fixed (Jiali-Xing/dagor-grpc): a call without method or
// user-id metadata is not refused with INVALID_ARGUMENT (it gets the
// lowest priorities); the threshold is compared in nanoseconds, not
// rounded to whole milliseconds; the level moves from where it is (the
// port walks down from the lowest level subtracting the counts of levels
// that admitted nothing, and up from (1,1) with the whole admitted count
// already counted, so that without overload it settles near β·N + 1
// admitted calls); the signal is the mean queueing time (the port
// compares the largest scheduler latency).
type Server struct {
	cfg   Config
	entry bool
	level int // the compound admission level

	hist       []int // C[level], index level−1
	n, nAdm    int
	winStart   time.Time
	started    bool
	waitSum    time.Duration
	waitN      int
	lastMean   time.Duration
	overloaded bool
}

var _ peers.Server = (*Server)(nil)

// NewServer returns DAGOR at a service; entry says it is the graph's
// entry, which assigns the priorities.
func NewServer(cfg Config, entry bool) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, entry: entry, level: cfg.levels(), hist: make([]int, cfg.levels())}, nil
}

// Period returns the update period.
func (s *Server) Period() time.Duration { return s.cfg.Period }

// Level returns the admission level (B*, U*).
func (s *Server) Level() (b, u int) { return s.cfg.split(s.level) }

// Window returns the current window's calls and admitted calls.
func (s *Server) Window() (n, admitted int) { return s.n, s.nAdm }

func (s *Server) levelMeta() peers.Metadata {
	b, u := s.Level()
	return peers.Metadata{KeyLevelB: fmt.Sprint(b), KeyLevelU: fmt.Sprint(u)}
}

// Admit admits the call if its priority is within the level.
func (s *Server) Admit(now time.Time, c *peers.Call) peers.Admission {
	if !s.started {
		s.started, s.winStart = true, now
	}
	b, u := s.cfg.priority(now, c, s.entry)
	l := s.cfg.level(b, u)
	s.hist[l-1]++
	s.n++
	if l > s.level {
		lb, lu := s.Level()
		return peers.Admission{Reply: s.levelMeta(), Reason: fmt.Sprintf("priority (%d,%d) below the level (%d,%d)", b, u, lb, lu)}
	}
	s.nAdm++
	return peers.Admission{Admit: true, Reason: "within the level",
		Forward: peers.Metadata{KeyBusiness: fmt.Sprint(b), KeyUser: fmt.Sprint(u)}}
}

// Done returns the level for the reply.
func (s *Server) Done(time.Time, *peers.Call, peers.Outcome) peers.Metadata { return s.levelMeta() }

// Update adds the period's queueing times (Signal.Mean, Signal.Began) to
// the window and, at its end, moves the level.
func (s *Server) Update(now time.Time, sig peers.Signal) {
	if !s.started {
		s.started, s.winStart = true, now
	}
	if sig.Began > 0 {
		s.waitSum += sig.Mean * time.Duration(sig.Began)
		s.waitN += sig.Began
	}
	if now.Sub(s.winStart) < s.cfg.Window && s.n < s.cfg.WindowRequests {
		return
	}
	s.lastMean = 0
	if s.waitN > 0 {
		s.lastMean = s.waitSum / time.Duration(s.waitN)
	}
	s.overloaded = s.lastMean > s.cfg.QueueThreshold
	s.adjust(s.overloaded)
	clear(s.hist)
	s.n, s.nAdm, s.waitSum, s.waitN = 0, 0, 0, 0
	s.winStart = now
}

// LastWindow returns the last closed window's mean queueing time and
// whether it was overloaded.
func (s *Server) LastWindow() (mean time.Duration, overloaded bool) { return s.lastMean, s.overloaded }

// adjust moves the level from the window's histogram.
func (s *Server) adjust(overloaded bool) {
	prefix := 0
	for k := 0; k < s.level; k++ {
		prefix += s.hist[k]
	}
	if overloaded {
		exp := (1 - s.cfg.Alpha) * float64(s.nAdm)
		for s.level > 1 && float64(prefix) > exp {
			prefix -= s.hist[s.level-1]
			s.level--
		}
		return
	}
	exp := math.Max((1+s.cfg.Beta)*float64(s.nAdm), float64(s.nAdm+1))
	for s.level < s.cfg.levels() && float64(prefix) < exp {
		s.level++
		prefix += s.hist[s.level-1]
	}
}

// Client is DAGOR's local admission control at a caller: it keeps the
// last admission level each downstream API (Call.Method) replied with,
// and refuses locally a call whose priority (forwarded from the request
// being served, Call.Meta) that level would refuse; other calls go, and
// carry their priority. A level not heard for level_ttl is forgotten.
// At an end user (no forwarded priority) every call goes.
type Client struct {
	cfg    Config
	levels map[string]heard
}

type heard struct {
	level int
	at    time.Time
}

var _ peers.Client = (*Client)(nil)

// NewClient returns a caller's side.
func NewClient(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, levels: make(map[string]heard)}, nil
}

// Period returns the update period.
func (c *Client) Period() time.Duration { return c.cfg.Period }

// Level returns the level heard from method (ok false if none).
func (c *Client) Level(method string) (b, u int, ok bool) {
	h, ok := c.levels[method]
	if !ok {
		return 0, 0, false
	}
	b, u = c.cfg.split(h.level)
	return b, u, true
}

// Send refuses a call the downstream's level would refuse.
func (c *Client) Send(now time.Time, call *peers.Call) peers.Decision {
	_, okB := call.Meta[KeyBusiness]
	if !okB {
		return peers.Decision{Verdict: peers.Send, Reason: "end user"}
	}
	b, u := c.cfg.priority(now, call, false)
	meta := peers.Metadata{KeyBusiness: fmt.Sprint(b), KeyUser: fmt.Sprint(u)}
	h, ok := c.levels[call.Method]
	if ok && c.cfg.LevelTTL > 0 && now.Sub(h.at) >= c.cfg.LevelTTL {
		delete(c.levels, call.Method)
		ok = false
	}
	if ok && c.cfg.level(b, u) > h.level {
		lb, lu := c.cfg.split(h.level)
		return peers.Decision{Verdict: peers.Deny, Reason: fmt.Sprintf("priority (%d,%d) below %s's level (%d,%d)", b, u, call.Method, lb, lu)}
	}
	return peers.Decision{Verdict: peers.Send, Meta: meta, Reason: "within the level"}
}

// Received keeps the reply's level.
func (c *Client) Received(now time.Time, call *peers.Call, reply peers.Metadata, _ peers.Outcome) []peers.Release {
	b, okB := peers.MetaInt(reply, KeyLevelB)
	u, okU := peers.MetaInt(reply, KeyLevelU)
	if okB && okU && b >= 1 && b <= int64(c.cfg.BusinessLevels) && u >= 1 && u <= int64(c.cfg.UserLevels) {
		c.levels[call.Method] = heard{level: c.cfg.level(int(b), int(u)), at: now}
	}
	return nil
}

// Cancel is a no-op: calls never wait.
func (c *Client) Cancel(time.Time, *peers.Call) []peers.Release { return nil }

// Update is a no-op.
func (c *Client) Update(time.Time) []peers.Release { return nil }

// Peer builds DAGOR for a graph.
type Peer struct{ Config Config }

var _ peers.Peer = (*Peer)(nil)

// Name returns "dagor".
func (p *Peer) Name() string { return "dagor" }

// Server returns DAGOR at a service.
func (p *Peer) Server(_ string, entry bool) (peers.Server, error) { return NewServer(p.Config, entry) }

// Client returns a caller's side.
func (p *Peer) Client(string, string) (peers.Client, error) { return NewClient(p.Config) }
