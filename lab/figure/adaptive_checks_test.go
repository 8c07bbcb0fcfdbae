// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lab/report"
)

// The crowd's first second is held to the bar where both peers
// ran: admitted p99 within the objective, and answers within it ≥ 0.97 ×
// the best peer's in that second (not 0.8 × a nominal capacity that a
// heavy-tailed service misses under any control); without peers, to 0.8 ×
// capacity.
func TestAdaptiveChecksFirstSecond(t *testing.T) {
	phases := []AdaptivePhase{{Name: "a", Title: "(a)"}}
	type peer struct {
		row         string
		good, first float64
	}
	table := []peer{{"nginx", 22, 215}, {"haproxy", 317, 268}}
	build := func(peers bool, autoFirst, autoP99First float64) *report.Summary {
		s := report.NewSummary("adaptive", "live", 1)
		s.Set(AdaptiveMetric("goodput_rps", "auto", "a"), 330)
		s.Set(AdaptiveMetric("p99_ms", "auto", "a"), 150)
		s.Set(AdaptiveMetric("goodput_first_s_rps", "auto", "a"), autoFirst)
		s.Set(AdaptiveMetric("p99_first_s_ms", "auto", "a"), autoP99First)
		if peers {
			for _, r := range table {
				s.Set(AdaptiveMetric("goodput_rps", r.row, "a"), r.good)
				s.Set(AdaptiveMetric("goodput_first_s_rps", r.row, "a"), r.first)
			}
		}
		return s
	}
	verdict := func(cs []Check, claim string) (pass, found bool) {
		for _, c := range cs {
			if strings.Contains(c.Claim, claim) {
				return c.Pass, true
			}
		}
		return false, false
	}
	for _, tc := range []struct {
		name            string
		peers           bool
		first, p99First float64
		onset, p99      bool
	}{
		{"peers, auto at 0.98× HAProxy's first second", true, 263, 240, true, true},
		{"peers, auto at 0.95× HAProxy's first second", true, 255, 240, false, true},
		{"peers, first second over the objective", true, 272, 260, true, false},
		{"no peers, 0.8 × capacity", false, 320, 100, true, true},
		{"no peers, below 0.8 × capacity", false, 300, 100, false, true},
	} {
		cs := AdaptiveChecks(build(tc.peers, tc.first, tc.p99First), phases, 250, 400)
		onset, ok := verdict(cs, "no onset collapse")
		if !ok || onset != tc.onset {
			t.Errorf("%s: onset check %v (found %v), want %v", tc.name, onset, ok, tc.onset)
		}
		p99, ok := verdict(cs, "p99 in the crowd's first second")
		if !ok || p99 != tc.p99 {
			t.Errorf("%s: first-second p99 check %v (found %v), want %v", tc.name, p99, ok, tc.p99)
		}
	}
	// The first second is held to the peer that is best over the phase,
	// not to one whose deep queue answered more of that second on the way
	// to a collapse (nginx 403 in its first second, 116.5 over the phase).
	table = []peer{{"nginx", 116.5, 403}, {"haproxy", 356.6, 359}}
	cs := AdaptiveChecks(build(true, 363, 80), phases, 250, 400)
	if onset, ok := verdict(cs, "no onset collapse"); !ok || !onset {
		t.Errorf("auto at 363 against HAProxy's 359, the best peer over the phase: onset check %v (found %v), want met", onset, ok)
	}
}

