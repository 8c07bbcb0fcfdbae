// SPDX-License-Identifier: Apache-2.0

package breakwater

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/internal/testclock"
	"github.com/sluicehq/sluice/lab/peers"
)

var t0, ms = testclock.T0, testclock.Ms

// testConfig has round numbers: d_t 10 ms, AQM at 20 ms, α 0.5, β 0.2.
func testConfig() Config {
	c := DefaultConfig()
	c.TargetDelay, c.DropDelay, c.AI, c.MD, c.InitialCredits = ms(10), ms(20), 0.5, 0.2, 10
	c.ClientDelay, c.QueueLimit = ms(10), 2
	return c
}

func newServer(t *testing.T, c Config) *Server {
	t.Helper()
	s, err := NewServer(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func call(client string, demand int) *peers.Call {
	return &peers.Call{Meta: peers.Metadata{KeyClient: client, KeyDemand: strconv.Itoa(demand)}}
}

func wantCredits(t *testing.T, s *Server, total, issued int) {
	t.Helper()
	if gt, gi := s.Credits(); gt != total || gi != issued {
		t.Fatalf("C_total, C_issued = %d, %d; want %d, %d", gt, gi, total, issued)
	}
}

func wantReply(t *testing.T, m peers.Metadata, credits string) {
	t.Helper()
	if m[KeyCredits] != credits {
		t.Fatalf("reply %v; want credits %s", m, credits)
	}
}

// The pool's law, hand-computed: d < d_t adds max(⌊α·clients⌋, 1);
// d ≥ d_t multiplies by max(1 − β·(d − d_t)/d_t, 0.5), truncated.
func TestServerPoolLaw(t *testing.T) {
	s := newServer(t, testConfig())
	wantCredits(t, s, 10, 0)
	if a := s.Admit(t0, call("a", 0)); !a.Admit {
		t.Fatalf("first call refused: %+v", a)
	}
	steps := []struct {
		delay time.Duration
		total int
	}{
		{0, 11},      // + max(⌊0.5·1⌋, 1) = +1
		{ms(15), 9},  // ⌊11·(1 − 0.2·5/10)⌋ = ⌊9.9⌋
		{ms(60), 4},  // ⌊9·max(1 − 0.2·50/10, 0.5)⌋ = ⌊4.5⌋
		{ms(9.9), 5}, // below d_t: +1
		{ms(1e4), 2}, // halved at most: ⌊2.5⌋
		{ms(1e4), 1}, // ⌊1⌋, the floor (cores 1)
		{ms(1e4), 1}, // never below cores
		{ms(0.5), 2}, // +1
		{ms(10), 2},  // d = d_t counts as overload: ⌊2·(1 − 0)⌋ = 2
	}
	for i, st := range steps {
		s.Update(t0.Add(time.Duration(i+1)*5*time.Millisecond), peers.Signal{Delay: st.delay})
		if got, _ := s.Credits(); got != st.total {
			t.Fatalf("step %d (d = %s): C_total %d, want %d", i, st.delay, got, st.total)
		}
	}
}

// Demand speculation and overcommitment, srpc_update_window by hand.
func TestServerWindows(t *testing.T) {
	s := newServer(t, testConfig())
	// a, demand 3: open 10, oc ⌊10/1⌋ = 10; w = min(0+3+10, 0+10) = 10.
	s.Admit(t0, call("a", 3))
	wantReply(t, s.Done(t0, call("a", 3), peers.OK), "10")
	wantCredits(t, s, 10, 10)
	// b, demand 0: 2 clients, open 0, oc 1; C_issued = C_total: w stays 0.
	s.Admit(t0, call("b", 0))
	wantReply(t, s.Done(t0, call("b", 0), peers.OK), "0")
	wantCredits(t, s, 10, 10)
	// The pool grows by max(⌊0.5·2⌋, 1) = 1.
	s.Update(t0.Add(ms(5)), peers.Signal{})
	wantCredits(t, s, 11, 10)
	// b, demand 2: open 1, oc max(⌊1/2⌋, 1) = 1; w = min(0+2+1, 0+1) = 1.
	s.Admit(t0.Add(ms(6)), call("b", 2))
	wantReply(t, s.Done(t0.Add(ms(6)), call("b", 2), peers.OK), "1")
	wantCredits(t, s, 11, 11)
	// a arrives with demand 0: its window 10 > p + q = 1 shrinks to 1 at
	// once (C_issued 11 − 9 = 2); its reply: open 9, oc ⌊9/2⌋ = 4,
	// w = min(0+0+4, 1+9) = 4, C_issued = 5.
	s.Admit(t0.Add(ms(7)), call("a", 0))
	if w := s.Window("a"); w != 1 {
		t.Fatalf("a's window after a smaller demand: %d, want 1", w)
	}
	wantReply(t, s.Done(t0.Add(ms(7)), call("a", 0), peers.OK), "4")
	wantCredits(t, s, 11, 5)
	// Overload: C_total ⌊11·0.7⌋ = 7 and the delay is above the AQM's
	// 20 ms. a arrives with demand 0: its window 4 shrinks to p + q = 1
	// (C_issued 2); the call is dropped and its reply's window
	// recomputed: open 5, oc ⌊5/2⌋ = 2, w = min(0+0+2, 1+5) = 2,
	// C_issued = 3.
	s.Update(t0.Add(ms(10)), peers.Signal{Delay: ms(25)})
	a := s.Admit(t0.Add(ms(11)), call("a", 0))
	if a.Admit || !strings.Contains(a.Reason, "AQM") {
		t.Fatalf("call during a 25 ms delay: %+v, want an AQM drop", a)
	}
	wantReply(t, a.Reply, "2")
	wantCredits(t, s, 7, 3)
}

// C_issued above C_total takes one credit back per reply.
func TestServerWindowShrinksWhenOvercommitted(t *testing.T) {
	s := newServer(t, testConfig())
	s.Admit(t0, call("a", 20))
	wantReply(t, s.Done(t0, call("a", 20), peers.OK), "10")
	s.Update(t0.Add(ms(5)), peers.Signal{Delay: ms(15)}) // ⌊10·0.9⌋ = 9 < C_issued 10
	wantCredits(t, s, 9, 10)
	s.Admit(t0.Add(ms(6)), call("a", 20))
	wantReply(t, s.Done(t0.Add(ms(6)), call("a", 20), peers.OK), "9")
	wantCredits(t, s, 9, 9)
}

// An idle client is forgotten after client_ttl, its credits back.
func TestServerForgetsIdleClients(t *testing.T) {
	s := newServer(t, testConfig())
	s.Admit(t0, call("a", 3))
	s.Done(t0, call("a", 3), peers.OK)
	wantCredits(t, s, 10, 10)
	s.Update(t0.Add(9*time.Second), peers.Signal{})
	wantCredits(t, s, 11, 10)
	s.Update(t0.Add(10*time.Second), peers.Signal{})
	wantCredits(t, s, 12, 0)
	if s.Window("a") != 0 {
		t.Fatal("a still known")
	}
}

func newClient(t *testing.T) *Client {
	t.Helper()
	c, err := NewClient(testConfig(), "me")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func verdicts(rs []peers.Release) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Decision.Verdict.String()+":"+r.Decision.Meta[KeyDemand])
	}
	return out
}

