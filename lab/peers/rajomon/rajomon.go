// SPDX-License-Identifier: Apache-2.0

// Package rajomon is Rajomon (Xing et al., "Rajomon: Decentralized and
// Coordinated Overload Control for Latency-Sensitive Microservices",
// NSDI 2025) as a lab peer: a market across the service graph. End users
// earn tokens at a fixed rate and attach them to their requests; every
// service prices each of its APIs from its own queueing delay and the
// prices its downstream services reply with; a service drops a request
// whose tokens are below the price, and an end user holds back a request
// it cannot pay for. Tokens travel down with the requests, prices up
// with the replies. Written from the paper and its public Go port
// (pennsail/rajomon; read, not copied); docs/algorithms.md has the
// equations.
package rajomon

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/lab/peers"
)

// Metadata keys.
const (
	// KeyTokens is the tokens a request carries (the port's "tokens").
	KeyTokens = "rajomon-tokens"
	// KeyPrice is the replying service's price of the API, on every
	// reply (the port's "price").
	KeyPrice = "rajomon-price"
)

// Price strategies: how a service moves its own price every
// price_update (the port's priceStrategy).
const (
	// StrategyStep: +price_step while the delay is above the threshold,
	// −1 otherwise (the port's default).
	StrategyStep = "step"
	// StrategyProportional: + (d − threshold)/10 ms · price_step, the
	// delay's excess in units of 10 ms (the port's linear update).
	StrategyProportional = "proportional"
	// StrategyExpDecay: proportional, with the third and later
	// consecutive increases scaled by decay_rate^k (the port's
	// "expdecay").
	StrategyExpDecay = "expdecay"
)

// Config configures Rajomon. Start from DefaultConfig.
type Config struct {
	// PriceUpdate is how often a service moves its own price from its
	// queueing delay (default 10ms, the port's priceUpdateRate).
	PriceUpdate time.Duration `yaml:"price_update"`
	// LatencyThreshold is the queueing delay above which the price rises
	// (default 0, the port's: any delay raises it; tune it).
	LatencyThreshold time.Duration `yaml:"latency_threshold"`
	// PriceStep scales the increase (default 1).
	PriceStep int64 `yaml:"price_step"`
	// PriceStrategy is step, proportional or expdecay (default step).
	PriceStrategy string `yaml:"price_strategy"`
	// DecayRate is expdecay's factor (default 0.8, the port's).
	DecayRate float64 `yaml:"decay_rate"`
	// InitialPrice is every price at start (default 0).
	InitialPrice int64 `yaml:"initial_price"`
	// TokenInterval and TokenStep: an end user earns token_step tokens
	// every token_interval (defaults 10ms and 1, the port's).
	TokenInterval time.Duration `yaml:"token_interval"`
	TokenStep     int64         `yaml:"token_step"`
	// InitialTokens is an end user's wallet at start (default 10).
	InitialTokens int64 `yaml:"initial_tokens"`
	// MaxTokens caps a wallet (default 0: no cap, as the port).
	MaxTokens int64 `yaml:"max_tokens"`
	// ClientTimeout: an end user's request it cannot pay for waits up to
	// this long for tokens (or a lower price), within its deadline;
	// 0 refuses it at once (default 0, the port's).
	ClientTimeout time.Duration `yaml:"client_timeout"`
	// PriceTTL: when an end user has not heard an API's price for this
	// long and cannot pay it, it sends one request anyway, to hear the
	// current price (default 1s; 0 never, the port's behaviour).
	PriceTTL time.Duration `yaml:"price_ttl"`
	// CallMap lists, for an API, the downstream APIs it calls; a
	// service's price of the API is the largest of its own and theirs.
	// An API not listed takes the largest price heard from any
	// downstream API (a service with one API).
	CallMap map[string][]string `yaml:"call_map"`
}

