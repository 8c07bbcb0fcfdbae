// SPDX-License-Identifier: Apache-2.0

package rajomon

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/internal/testclock"
	"github.com/sluicehq/sluice/lab/peers"
)

var t0, ms = testclock.T0, testclock.Ms

func newServer(t *testing.T, edit func(*Config)) (*Server, *Table) {
	t.Helper()
	c := DefaultConfig()
	edit(&c)
	tab := NewTable(c.InitialPrice)
	s, err := NewServer(c, tab)
	if err != nil {
		t.Fatal(err)
	}
	return s, tab
}

// The own price's three update rules, by hand.
func TestPriceUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Config)
		delays []time.Duration
		prices []int64
	}{
		// step: +3 above 5 ms, −1 otherwise, never below 0.
		{"step", func(c *Config) { c.LatencyThreshold, c.PriceStep = ms(5), 3 },
			[]time.Duration{ms(6), ms(6), ms(1), ms(5), ms(0), ms(0), ms(0), ms(0), ms(0)},
			[]int64{3, 6, 5, 4, 3, 2, 1, 0, 0}},
		// proportional: (d − 5 ms)·2/10 ms, in µs, truncated toward 0.
		{"proportional", func(c *Config) {
			c.LatencyThreshold, c.PriceStep, c.PriceStrategy = ms(5), 2, StrategyProportional
		},
			[]time.Duration{ms(35), ms(0), ms(10), ms(9.99), ms(0), ms(0), ms(0), ms(0), ms(0)},
			// +6, −1, +1, +0 (9.98 µs·… truncates), −1 ×4, floor 0
			[]int64{6, 5, 6, 6, 5, 4, 3, 2, 1}},
		// expdecay: decay 0.5 from the third consecutive increase.
		{"expdecay", func(c *Config) { c.PriceStrategy, c.DecayRate = StrategyExpDecay, 0.5 },
			[]time.Duration{ms(40), ms(40), ms(40), ms(40), ms(0), ms(40)},
			// +4, +4, +⌊4·0.5²⌋ = 1, +⌊4·0.5³⌋ = 0, no change (not a decrease), +0 (k = 4 still)
			[]int64{4, 8, 9, 9, 9, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, tab := newServer(t, tc.edit)
			for i, d := range tc.delays {
				s.Update(t0.Add(time.Duration(i)*10*time.Millisecond), peers.Signal{Delay: d})
				if got := tab.Own(); got != tc.prices[i] {
					t.Fatalf("step %d (d = %s): price %d, want %d", i, d, got, tc.prices[i])
				}
			}
		})
	}
}

// Admission: tokens ≥ price; the price is max(own, downstream) and is on
// every reply; admitted tokens travel on.
func TestServerAdmission(t *testing.T) {
	s, tab := newServer(t, func(c *Config) { c.LatencyThreshold = ms(5); c.PriceStep = 6 })
	s.Update(t0, peers.Signal{Delay: ms(9)}) // own price 6
	call := func(tok string) *peers.Call {
		return &peers.Call{Method: "/in", Meta: peers.Metadata{KeyTokens: tok}}
	}
	if a := s.Admit(t0, call("6")); !a.Admit || a.Forward[KeyTokens] != "6" {
		t.Fatalf("6 tokens at price 6: %+v", a)
	}
	if a := s.Admit(t0, call("5")); a.Admit || a.Reply[KeyPrice] != "6" {
		t.Fatalf("5 tokens at price 6: %+v", a)
	}
	if a := s.Admit(t0, &peers.Call{Method: "/in"}); a.Admit {
		t.Fatalf("no tokens at price 6: %+v", a)
	}
	// The service's client hears 9 from downstream: the price is 9.
	cl, err := NewClient(s.cfg, tab)
	if err != nil {
		t.Fatal(err)
	}
	if d := cl.Send(t0, &peers.Call{Method: "/down", Meta: peers.Metadata{KeyTokens: "7"}}); d.Verdict != peers.Send || d.Meta[KeyTokens] != "7" {
		t.Fatalf("service's client: %+v", d)
	}
	cl.Received(t0, &peers.Call{Method: "/down"}, peers.Metadata{KeyPrice: "9"}, peers.OK)
	if r := s.Done(t0, call("9"), peers.OK); r[KeyPrice] != "9" {
		t.Fatalf("reply %v, want the downstream's 9", r)
	}
	if a := s.Admit(t0, call("8")); a.Admit {
		t.Fatal("8 tokens admitted at a downstream price of 9")
	}
	// With a call map, /in calls only /other: its price is its own.
	s.cfg.CallMap = map[string][]string{"/in": {"/other"}}
	if p := s.Price(t0, "/in"); p != 6 {
		t.Fatalf("price with a call map: %d", p)
	}
}

