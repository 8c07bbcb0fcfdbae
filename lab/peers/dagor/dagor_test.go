// SPDX-License-Identifier: Apache-2.0

package dagor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/internal/testclock"
	"github.com/sluicehq/sluice/lab/peers"
)

var t0 = testclock.T0

// small has 2 business × 4 user priorities: level = 4·(B−1) + U.
func small() Config {
	c := DefaultConfig()
	c.BusinessLevels, c.UserLevels, c.DefaultBusiness = 2, 4, 2
	return c
}

func prio(b, u int) *peers.Call {
	return &peers.Call{Method: "/m", Meta: peers.Metadata{KeyBusiness: fmt.Sprint(b), KeyUser: fmt.Sprint(u)}}
}

// window admits the calls of counts (level (B,U) → how many) and returns
// how many were admitted.
func window(t *testing.T, s *Server, at time.Time, counts map[[2]int]int) int {
	t.Helper()
	adm := 0
	for b := 1; b <= 2; b++ {
		for u := 1; u <= 4; u++ {
			for range counts[[2]int{b, u}] {
				if s.Admit(at, prio(b, u)).Admit {
					adm++
				}
			}
		}
	}
	return adm
}

func wantLevel(t *testing.T, s *Server, b, u int) {
	t.Helper()
	if gb, gu := s.Level(); gb != b || gu != u {
		t.Fatalf("level (%d,%d), want (%d,%d)", gb, gu, b, u)
	}
}

// The admission level's walk, by hand from the histogram: overload sheds
// to (1 − α)·N_adm (α = 5 %) by whole levels, lowest first; otherwise it
// opens to (1 + β)·N_adm (β = 1 %), at least one call more.
func TestLevelTimeline(t *testing.T) {
	s, err := NewServer(small(), false)
	if err != nil {
		t.Fatal(err)
	}
	wantLevel(t, s, 2, 4)
	mix := map[[2]int]int{{1, 1}: 10, {1, 2}: 10, {2, 1}: 20, {2, 4}: 60}
	// Window 1: all 100 admitted; mean queueing 30 ms > 20 ms.
	// N_exp = 95; prefix(8) = 100 > 95 → drop level 8 (60): prefix 40 ≤ 95
	// at level 7 = (2,3).
	if adm := window(t, s, t0, mix); adm != 100 {
		t.Fatalf("window 1 admitted %d", adm)
	}
	s.Update(t0.Add(500*time.Millisecond), peers.Signal{Mean: 30 * time.Millisecond, Began: 50})
	wantLevel(t, s, 2, 4) // the window is not over
	s.Update(t0.Add(time.Second), peers.Signal{Mean: 30 * time.Millisecond, Began: 50})
	if m, over := s.LastWindow(); m != 30*time.Millisecond || !over {
		t.Fatalf("window 1: mean %s, overloaded %v", m, over)
	}
	wantLevel(t, s, 2, 3)
	// Window 2: level (2,4) refused with the level in the reply; 40
	// admitted; mean 10 ms: N_exp = max(40.4, 41) = 41 > prefix(7) = 40
	// → level 8 (prefix 100): open again.
	a := s.Admit(t0.Add(1100*time.Millisecond), prio(2, 4))
	if a.Admit || a.Reply[KeyLevelB] != "2" || a.Reply[KeyLevelU] != "3" {
		t.Fatalf("(2,4) under level (2,3): %+v", a)
	}
	mix2 := map[[2]int]int{{1, 1}: 10, {1, 2}: 10, {2, 1}: 20, {2, 4}: 59}
	if adm := window(t, s, t0.Add(1100*time.Millisecond), mix2); adm != 40 {
		t.Fatalf("window 2 admitted %d", adm)
	}
	s.Update(t0.Add(2*time.Second), peers.Signal{Mean: 10 * time.Millisecond, Began: 40})
	wantLevel(t, s, 2, 4)
	// Window 3: 50 at (1,1), 30 at (1,2), 20 at (1,3); overloaded:
	// N_exp = 95; walking down from level 8 over empty levels to 3,
	// prefix 100 > 95 → drop (1,3): prefix 80 at level 2 = (1,2).
	window(t, s, t0.Add(2100*time.Millisecond), map[[2]int]int{{1, 1}: 50, {1, 2}: 30, {1, 3}: 20})
	s.Update(t0.Add(3*time.Second), peers.Signal{Mean: 21 * time.Millisecond, Began: 100})
	wantLevel(t, s, 1, 2)
	for _, tc := range []struct {
		b, u  int
		admit bool
	}{{1, 1, true}, {1, 2, true}, {1, 3, false}, {2, 1, false}} {
		if got := s.Admit(t0.Add(3100*time.Millisecond), prio(tc.b, tc.u)).Admit; got != tc.admit {
			t.Errorf("(%d,%d) under level (1,2): admitted %v", tc.b, tc.u, got)
		}
	}
}