// DefaultConfig returns the port's defaults: PriceUpdate 10ms,
// LatencyThreshold 0, PriceStep 1, PriceStrategy step, DecayRate 0.8,
// InitialPrice 0, TokenInterval 10ms, TokenStep 1, InitialTokens 10,
// MaxTokens 0 (no cap), ClientTimeout 0, PriceTTL 1s.
func DefaultConfig() Config {
	return Config{PriceUpdate: 10 * time.Millisecond, PriceStep: 1, PriceStrategy: StrategyStep, DecayRate: 0.8,
		TokenInterval: 10 * time.Millisecond, TokenStep: 1, InitialTokens: 10, PriceTTL: time.Second}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.PriceUpdate <= 0:
		return fielderr.Invalid("price_update", c.PriceUpdate, "a duration > 0 such as 10ms")
	case c.LatencyThreshold < 0:
		return fielderr.Invalid("latency_threshold", c.LatencyThreshold, "a duration ≥ 0")
	case c.PriceStep < 1:
		return fielderr.Invalid("price_step", c.PriceStep, "an integer ≥ 1")
	case c.PriceStrategy != StrategyStep && c.PriceStrategy != StrategyProportional && c.PriceStrategy != StrategyExpDecay:
		return fielderr.Invalid("price_strategy", c.PriceStrategy, "one of step, proportional, expdecay")
	case !(c.DecayRate > 0 && c.DecayRate <= 1):
		return fielderr.Invalid("decay_rate", c.DecayRate, "a number in (0, 1]")
	case c.InitialPrice < 0:
		return fielderr.Invalid("initial_price", c.InitialPrice, "an integer ≥ 0")
	case c.TokenInterval <= 0:
		return fielderr.Invalid("token_interval", c.TokenInterval, "a duration > 0 such as 10ms")
	case c.TokenStep < 1:
		return fielderr.Invalid("token_step", c.TokenStep, "an integer ≥ 1")
	case c.InitialTokens < 0:
		return fielderr.Invalid("initial_tokens", c.InitialTokens, "an integer ≥ 0")
	case c.MaxTokens < 0:
		return fielderr.Invalid("max_tokens", c.MaxTokens, "an integer ≥ 0 (0: no cap)")
	case c.ClientTimeout < 0:
		return fielderr.Invalid("client_timeout", c.ClientTimeout, "a duration ≥ 0 (0: refuse at once)")
	case c.PriceTTL < 0:
		return fielderr.Invalid("price_ttl", c.PriceTTL, "a duration ≥ 0 (0: never probe)")
	}
	return nil
}

// Table is one service's prices: its own, and the ones its downstream
// services replied with for each API it calls. A service's server and
// its clients share one.
type Table struct {
	own  int64
	down map[string]price
}

type price struct {
	p  int64
	at time.Time
}

// NewTable returns a table with every price at initial.
func NewTable(initial int64) *Table { return &Table{own: initial, down: make(map[string]price)} }

// Own returns the service's own price.
func (t *Table) Own() int64 { return t.own }

// Downstream returns the price heard for a downstream API (ok false if
// none).
func (t *Table) Downstream(api string) (int64, bool) {
	p, ok := t.down[api]
	return p.p, ok
}

// price returns the service's price of api: the largest of its own and
// those of the APIs it calls (cfg.CallMap; all heard if not listed); and
// the downstream API whose price sets it if that price was heard
// price_ttl or longer before now ("" if the price is fresh or its own).
func (t *Table) price(cfg *Config, api string, now time.Time) (int64, string) {
	p, from := t.own, ""
	consider := func(d string, q price) {
		if q.p > p {
			p, from = q.p, d
		}
	}
	if calls, ok := cfg.CallMap[api]; ok {
		for _, d := range calls {
			consider(d, t.down[d])
		}
	} else {
		for _, d := range sortedAPIs(t.down) {
			consider(d, t.down[d])
		}
	}
	if from != "" && (cfg.PriceTTL == 0 || now.Sub(t.down[from].at) < cfg.PriceTTL) {
		from = ""
	}
	return p, from
}

func sortedAPIs(m map[string]price) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Server is Rajomon at one service ("maximal" aggregation, the port's
// default). Every price_update it moves its own price P from the
// period's queueing delay d (Signal.Delay, the largest of the period)
// and the threshold θ:
//
//	step:          d > θ: P ← P + price_step;  else P ← max(P − 1, 0)
//	proportional:  P ← max(P + ⌊(d − θ)·price_step / 10ms⌋, 0)   (in µs, integer, toward 0)
//	expdecay:      proportional, a third and later consecutive increase scaled by decay_rate^k
//
// An API's price is max(P, the prices its downstream APIs replied with).
// A request is admitted iff its tokens (KeyTokens; none is 0) are at
// least the API's price; admitted requests forward their tokens to the
// calls they make. Every reply, refusals included, carries the API's
// price.
//
// Departures from the port (pennsail/rajomon), its bugs fixed: every
// reply carries the price (the port attaches it to one reply in
// price_freq, chosen by the token count); a downstream price not heard
// for price_ttl lets one request a price_ttl through to hear it again
// (its tokens must pay the service's own price) — otherwise a service
// whose downstream price rose refuses every request and, sending none
// down, never hears it fall: the port's client lock-out, one hop down;
// a request without a method is priced as the API "" instead of
// panicking; prices are keyed by
// downstream API, not API and node (one node per API here); the
// "additive" aggregation, which splits tokens among the downstream
// calls, is not implemented.
type Server struct {
	cfg         Config
	t           *Table
	consecutive int
}

var _ peers.Server = (*Server)(nil)

// NewServer returns Rajomon at a service whose prices are t (nil: a
// table of its own).
func NewServer(cfg Config, t *Table) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t == nil {
		t = NewTable(cfg.InitialPrice)
	}
	return &Server{cfg: cfg, t: t}, nil
}