// After a change, auto settles in 2 s, or where both peers ran and the
// best of them took longer (a noisy service), no later than it.
func TestAdaptiveChecksSettle(t *testing.T) {
	phases := []AdaptivePhase{{Name: "a", Title: "(a)"}, {Name: "b", Title: "(b)"}}
	for _, tc := range []struct {
		name                 string
		peers                bool
		auto, haproxy, nginx float64
		pass                 bool
	}{
		{"no peers, 2 s", false, 2, 0, 0, true},
		{"no peers, 3 s", false, 3, 0, 0, false},
		{"best peer at 0 s, auto 2 s", true, 2, 0, 9, true},
		{"best peer at 0 s, auto 3 s", true, 3, 0, 0, false},
		{"best peer at 5 s, auto 5 s", true, 5, 5, 0, true},
		{"best peer at 3 s, auto 4 s", true, 4, 3, 0, false},
	} {
		s := report.NewSummary("adaptive", "live", 1)
		for _, ph := range []string{"a", "b"} {
			s.Set(AdaptiveMetric("goodput_rps", "auto", ph), 200)
			s.Set(AdaptiveMetric("p99_ms", "auto", ph), 200)
		}
		s.Set(AdaptiveMetric("goodput_first_s_rps", "auto", "a"), 400)
		s.Set(AdaptiveMetric("settle_s", "auto", "b"), tc.auto)
		if tc.peers {
			for _, ph := range []string{"a", "b"} {
				s.Set(AdaptiveMetric("goodput_rps", "haproxy", ph), 200) // the best
				s.Set(AdaptiveMetric("goodput_rps", "nginx", ph), 5)
			}
			s.Set(AdaptiveMetric("settle_s", "haproxy", "b"), tc.haproxy)
			s.Set(AdaptiveMetric("settle_s", "nginx", "b"), tc.nginx)
		}
		var found bool
		for _, c := range AdaptiveChecks(s, phases, 250, 400) {
			if strings.Contains(c.Claim, "steady goodput") {
				found = true
				if c.Pass != tc.pass {
					t.Errorf("%s: %s: %v, want %v", tc.name, c.Measured, c.Pass, tc.pass)
				}
			}
		}
		if !found {
			t.Errorf("%s: no settle check", tc.name)
		}
	}
}

// In the simulator auto is held to the peers' stand-ins, a static rate and
// a static concurrency limit, the better of them over the phase.
func TestAdaptiveChecksSimulatedPeers(t *testing.T) {
	phases := []AdaptivePhase{{Name: "a", Title: "(a)"}, {Name: "b", Title: "(b)"}}
	build := func(auto float64) *report.Summary {
		s := report.NewSummary("adaptive", "sim", 1)
		for _, ph := range []string{"a", "b"} {
			s.Set(AdaptiveMetric("goodput_rps", "auto", ph), auto)
			s.Set(AdaptiveMetric("p99_ms", "auto", ph), 200)
			s.Set(AdaptiveMetric("goodput_rps", "static-rate", ph), 150)
			s.Set(AdaptiveMetric("goodput_rps", "static-concurrency", ph), 200)
			s.Set(AdaptiveMetric("settle_s", "static-concurrency", ph), 4)
		}
		s.Set(AdaptiveMetric("goodput_first_s_rps", "auto", "a"), 380)
		s.Set(AdaptiveMetric("goodput_first_s_rps", "static-concurrency", "a"), 400)
		s.Set(AdaptiveMetric("settle_s", "auto", "b"), 3)
		return s
	}
	for _, tc := range []struct {
		auto float64
		pass bool
	}{{195, true}, {190, false}} {
		s := build(tc.auto)
		cs := AdaptiveChecks(s, phases, 250, 400)
		var n int
		for _, c := range cs {
			switch {
			case strings.Contains(c.Claim, "goodput within the SLO is ≥ 0.97"):
				n++
				if !strings.Contains(c.Claim, "the simulator's static rate and concurrency limits") || c.Pass != tc.pass {
					t.Errorf("auto %v: %q pass %v, want %v", tc.auto, c.Claim, c.Pass, tc.pass)
				}
			case strings.Contains(c.Claim, "no onset collapse"):
				// 380 < 0.97 × 400: held to the best peer, not 0.8 × capacity.
				if c.Pass || !strings.Contains(c.Claim, "0.97 × the best hand-tuned peer") {
					t.Errorf("onset: %q pass %v, want the peer's bar, missed", c.Claim, c.Pass)
				}
			case strings.Contains(c.Claim, "steady goodput"):
				// static-concurrency, the better peer, settled in 4 s.
				if !c.Pass || !strings.Contains(c.Claim, "no later than the best hand-tuned peer") {
					t.Errorf("settle: %q pass %v, want met against the peer's 4 s", c.Claim, c.Pass)
				}
			}
		}
		if n != 2 {
			t.Errorf("auto %v: %d goodput checks, want one per phase", tc.auto, n)
		}
		if got := s.Metric("goodput_rps_best_static_b"); got != 200 {
			t.Errorf("goodput_rps_best_static_b = %v, want static-concurrency's 200", got)
		}
	}
}