// A window also ends after window_requests calls, at the next update.
func TestWindowEndsByRequests(t *testing.T) {
	c := small()
	c.WindowRequests = 10
	s, err := NewServer(c, false)
	if err != nil {
		t.Fatal(err)
	}
	window(t, s, t0, map[[2]int]int{{1, 1}: 5, {2, 4}: 5})
	// 10 calls, mean 25 ms: N_exp = 9.5; drop (2,4): prefix 5.
	s.Update(t0.Add(10*time.Millisecond), peers.Signal{Mean: 25 * time.Millisecond, Began: 10})
	wantLevel(t, s, 2, 3)
	if n, _ := s.Window(); n != 0 {
		t.Fatalf("window not reset: %d calls", n)
	}
}

// A window with no queueing signal is not overloaded; the threshold is
// compared in nanoseconds (the port rounds it to milliseconds).
func TestThresholdExact(t *testing.T) {
	c := small()
	c.QueueThreshold = 20*time.Millisecond + 400*time.Microsecond
	s, _ := NewServer(c, false)
	window(t, s, t0, map[[2]int]int{{2, 4}: 10, {1, 1}: 10})
	s.Update(t0.Add(time.Second), peers.Signal{Mean: 20*time.Millisecond + 300*time.Microsecond, Began: 20})
	wantLevel(t, s, 2, 4)
	window(t, s, t0.Add(time.Second), map[[2]int]int{{2, 4}: 10, {1, 1}: 10})
	s.Update(t0.Add(2*time.Second), peers.Signal{Mean: 20*time.Millisecond + 500*time.Microsecond, Began: 20})
	wantLevel(t, s, 2, 3)
}

// The entry assigns B by API and U by hashing the user with an hourly
// salt, and forwards them; without a user, U is the lowest; downstream,
// missing priorities are the lowest, not an error.
func TestEntryAssignsPriorities(t *testing.T) {
	c := DefaultConfig()
	c.Business = map[string]int{"/pay": 1}
	s, _ := NewServer(c, true)
	a := s.Admit(t0, &peers.Call{Method: "/pay", User: "alice"})
	u := c.UserPriority(t0, "alice")
	if !a.Admit || a.Forward[KeyBusiness] != "1" || a.Forward[KeyUser] != fmt.Sprint(u) {
		t.Fatalf("entry: %+v, want B 1, U %d", a, u)
	}
	if a := s.Admit(t0, &peers.Call{Method: "/browse"}); a.Forward[KeyBusiness] != "64" || a.Forward[KeyUser] != "128" {
		t.Fatalf("unknown API, no user: %+v", a)
	}
	changed := 0
	for i := range 100 {
		user := fmt.Sprint("user", i)
		p := c.UserPriority(t0, user)
		if p < 1 || p > 128 {
			t.Fatalf("priority %d", p)
		}
		if p != c.UserPriority(t0.Add(59*time.Minute), user) {
			t.Fatal("priority changed within the hour")
		}
		if p != c.UserPriority(t0.Add(time.Hour), user) {
			changed++
		}
	}
	if changed < 90 {
		t.Fatalf("only %d of 100 users changed priority with the salt", changed)
	}
	d, _ := NewServer(c, false)
	if a := d.Admit(t0, &peers.Call{Method: "/x"}); !a.Admit || a.Forward[KeyBusiness] != "64" {
		t.Fatalf("downstream call without priorities: %+v", a)
	}
}

// A caller sheds locally what the downstream's level would refuse, and
// forgets a level not heard for level_ttl.
func TestClientLocalShedding(t *testing.T) {
	c, err := NewClient(small())
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Send(t0, &peers.Call{Method: "/m"}); d.Verdict != peers.Send {
		t.Fatalf("end user: %+v", d)
	}
	c.Received(t0, prio(1, 1), peers.Metadata{KeyLevelB: "1", KeyLevelU: "2"}, peers.OK)
	if d := c.Send(t0, prio(1, 3)); d.Verdict != peers.Deny {
		t.Fatalf("(1,3) under (1,2): %+v", d)
	}
	if d := c.Send(t0, prio(1, 2)); d.Verdict != peers.Send || d.Meta[KeyBusiness] != "1" || d.Meta[KeyUser] != "2" {
		t.Fatalf("(1,2) under (1,2): %+v", d)
	}
	if d := c.Send(t0.Add(time.Second), prio(2, 4)); d.Verdict != peers.Send {
		t.Fatalf("after level_ttl: %+v", d)
	}
	if _, _, ok := c.Level("/m"); ok {
		t.Fatal("level kept past level_ttl")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"window", func(c *Config) { c.Window = time.Millisecond }},
		{"alpha", func(c *Config) { c.Alpha = 1 }},
		{"default_business", func(c *Config) { c.DefaultBusiness = 65 }},
		{"business./pay", func(c *Config) { c.Business = map[string]int{"/pay": 0} }},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.field+":") {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
}
