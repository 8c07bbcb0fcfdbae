// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/report"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// The hotel graph's capacity, and what it can serve in each scenario,
// worked by hand from its work per call (rate: search 4 ms, reserve 16
// ms; 80 % searches).
func TestHotelCapacity(t *testing.T) {
	c := DefaultHotel()
	g := HotelGraphSmall()
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	C := c.Capacity(g)
	if !near(C, 156.25) {
		t.Fatalf("C = %v, want 1/(0.8·4 ms + 0.2·16 ms) = 156.25", C)
	}
	cases := map[string]float64{
		// The mix is the same, the APIs bring rate equal work: C.
		HotelStep14: 156.25, HotelStep3: 156.25, HotelStep8: 156.25,
		// Every call to rate costs 3×.
		HotelDrop: 156.25 / 3,
		// The high class first (43.75 + 10.9375 req/s: 0.35 of rate),
		// the crowd the rest: 0.65 / 4 ms = 162.5.
		HotelCrowd: 43.75 + 10.9375 + 162.5,
		// Reserve costs 160 ms at rate: max-min fair CPU time at rate
		// serves all 87.5 searches (0.35 s/s), reserve the rest: 0.65 /
		// 0.16 = 4.0625.
		HotelCost10: 87.5 + 4.0625,
		HotelCost50: 87.5 + 0.65/0.8,
	}
	for scn, want := range cases {
		s, st, err := c.ScenarioStreams(g, scn)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.CapacityAt(g, s, st, s.Start+time.Second); !near(got, want) {
			t.Errorf("%s: capacity during the event %v, want %v", scn, got, want)
		}
		if got := c.CapacityAt(g, s, st, 0); !near(got, 0.7*C) {
			t.Errorf("%s: capacity before the event %v, want what is offered, %v", scn, got, 0.7*C)
		}
	}
}

// The streams: the high class's APIs share the load by their shares, a
// step multiplies them to the step's multiple of C, the crowd only the
// low class.
func TestHotelStreams(t *testing.T) {
	c := DefaultHotel()
	g := HotelGraphSmall()
	C := c.Capacity(g)
	s, _ := c.Scenario(HotelStep8)
	st, err := c.Streams(g, s)
	if err != nil || len(st) != 2 {
		t.Fatalf("step-8: %d streams, %v; want search and reserve", len(st), err)
	}
	total := func(at time.Duration) float64 {
		sum := 0.0
		for _, x := range st {
			sum += x.Rate.At(at)
		}
		return sum
	}
	if !near(total(0), 0.7*C) || !near(total(s.Start), 8*C) || !near(total(s.End), 0.7*C) {
		t.Errorf("step-8: %v, %v, %v req/s before, during, after; want 0.7, 8 and 0.7 × %v", total(0), total(s.Start), total(s.End), C)
	}
	s, _ = c.Scenario(HotelCrowd)
	st, _ = c.Streams(g, s)
	if len(st) != 3 || st[2].Class != 1 || !near(st[2].Rate.At(s.Start), 12*0.35*C) || !near(st[0].Rate.At(s.Start), 0.8*0.35*C) {
		t.Errorf("crowd: streams %+v", st)
	}
	if s.End-s.Start != c.CrowdLen || s.Stop-s.End != c.After {
		t.Errorf("crowd: phases %v", s.Phases())
	}
	if _, err := c.Scenario("step-9"); err == nil || !strings.Contains(err.Error(), "step-1.4") {
		t.Errorf("an unknown scenario: %v", err)
	}
}

// The scaled graph has the services and instances asked for, its shared
// rates as the bottleneck, and the hotel's work per request.
func TestHotelScaled(t *testing.T) {
	g, err := HotelGraphScaled(100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Services) != 100 || g.Instances() != 1000 {
		t.Fatalf("%d services, %d instances", len(g.Services), g.Instances())
	}
	c := DefaultHotel()
	C := c.Capacity(g)
	// The rates hold about half the instances (6.4 ms of the 12.7 ms of
	// weighted work a request brings), one worker each.
	if C < 60000 || C > 90000 {
		t.Errorf("C = %v, want about 500 rate instances / 6.4 ms", C)
	}
	if _, err := HotelGraphScaled(4, 1000); err == nil {
		t.Error("4 services accepted")
	}
	if _, err := HotelGraphScaled(100, 99); err == nil {
		t.Error("fewer instances than services accepted")
	}
	paths := g.Paths()
	if len(paths) != len(g.APIs) || len(paths[0]) != 4 {
		t.Errorf("search's path %v", paths[0])
	}
}