func newUser(t *testing.T, edit func(*Config)) *Client {
	t.Helper()
	c := DefaultConfig()
	if edit != nil {
		edit(&c)
	}
	cl, err := NewClient(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// An end user's wallet: 1 token every 10 ms from 10; a request carries
// the wallet and pays the last heard price; one it cannot pay for is
// refused; a price not heard for price_ttl lets one probe go.
func TestUserWallet(t *testing.T) {
	c := newUser(t, nil)
	m := func() *peers.Call { return &peers.Call{Method: "/m"} }
	if d := c.Send(t0, m()); d.Verdict != peers.Send || d.Meta[KeyTokens] != "10" || c.Wallet() != 10 {
		t.Fatalf("unknown price: %+v, wallet %d", d, c.Wallet())
	}
	c.Received(t0.Add(ms(1)), m(), peers.Metadata{KeyPrice: "4"}, peers.OK)
	for i, want := range []struct {
		v      peers.Verdict
		tokens string
		wallet int64
	}{{peers.Send, "10", 6}, {peers.Send, "6", 2}, {peers.Deny, "", 2}} {
		d := c.Send(t0.Add(ms(2)), m())
		if d.Verdict != want.v || d.Meta[KeyTokens] != want.tokens || c.Wallet() != want.wallet {
			t.Fatalf("send %d: %+v, wallet %d; want %s with %q, wallet %d", i, d, c.Wallet(), want.v, want.tokens, want.wallet)
		}
	}
	// Two whole intervals since t0: +2.
	if d := c.Send(t0.Add(ms(25)), m()); d.Verdict != peers.Send || c.Wallet() != 0 {
		t.Fatalf("after 25 ms: %+v, wallet %d", d, c.Wallet())
	}
	// A price of 1000 heard; a second later the wallet (0 + 48 + 53) cannot
	// pay it, but one probe goes (and only one).
	c.Received(t0.Add(ms(30)), m(), peers.Metadata{KeyPrice: "1000"}, peers.Rejected)
	if d := c.Send(t0.Add(ms(500)), m()); d.Verdict != peers.Deny {
		t.Fatalf("before price_ttl: %+v", d)
	}
	d := c.Send(t0.Add(ms(1030)), m())
	if d.Verdict != peers.Send || !strings.HasPrefix(d.Reason, "probe") || d.Meta[KeyTokens] != "101" || c.Wallet() != 101 {
		t.Fatalf("after price_ttl: %+v, wallet %d", d, c.Wallet())
	}
	if d := c.Send(t0.Add(ms(1031)), m()); d.Verdict != peers.Deny {
		t.Fatalf("second probe: %+v", d)
	}
	c.Received(t0.Add(ms(1032)), m(), peers.Metadata{KeyPrice: "0"}, peers.Rejected)
	if d := c.Send(t0.Add(ms(1033)), m()); d.Verdict != peers.Send || c.Wallet() != 101 {
		t.Fatalf("price back to 0: %+v", d)
	}
}

// With client_timeout a request it cannot pay for waits for tokens, and
// is refused when the timeout passes; a waiter can leave.
func TestUserWaits(t *testing.T) {
	c := newUser(t, func(c *Config) { c.ClientTimeout, c.InitialTokens, c.PriceTTL = ms(50), 0, 0 })
	c.Send(t0, &peers.Call{Method: "/m"})
	c.Received(t0, &peers.Call{Method: "/m"}, peers.Metadata{KeyPrice: "4"}, peers.OK)
	w := &peers.Call{Method: "/m", ID: 1}
	if d := c.Send(t0, w); d.Verdict != peers.Wait {
		t.Fatalf("wallet 0: %+v", d)
	}
	if rs := c.Update(t0.Add(ms(20))); len(rs) != 0 {
		t.Fatalf("wallet 2: %v", rs)
	}
	rs := c.Update(t0.Add(ms(40)))
	if len(rs) != 1 || rs[0].Call != w || rs[0].Decision.Verdict != peers.Send || c.Wallet() != 0 {
		t.Fatalf("wallet 4: %+v", rs)
	}
	w2, w3 := &peers.Call{Method: "/m", ID: 2}, &peers.Call{Method: "/m", ID: 3}
	c.Send(t0.Add(ms(40)), w2)
	c.Send(t0.Add(ms(41)), w3)
	c.Cancel(t0.Add(ms(42)), w3)
	rs = c.Update(t0.Add(ms(90)))
	if len(rs) != 1 || rs[0].Call != w2 || rs[0].Decision.Verdict != peers.Deny {
		t.Fatalf("after client_timeout: %+v", rs)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"price_update", func(c *Config) { c.PriceUpdate = 0 }},
		{"price_strategy", func(c *Config) { c.PriceStrategy = "linear" }},
		{"token_step", func(c *Config) { c.TokenStep = 0 }},
		{"price_ttl", func(c *Config) { c.PriceTTL = -1 }},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.field+":") {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
}

// A service whose downstream price is stale lets one request a
// price_ttl go down (if it pays the service's own price) to hear it
// again, instead of refusing everything forever.
func TestServerProbesStaleDownstreamPrice(t *testing.T) {
	s, tab := newServer(t, func(c *Config) { c.PriceStep = 6 })
	s.Update(t0, peers.Signal{Delay: ms(1)}) // own price 6
	cl, _ := NewClient(s.cfg, tab)
	cl.Received(t0, &peers.Call{Method: "/down"}, peers.Metadata{KeyPrice: "90"}, peers.OK)
	call := func(tok string) *peers.Call {
		return &peers.Call{Method: "/in", Meta: peers.Metadata{KeyTokens: tok}}
	}
	if a := s.Admit(t0.Add(ms(999)), call("7")); a.Admit {
		t.Fatalf("fresh downstream price 90, 7 tokens: %+v", a)
	}
	a := s.Admit(t0.Add(time.Second), call("7"))
	if !a.Admit || !strings.HasPrefix(a.Reason, "probe") || a.Forward[KeyTokens] != "7" {
		t.Fatalf("stale downstream price: %+v", a)
	}
	if a := s.Admit(t0.Add(time.Second+ms(1)), call("7")); a.Admit {
		t.Fatalf("a second probe within price_ttl: %+v", a)
	}
	if a := s.Admit(t0.Add(3*time.Second), call("5")); a.Admit {
		t.Fatalf("a probe below the own price: %+v", a)
	}
	cl.Received(t0.Add(3*time.Second), &peers.Call{Method: "/down"}, peers.Metadata{KeyPrice: "2"}, peers.Rejected)
	if a := s.Admit(t0.Add(3*time.Second), call("6")); !a.Admit || strings.HasPrefix(a.Reason, "probe") {
		t.Fatalf("after hearing 2: %+v", a)
	}
}