// The client's credits: a call goes while fewer than the window are
// outstanding (one at least), else waits; replies set the window, every
// end frees a credit, a call waiting longer than client_delay is dropped.
func TestClientTrace(t *testing.T) {
	c := newClient(t)
	c1, c2, c3, c4 := &peers.Call{ID: 1}, &peers.Call{ID: 2}, &peers.Call{ID: 3}, &peers.Call{ID: 4}
	if d := c.Send(t0, c1); d.Verdict != peers.Send || d.Meta[KeyClient] != "me" || d.Meta[KeyDemand] != "0" {
		t.Fatalf("first call: %+v", d)
	}
	if d := c.Send(t0.Add(ms(1)), c2); d.Verdict != peers.Wait {
		t.Fatalf("second call with one credit: %+v", d)
	}
	c.Send(t0.Add(ms(1)), c3)
	if d := c.Send(t0.Add(ms(1)), c4); d.Verdict != peers.Deny {
		t.Fatalf("third waiter with queue_limit 2: %+v", d)
	}
	// A window of 3 lets both waiters go; their demand is what is still
	// queued behind each.
	rs := c.Received(t0.Add(ms(2)), c1, peers.Metadata{KeyCredits: "3"}, peers.OK)
	if got := verdicts(rs); len(got) != 2 || got[0] != "send:1" || got[1] != "send:0" || rs[0].Call != c2 {
		t.Fatalf("releases %v", got)
	}
	c5, c6 := &peers.Call{ID: 5}, &peers.Call{ID: 6}
	if d := c.Send(t0.Add(ms(3)), c5); d.Verdict != peers.Send {
		t.Fatalf("third credit: %+v", d)
	}
	c.Send(t0.Add(ms(4)), c6)
	// c2 times out (no reply): its credit is freed all the same, but c6
	// has waited 16 ms > client_delay 10 ms and is dropped.
	rs = c.Received(t0.Add(ms(20)), c2, nil, peers.Canceled)
	if got := verdicts(rs); len(got) != 1 || got[0] != "deny:" || rs[0].Call != c6 {
		t.Fatalf("releases after a timeout %v", got)
	}
	if avail, used := c.Window(); avail != 3 || used != 2 {
		t.Fatalf("window %d, outstanding %d; want 3, 2", avail, used)
	}
	// A refusal's window of 0 still frees the credit; with one call
	// outstanding nothing more goes; a waiter can leave.
	c.Received(t0.Add(ms(21)), c3, peers.Metadata{KeyCredits: "0"}, peers.Rejected)
	c7 := &peers.Call{ID: 7}
	if d := c.Send(t0.Add(ms(22)), c7); d.Verdict != peers.Wait {
		t.Fatalf("window 0 with one outstanding: %+v", d)
	}
	c.Cancel(t0.Add(ms(23)), c7)
	if c.Queued() != 0 {
		t.Fatal("canceled call still queued")
	}
	if rs := c.Received(t0.Add(ms(24)), c5, peers.Metadata{KeyCredits: "0"}, peers.OK); len(rs) != 0 {
		t.Fatalf("releases %v after the queue emptied", verdicts(rs))
	}
	// Nothing outstanding: one credit remains (no server push).
	if d := c.Send(t0.Add(ms(25)), &peers.Call{ID: 8}); d.Verdict != peers.Send {
		t.Fatalf("window 0, nothing outstanding: %+v", d)
	}
	// Update drops a waiter that waited too long.
	c9 := &peers.Call{ID: 9}
	c.Send(t0.Add(ms(26)), c9)
	if rs := c.Update(t0.Add(ms(36.5))); len(rs) != 1 || rs[0].Decision.Verdict != peers.Deny {
		t.Fatalf("update releases %v", verdicts(rs))
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"rtt", func(c *Config) { c.RTT = 0 }},
		{"drop_delay", func(c *Config) { c.DropDelay = c.TargetDelay / 2 }},
		{"md", func(c *Config) { c.MD = 0 }},
		{"cores", func(c *Config) { c.Cores = 0 }},
		{"max_window", func(c *Config) { c.MaxWindow = 1 }},
		{"queue_limit", func(c *Config) { c.QueueLimit = 0 }},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.field+":") {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// The peer's client ids travel as gRPC metadata, which carries printable
// ASCII only (a non-ASCII id fails every call with INTERNAL).
func TestPeerClientIDIsMetadata(t *testing.T) {
	p := &Peer{Config: DefaultConfig()}
	c, err := p.Client("frontend", "rate")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Send(t0, &peers.Call{ID: 1})
	id := d.Meta[KeyClient]
	if id == "" || strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
		t.Errorf("client id %q: want printable ASCII", id)
	}
}