// Period returns price_update.
func (s *Server) Period() time.Duration { return s.cfg.PriceUpdate }

// Price returns the service's price of api at now.
func (s *Server) Price(now time.Time, api string) int64 {
	p, _ := s.t.price(&s.cfg, api, now)
	return p
}

func (s *Server) reply(now time.Time, api string) peers.Metadata {
	return peers.Metadata{KeyPrice: fmt.Sprint(s.Price(now, api))}
}

// Admit admits a request whose tokens pay the API's price, or that
// probes a stale downstream price.
func (s *Server) Admit(now time.Time, c *peers.Call) peers.Admission {
	tok, _ := peers.MetaInt(c.Meta, KeyTokens)
	p, stale := s.t.price(&s.cfg, c.Method, now)
	if tok < p && stale != "" && tok >= s.t.own {
		// One request per price_ttl goes on to hear the current price.
		q := s.t.down[stale]
		q.at = now
		s.t.down[stale] = q
		return peers.Admission{Admit: true, Reason: fmt.Sprintf("probe: %s's price %d is stale", stale, p),
			Forward: peers.Metadata{KeyTokens: fmt.Sprint(tok)}}
	}
	if tok < p {
		return peers.Admission{Reply: s.reply(now, c.Method), Reason: fmt.Sprintf("tokens %d < price %d", tok, p)}
	}
	return peers.Admission{Admit: true, Reason: fmt.Sprintf("tokens %d ≥ price %d", tok, p),
		Forward: peers.Metadata{KeyTokens: fmt.Sprint(tok)}}
}

// Done returns the API's price for the reply.
func (s *Server) Done(now time.Time, c *peers.Call, _ peers.Outcome) peers.Metadata {
	return s.reply(now, c.Method)
}

// Update moves the own price on the period's delay.
func (s *Server) Update(_ time.Time, sig peers.Signal) {
	d, th := sig.Delay, s.cfg.LatencyThreshold
	if s.cfg.PriceStrategy == StrategyStep {
		switch {
		case d > th:
			s.t.own += s.cfg.PriceStep
		case s.t.own > 0:
			s.t.own--
		}
		return
	}
	adj := (d.Microseconds() - th.Microseconds()) * s.cfg.PriceStep / 10000
	if s.cfg.PriceStrategy == StrategyExpDecay {
		switch {
		case adj > 0:
			if s.consecutive >= 2 {
				adj = int64(float64(adj) * math.Pow(s.cfg.DecayRate, float64(s.consecutive)))
			}
			s.consecutive++
		case adj < 0:
			s.consecutive = 0
		}
	}
	s.t.own = max(s.t.own+adj, 0)
}

// Client is Rajomon at a caller. A service's client passes on the tokens
// of the request it serves (Call.Meta) and records the prices replied
// (in its service's Table). An end user's client (no forwarded tokens)
// keeps a wallet that earns token_step every token_interval (up to
// max_tokens), and sends a request only if the wallet pays the API's
// last heard price P: the request carries the whole wallet ("all", the
// port's token strategy) and P is deducted. A request it cannot pay for
// is refused at once, or waits up to client_timeout (never past its
// deadline: a waiting call leaves when its context ends); when P has
// not been heard for price_ttl, one request goes anyway (its reply
// brings the current price).
//
// Port bugs fixed: the price is deducted (the port's client never
// deducts an admitted request's tokens, so its wallet only grows and
// limits nothing); a client refusing everything still hears prices (the
// probe); waits watch the context.
type Client struct {
	cfg    Config
	t      *Table
	user   bool
	wallet int64
	earned time.Time // the last refill's time
	begun  bool
	queue  []waiter
	probed map[string]time.Time
}

type waiter struct {
	c  *peers.Call
	at time.Time
}

var _ peers.Client = (*Client)(nil)

// NewClient returns a service's client recording prices in t, or, with
// t nil, an end user's.
func NewClient(cfg Config, t *Table) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, t: t, user: t == nil, wallet: cfg.InitialTokens, probed: make(map[string]time.Time)}
	if t == nil {
		c.t = NewTable(cfg.InitialPrice)
	}
	return c, nil
}

// Period returns token_interval.
func (c *Client) Period() time.Duration { return c.cfg.TokenInterval }

// Wallet returns an end user's tokens.
func (c *Client) Wallet() int64 { return c.wallet }

// Price returns the last heard price of api (0 if none).
func (c *Client) Price(api string) int64 { p, _ := c.t.Downstream(api); return p }

