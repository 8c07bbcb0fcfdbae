// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/tune"
)

// shortChain is graph with a 4 s warm-up, a 4 s trigger and 6 s after.
func shortChain(t *testing.T) figure.GraphParams {
	t.Helper()
	c, err := ChainParams(false, []string{"warm=4s", "after=6s", "trigger_len=4s"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Settings that act on the chain's 20 ms requests (the papers' defaults
// are for µs RPCs, or act too slowly to show in 4 s).
var acting = map[string]tune.Point{
	"breakwater": {"target_delay_ms": 20, "rtt_ms": 2, "client_delay_ms": 500},
	"dagor":      {"queue_threshold_ms": 5, "window_ms": 100, "alpha": 0.25},
	"rajomon":    {"latency_threshold_ms": 10, "price_step": 5, "token_step": 5},
	"topfull":    {"slo_ms": 200, "interval_ms": 500, "decrease": 0.2},
}

type rowStats struct {
	refused, good, users int
	backendInTrigger     int
	goodInTrigger        int
}

func statsOf(c figure.GraphParams, run *figure.GraphRun) rowStats {
	var s rowStats
	for _, u := range run.Users {
		s.users++
		if u.Status == 503 {
			s.refused++
		}
		if u.Good(c.Deadline) {
			s.good++
			if u.Sent >= c.EventStart() && u.Sent < c.EventEnd() {
				s.goodInTrigger++
			}
		}
	}
	for _, k := range run.Calls {
		if k.Arrival >= c.EventStart() && k.Arrival < c.EventEnd() {
			s.backendInTrigger++
		}
	}
	return s
}

// Every peer runs on the chain, deterministically; without control
// nothing is refused and the storm's backlog ruins the trigger; every
// peer refuses some calls and answers more of them in time.
func TestGraphPeersRun(t *testing.T) {
	c := shortChain(t)
	run, err := RunGraphPeer(7, c, nil, GraphPeerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	none := statsOf(c, run)
	// 140 req/s for 14 s, evenly spaced.
	if none.users < 1950 || none.users > 1970 || none.refused != 0 {
		t.Fatalf("none: %+v", none)
	}
	for _, name := range PeerNames[1:] {
		p, err := NewChainPeer(name, c, acting[name])
		if err != nil {
			t.Fatal(err)
		}
		run, err := RunGraphPeer(7, c, p, GraphPeerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if run.Row != name {
			t.Fatalf("row %q", run.Row)
		}
		s := statsOf(c, run)
		if s.refused == 0 || s.good <= none.good || s.users != none.users {
			t.Errorf("%s: %+v; none: %+v", name, s, none)
		}
		p2, _ := NewChainPeer(name, c, acting[name])
		again, err := RunGraphPeer(7, c, p2, GraphPeerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(run.Users, again.Users) || !slices.Equal(run.Calls, again.Calls) {
			t.Errorf("%s: two runs with one seed differ", name)
		}
	}
}

// DAGOR's business priorities in the crowd: the high class keeps far more
// of its requests than the low one. (Not all of them: when tier 2 sheds
// locally everything the backend's level refuses, the backend's window
// sees no demand above its level and reopens it entirely, and the crowd
// floods it again for a window; docs/algorithms.md.)
func TestGraphPeersCrowdPriorities(t *testing.T) {
	c, err := ChainParams(true, []string{"warm=4s", "crowd_len=8s", "after=2s"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewChainPeer("dagor", c, acting["dagor"])
	if err != nil {
		t.Fatal(err)
	}
	run, err := RunGraphPeer(3, c, p, GraphPeerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sent, good [2]float64
	for _, u := range run.Users {
		if u.Sent >= c.EventStart() && u.Sent < c.EventEnd() {
			sent[u.Class]++
			if u.Good(c.Deadline) {
				good[u.Class]++
			}
		}
	}
	hi, lo := good[0]/sent[0], good[1]/sent[1]
	if !(hi > 0.5 && lo < hi/4) {
		t.Fatalf("during the crowd: high %.3f, low %.3f of their requests answered in time", hi, lo)
	}
}

// The storm score is the mean goodput per second over the event and the
// StormSettle after it, by hand on a synthetic run.
func TestStormGoodput(t *testing.T) {
	c, err := ChainParams(false, []string{"warm=2s", "trigger_len=2s", "after=10s", "rows=naive"})
	if err != nil {
		t.Fatal(err)
	}
	run := &figure.GraphRun{Row: "x"}
	add := func(sec float64, n int, status int) {
		for range n {
			s := time.Duration(sec * float64(time.Second))
			run.Users = append(run.Users, figure.GraphUser{Sent: s, Done: s + 10*time.Millisecond, Status: status})
		}
	}
	add(0.5, 100, 200) // before: not counted
	add(2.5, 30, 200)  // trigger
	add(2.5, 7, 503)
	add(5.5, 60, 200)
	add(13.5, 12, 200) // the last second of the settle window
	res := figure.NewResult("graph", figure.Sim, 1)
	if err := figure.GraphResult(res, c, []*figure.GraphRun{run}); err != nil {
		t.Fatal(err)
	}
	got, err := StormGoodput(res, c, "x")
	if err != nil {
		t.Fatal(err)
	}
	// Seconds 2…13 (12 of them): (30 + 60 + 12) / 12.
	if want := 102.0 / 12; math.Abs(got-want) > 1e-9 {
		t.Fatalf("score %v, want %v", got, want)
	}
}

// Every point of every peer's grid builds a valid peer.
func TestPeerSpacesBuild(t *testing.T) {
	c := figure.DefaultGraph(true)
	for _, name := range PeerNames {
		space, err := PeerSpace(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "none" {
			if space != nil {
				t.Fatal("none has parameters")
			}
			continue
		}
		if err := tune.Validate(space); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range tune.Grid(space) {
			if _, err := NewChainPeer(name, c, p); err != nil {
				t.Fatalf("%s at %v: %v", name, p, err)
			}
		}
	}
	if _, err := PeerSpace("sluice"); err == nil {
		t.Fatal("an unknown peer has a space")
	}
}

// Sluice's row is scored from the same records by the same code.
func TestSluiceResultScores(t *testing.T) {
	sets := []string{"warm=4s", "trigger_len=4s", "after=6s"}
	score, m, err := SluiceResult(false, sets, []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ChainParams(false, sets)
	none, _, err := PeerResult("none", c, nil, []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	if !(score > 2*none) || m["goodput_before_rps"] < 130 {
		t.Fatalf("sluice %v (%v), none %v", score, m, none)
	}
}

// In graph-crowd the score is the storm's goodput times the high class's
// success during the crowd.
func TestStormScoreCrowd(t *testing.T) {
	c, err := ChainParams(true, []string{"warm=2s", "crowd_len=2s", "after=10s", "rows=proxy"})
	if err != nil {
		t.Fatal(err)
	}
	run := &figure.GraphRun{Row: "x"}
	add := func(class int, sec float64, n, status int) {
		for range n {
			s := time.Duration(sec * float64(time.Second))
			run.Users = append(run.Users, figure.GraphUser{Class: class, Sent: s, Done: s + time.Millisecond, Status: status})
		}
	}
	add(0, 2.5, 30, 200) // high, during the crowd: 30 of 40 answered
	add(0, 2.5, 10, 503)
	add(1, 2.5, 90, 200)
	res := figure.NewResult("graph-crowd", figure.Sim, 1)
	if err := figure.GraphResult(res, c, []*figure.GraphRun{run}); err != nil {
		t.Fatal(err)
	}
	g, _ := StormGoodput(res, c, "x")
	s, err := StormScore(res, c, "x")
	if err != nil {
		t.Fatal(err)
	}
	if want := 120.0 / 12; math.Abs(g-want) > 1e-9 || math.Abs(s-0.75*g) > 1e-9 {
		t.Fatalf("goodput %v (want %v), score %v (want ×0.75)", g, want, s)
	}
}