// The recovery is the first second of a phase from which every second
// to its end reaches 95 % of min(offered, capacity).
func TestHotelRecovery(t *testing.T) {
	c := DefaultHotel()
	c.Scenarios, c.Rows = []string{HotelDrop}, []string{HotelSluice}
	c.Warm, c.DropLen, c.After = 4*time.Second, 4*time.Second, 4*time.Second
	g := HotelGraphSmall()
	run := &HotelRun{Scenario: HotelDrop, Row: HotelSluice}
	// 100 requests a second, answered in 10 ms, except: in the drop's
	// first second none, in its second only 40, then 60 (capacity 52);
	// after it, 50 in its first second and all after.
	good := []int{100, 100, 100, 100, 0, 40, 60, 60, 50, 100, 100, 100}
	for sec, n := range good {
		for i := range 100 {
			at := time.Duration(sec)*time.Second + time.Duration(i)*10*time.Millisecond
			u := HotelUser{API: 0, Sent: at, Done: at + 10*time.Millisecond}
			if i >= n {
				u.Code = HotelRejected
			}
			run.Users = append(run.Users, u)
		}
	}
	res := NewResult("graph-hotel", Sim, 1)
	if err := HotelResult(res, c, g, []*HotelRun{run}); err != nil {
		t.Fatal(err)
	}
	get := func(base string) float64 { return res.Summary.Metric(HotelMetric(base, HotelDrop, HotelSluice)) }
	if v := get("recovery_start_s"); v != 2 {
		t.Errorf("recovery after the drop starts: %v s, want 2 (40 < 0.95·52.08 in its second second)", v)
	}
	if v := get("recovery_end_s"); v != 1 {
		t.Errorf("recovery after the drop ends: %v s, want 1", v)
	}
	if v := get("goodput_event_rps"); !near(v, 40) {
		t.Errorf("goodput during the drop %v, want (0+40+60+60)/4", v)
	}
	// The checks name the scenario and hold the recovery to 1 s.
	var claims []string
	for _, ch := range res.Checks {
		claims = append(claims, ch.Claim)
		if strings.Contains(ch.Claim, "after the event starts") && ch.Pass {
			t.Error("a recovery of 2 s passed")
		}
	}
	if len(res.Checks) != 4 || !slices.ContainsFunc(claims, func(c string) bool { return strings.HasPrefix(c, "drop: ") }) {
		t.Errorf("checks %q", claims)
	}
}

// The goal against the peers is made only when a peer ran, against the
// best one.
func TestHotelChecksBestPeer(t *testing.T) {
	c := DefaultHotel()
	c.Scenarios = []string{HotelStep3}
	s := report.NewSummary("graph-hotel", "sim", 1)
	s.Set(HotelMetric("users", HotelStep3, HotelSluice), 1)
	s.Set(HotelMetric("storm_goodput_rps", HotelStep3, HotelSluice), 130)
	if cs := HotelChecks(s, c); len(cs) != 4 {
		t.Fatalf("without peers: %d checks, want 4", len(cs))
	}
	s.Set(HotelMetric("storm_goodput_rps", HotelStep3, "dagor"), 90)
	s.Set(HotelMetric("storm_goodput_rps", HotelStep3, "breakwater"), 100)
	cs := HotelChecks(s, c)
	if len(cs) != 6 || !strings.Contains(cs[0].Claim, "breakwater") || !cs[0].Pass || cs[1].Pass {
		t.Errorf("with peers: %+v", cs[:2])
	}
}

// A peer's point becomes its configuration with the graph's deployment
// facts; every peer's grid starts its search.
func TestHotelPeerConfig(t *testing.T) {
	g := HotelGraphSmall()
	for _, p := range HotelPeers {
		space, err := HotelPeerSpace(p)
		if err != nil || len(space) < 4 {
			t.Fatalf("%s: %v", p, err)
		}
		pt := map[string]float64{}
		for _, d := range space {
			pt[d.Name] = d.Values[0]
		}
		if _, err := HotelPeerConfig(p, g, pt); err != nil {
			t.Errorf("%s at %v: %v", p, pt, err)
		}
	}
	if _, err := HotelPeerConfig("sluice", g, nil); err == nil {
		t.Error("an unknown peer accepted")
	}
	c := DefaultHotel()
	c.PeerParams = "defaults"
	if p, ok := c.PeerPoint(HotelStep3, "dagor"); !ok || len(p) != 0 || c.HotelRowParams(HotelStep3, "dagor") != "paper's values" {
		t.Errorf("defaults: %v %v", p, ok)
	}
}

// The goodput bound, worked by hand: rate (1 s of CPU per second) is the
// bottleneck, a search costs it 4 ms and a reserve 16 ms, so the bound
// serves searches first. Before the event all that is offered fits
// (0.7·C); during it, e.g. step-1.4 serves all 175 searches (0.7 s/s)
// and 0.3/0.016 = 18.75 reserves, step-3 250 searches and no reserve.
func TestHotelGoodputBound(t *testing.T) {
	c := DefaultHotel()
	g := HotelGraphSmall()
	cases := map[string]float64{
		HotelStep14: 175 + 18.75, HotelStep3: 250, HotelStep8: 250,
		// Every call to rate costs 3×: 1/12 ms of searches.
		HotelDrop: 1000.0 / 12,
		// The crowd is searches (prefetch, 4 ms at rate) beside the
		// high class's: 250 of them, no reserve.
		HotelCrowd: 250,
		// All 87.5 searches, then reserves at 160 ms (800 ms) at rate.
		HotelCost10: 87.5 + 0.65/0.16, HotelCost50: 87.5 + 0.65/0.8,
	}
	for scn, want := range cases {
		s, st, err := c.ScenarioStreams(g, scn)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.GoodputBoundAt(g, s, st, s.Start+time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s: bound during the event %v, want %v", scn, got, want)
		}
		if got, err := c.GoodputBoundAt(g, s, st, 0); err != nil || math.Abs(got-0.7*156.25) > 1e-6 {
			t.Errorf("%s: bound before the event %v (%v), want what is offered, %v", scn, got, err, 0.7*156.25)
		}
		// Never below the fair share's capacity, which is one of the
		// allocations the bound maximises over.
		if capa := c.CapacityAt(g, s, st, s.Start+time.Second); got < capa-1e-6 {
			t.Errorf("%s: bound %v below the fair capacity %v", scn, got, capa)
		}
	}
	// Over the storm window: step-3's 15 s at 250 and 10 s after at
	// what is offered (109.375).
	s, st, err := c.ScenarioStreams(g, HotelStep3)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.stormBound(g, s, st); err != nil || math.Abs(got-(15*250+10*109.375)/25) > 1e-6 {
		t.Errorf("step-3: storm bound %v (%v), want %v", got, err, (15*250+10*109.375)/25)
	}
}