// earn adds the tokens of the whole intervals since the last refill.
func (c *Client) earn(now time.Time) {
	if !c.begun {
		c.begun, c.earned = true, now
		return
	}
	n := int64(now.Sub(c.earned) / c.cfg.TokenInterval)
	if n <= 0 {
		return
	}
	c.earned = c.earned.Add(time.Duration(n) * c.cfg.TokenInterval)
	c.wallet += n * c.cfg.TokenStep
	if c.cfg.MaxTokens > 0 {
		c.wallet = min(c.wallet, c.cfg.MaxTokens)
	}
}

// pay decides on an end user's request without queueing.
func (c *Client) pay(now time.Time, call *peers.Call) (peers.Decision, bool) {
	p := c.Price(call.Method)
	tok := c.wallet
	if tok >= p {
		c.wallet -= p
		return peers.Decision{Verdict: peers.Send, Meta: peers.Metadata{KeyTokens: fmt.Sprint(tok)},
			Reason: fmt.Sprintf("wallet %d pays price %d", tok, p)}, true
	}
	heard := c.t.down[call.Method].at
	if last, ok := c.probed[call.Method]; ok && last.After(heard) {
		heard = last
	}
	if c.cfg.PriceTTL > 0 && now.Sub(heard) >= c.cfg.PriceTTL {
		c.probed[call.Method] = now
		return peers.Decision{Verdict: peers.Send, Meta: peers.Metadata{KeyTokens: fmt.Sprint(tok)},
			Reason: fmt.Sprintf("probe: price %d not heard for %s", p, now.Sub(heard))}, true
	}
	return peers.Decision{Verdict: peers.Deny, Reason: fmt.Sprintf("wallet %d < price %d", tok, p)}, false
}

// Send decides on a call: a service's passes with its tokens; an end
// user's goes if paid for, else waits or is refused.
func (c *Client) Send(now time.Time, call *peers.Call) peers.Decision {
	if !c.user {
		m := peers.Metadata{}
		if tok, ok := call.Meta[KeyTokens]; ok {
			m[KeyTokens] = tok
		}
		return peers.Decision{Verdict: peers.Send, Meta: m, Reason: "forwarded tokens"}
	}
	c.earn(now)
	if len(c.queue) == 0 {
		if d, ok := c.pay(now, call); ok || c.cfg.ClientTimeout == 0 {
			return d
		}
	}
	if c.cfg.ClientTimeout == 0 {
		return peers.Decision{Verdict: peers.Deny, Reason: "rate limited"}
	}
	c.queue = append(c.queue, waiter{c: call, at: now})
	return peers.Decision{Verdict: peers.Wait, Reason: fmt.Sprintf("wallet %d < price %d: waits for tokens", c.wallet, c.Price(call.Method))}
}

// Received records the reply's price and lets waiting requests go.
func (c *Client) Received(now time.Time, call *peers.Call, reply peers.Metadata, _ peers.Outcome) []peers.Release {
	if p, ok := peers.MetaInt(reply, KeyPrice); ok && p >= 0 {
		c.t.down[call.Method] = price{p: p, at: now}
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

// Update earns tokens and lets waiting requests go (or refuses those
// that waited client_timeout).
func (c *Client) Update(now time.Time) []peers.Release {
	if !c.user {
		return nil
	}
	c.earn(now)
	return c.drain(now)
}

func (c *Client) drain(now time.Time) []peers.Release {
	var out []peers.Release
	for len(c.queue) > 0 {
		w := c.queue[0]
		if now.Sub(w.at) >= c.cfg.ClientTimeout {
			out = append(out, peers.Release{Call: w.c, Decision: peers.Decision{Verdict: peers.Deny,
				Reason: fmt.Sprintf("waited client_timeout %s for tokens", c.cfg.ClientTimeout)}})
			c.queue = c.queue[1:]
			continue
		}
		d, ok := c.pay(now, w.c)
		if !ok {
			break
		}
		out = append(out, peers.Release{Call: w.c, Decision: d})
		c.queue = c.queue[1:]
	}
	return out
}

// Peer builds Rajomon for a graph: one price table per service, shared by
// its server and its clients; end users get wallets of their own.
type Peer struct {
	Config Config
	tables map[string]*Table
}

var _ peers.Peer = (*Peer)(nil)

// Name returns "rajomon".
func (p *Peer) Name() string { return "rajomon" }

func (p *Peer) table(service string) *Table {
	if p.tables == nil {
		p.tables = make(map[string]*Table)
	}
	t := p.tables[service]
	if t == nil {
		t = NewTable(p.Config.InitialPrice)
		p.tables[service] = t
	}
	return t
}

// Server returns Rajomon at a service.
func (p *Peer) Server(service string, _ bool) (peers.Server, error) {
	return NewServer(p.Config, p.table(service))
}

// Client returns an end user's client (from "") or a service's.
func (p *Peer) Client(from, _ string) (peers.Client, error) {
	if from == "" {
		return NewClient(p.Config, nil)
	}
	return NewClient(p.Config, p.table(from))
}
