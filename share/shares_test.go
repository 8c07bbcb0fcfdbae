// SPDX-License-Identifier: Apache-2.0

package share

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// testConfig is B = 1000 B/s shared by a, b, c, d with 10/20/30/40 %
// (b_i = 100, 200, 300, 400 B/s), α = 0.2, Â₀ = B, others with share 0.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.TotalBandwidth = 1000
	for i, n := range []string{"a", "b", "c", "d"} {
		cfg.Clients = append(cfg.Clients, ClientConfig{Name: n, Share: float64(10 * (i + 1))})
	}
	return cfg
}

func mustNew(t testing.TB, cfg Config) *Shares {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func id(t testing.TB, s *Shares, name string) ClientID {
	t.Helper()
	c, ok := s.Lookup(name)
	if !ok {
		t.Fatalf("no client %q", name)
	}
	return c
}

// setAvg makes client name active with avg exactly v: from avg 0, one
// sample of 5v bytes in 1 s gives avg = 0.2·5v = v (α = 0.2).
func setAvg(t testing.TB, s *Shares, name string, v float64) {
	t.Helper()
	c := id(t, s, name)
	if got := s.Average(c); got != 0 {
		t.Fatalf("setAvg(%s): avg is already %g", name, got)
	}
	r, err := s.Begin(t0, c)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	s.Done(t0, c, int64(math.Round(5*v)), time.Second)
	if got := s.Average(c); math.Abs(got-v) > 1e-9 {
		t.Fatalf("setAvg(%s): avg = %g, want %g", name, got, v)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestAvailableAndDelayHandComputed(t *testing.T) {
	type want struct {
		client string
		d      float64 // d_i
		delay  float64 // seconds for a 1000-byte reply, Â = 1000
	}
	cases := []struct {
		name  string
		avgs  map[string]float64 // active clients and their averages
		unsat bool
		want  []want
	}{
		{
			// a is active and below its allocation (50 < 100): unsatisfied.
			// d_a = 2·b_a − avg_a = 200 − 50 = 150;
			// delay = (1/150 − 1/1000)·1000 = 6.6667 − 1 = 5.6667 s.
			// d is over its allocation (500 ≥ 400): d_d = b_d = 400;
			// delay = (1/400 − 1/1000)·1000 = 2.5 − 1 = 1.5 s.
			name: "unsatisfied: avg<b gets 2b-avg, avg>=b gets b",
			avgs: map[string]float64{"a": 50, "d": 500}, unsat: true,
			want: []want{{"a", 150, 1000.0/150 - 1}, {"d", 400, 1.5}},
		},
		{
			// All active clients at or over their allocation: a 150 ≥ 100,
			// b 250 ≥ 200. Σ = 400, B − Σ = 600 > 0.
			// d_a = B − (Σ − avg_a) = 1000 − 250 = 750;
			// delay = (1/750 − 1/1000)·1000 = 1.3333 − 1 = 0.3333 s.
			// d_b = 1000 − 150 = 850; delay = 1000/850 − 1 = 0.17647 s.
			// An idle client (c, avg 0) takes nothing: d_c = 1000 − 400 = 600.
			name: "satisfied, B - sum > 0: the rest of B",
			avgs: map[string]float64{"a": 150, "b": 250},
			want: []want{{"a", 750, 1000.0/750 - 1}, {"b", 850, 1000.0/850 - 1}, {"c", 600, 1000.0/600 - 1}},
		},
		{
			// All four over their allocation, Σ = 150+250+350+450 = 1200,
			// B − Σ = −200 ≤ 0: d_i = b_i. d_c = 300;
			// delay = (1/300 − 1/1000)·1000 = 3.3333 − 1 = 2.3333 s.
			name: "satisfied, B - sum < 0: own allocation",
			avgs: map[string]float64{"a": 150, "b": 250, "c": 350, "d": 450},
			want: []want{{"c", 300, 1000.0/300 - 1}, {"a", 100, 9}},
		},
		{
			// Exactly at the allocations: no active avg_j < b_j (so
			// satisfied) and Σ = 1000, B − Σ = 0, not > 0: d_i = b_i.
			// d_a = 100; delay = (1/100 − 1/1000)·1000 = 10 − 1 = 9 s.
			name: "satisfied, B - sum = 0: own allocation",
			avgs: map[string]float64{"a": 100, "b": 200, "c": 300, "d": 400},
			want: []want{{"a", 100, 9}, {"d", 400, 1.5}},
		},
		{
			// Erratum (∏ printed, "exists" meant): only a is unsatisfied
			// (50 < 100), d is over (450 ≥ 400), b and c idle. Σ = 500.
			// With "exists": unsatisfied, d_d = b_d = 400, delay 1.5 s.
			// The printed product would need every client unsatisfied and
			// would give d_d = B − (Σ − avg_d) = 1000 − 50 = 950.
			name: "erratum: one unsatisfied active client suffices",
			avgs: map[string]float64{"a": 50, "d": 450}, unsat: true,
			want: []want{{"d", 400, 1.5}, {"a", 150, 1000.0/150 - 1}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, testConfig())
			for _, n := range []string{"a", "b", "c", "d"} {
				if v, ok := tc.avgs[n]; ok {
					setAvg(t, s, n, v)
				}
			}
			if got := s.Unsatisfied(); got != tc.unsat {
				t.Fatalf("Unsatisfied() = %v, want %v", got, tc.unsat)
			}
			for _, w := range tc.want {
				c := id(t, s, w.client)
				if got := s.Available(c); !near(got, w.d) {
					t.Errorf("d_%s = %g, want %g", w.client, got, w.d)
				}
				got, err := s.Delay(t0, c, 1000)
				if err != nil {
					t.Fatalf("Delay(%s): %v", w.client, err)
				}
				if math.Abs(got.Seconds()-w.delay) > 1e-9 {
					t.Errorf("delay_%s(1000 B) = %v, want %.9fs", w.client, got, w.delay)
				}
			}
		})
	}
}

func TestInactiveClientBelowAllocationDoesNotCount(t *testing.T) {
	// a has avg 50 < 100 but is not active after the manager step: only d
	// (450 ≥ 400) is active, so the state is satisfied and, with
	// Σ = 500 < B, d_d = 1000 − (500 − 450) = 950.
	s := mustNew(t, testConfig())
	setAvg(t, s, "a", 50)
	s.Tick(t0.Add(time.Second)) // a was active this period: no decay; flags cleared
	if got := s.Average(id(t, s, "a")); got != 50 {
		t.Fatalf("avg_a after a tick with activity = %g, want 50 (no decay)", got)
	}
	c := id(t, s, "d")
	r, err := s.Begin(t0, c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	s.Done(t0, c, 450*5, time.Second) // avg_d = 0.2·2250 = 450
	if s.Unsatisfied() {
		t.Fatal("unsatisfied with no active client below its allocation")
	}
	if got := s.Available(c); !near(got, 950) {
		t.Fatalf("d_d = %g, want 950", got)
	}
}

func TestZeroAvailableIsStandbyReject(t *testing.T) {
	// others has share 0 (the shares sum to 100), so b_o = 0. While a is
	// unsatisfied, d_o = b_o = 0 (avg_o = 0 is not < 0): rejected at Begin
	// and at Delay with RejectNoBandwidth, wrapping sluice.ErrRejected.
	s := mustNew(t, testConfig())
	o := s.Others()
	if s.Name(o) != OthersName || s.Allocation(o) != 0 {
		t.Fatalf("others = %q with b = %g", s.Name(o), s.Allocation(o))
	}
	// Before anything happens: satisfied, Σ = 0 < B: d_o = B = 1000 and the
	// delay is (1/1000 − 1/1000)·size = 0.
	if d, err := s.Delay(t0, o, 5000); err != nil || d != 0 {
		t.Fatalf("idle server: Delay(others) = %v, %v; want 0, nil", d, err)
	}
	setAvg(t, s, "a", 50)
	if got := s.Available(o); got != 0 {
		t.Fatalf("d_others = %g, want 0", got)
	}
	for _, call := range []struct {
		name string
		err  error
	}{
		{"Begin", func() error { _, err := s.Begin(t0, o); return err }()},
		{"Delay", func() error { _, err := s.Delay(t0, o, 1000); return err }()},
	} {
		var re *RejectError
		if !errors.As(call.err, &re) || re.Reason != RejectNoBandwidth || !errors.Is(call.err, sluice.ErrRejected) {
			t.Errorf("%s(others) = %v, want a RejectNoBandwidth wrapping sluice.ErrRejected", call.name, call.err)
		}
	}
	if got := s.Snapshot().Clients[o].Rejections["no_bandwidth"]; got != 2 {
		t.Errorf("no_bandwidth rejections = %d, want 2", got)
	}
	if got := s.Standby(o); got != 0 {
		t.Errorf("standby of a rejected client = %d, want 0", got)
	}
}

func TestNegativeDelayIsZero(t *testing.T) {
	// A 60 % client with avg 0 is unsatisfied: d = 2·600 − 0 = 1200 > Â =
	// 1000, so (1/1200 − 1/1000)·size < 0 and the delay is 0.
	cfg := testConfig()
	cfg.Clients = []ClientConfig{{Name: "big", Share: 60}}
	s := mustNew(t, cfg)
	c := id(t, s, "big")
	r, err := s.Begin(t0, c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if got := s.Available(c); got != 1200 {
		t.Fatalf("d = %g, want 1200", got)
	}
	if d, err := r.Delay(t0, 10000); err != nil || d != 0 {
		t.Fatalf("Delay = %v, %v; want 0, nil", d, err)
	}
}

func TestMaxDelayRejects(t *testing.T) {
	// d_a = 150 (see the unsatisfied case); 1600 bytes give
	// (1/150 − 1/1000)·1600 = 9.0667 s ≤ 10 s; 1800 bytes give 10.2 s > 10 s.
	s := mustNew(t, testConfig())
	setAvg(t, s, "a", 50)
	a := id(t, s, "a")
	if d, err := s.Delay(t0, a, 1600); err != nil || math.Abs(d.Seconds()-(1600.0/150-1.6)) > 1e-9 {
		t.Fatalf("Delay(1600) = %v, %v", d, err)
	}
	_, err := s.Delay(t0, a, 1800)
	var re *RejectError
	if !errors.As(err, &re) || re.Reason != RejectMaxDelay || !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("Delay(1800) error = %v, want RejectMaxDelay", err)
	}
	if math.Abs(re.Delay-(1800.0/150-1.8)) > 1e-9 || re.Available != 150 {
		t.Errorf("reject carries delay %g, d %g", re.Delay, re.Available)
	}
}

func TestStandbyLimit(t *testing.T) {
	cfg := testConfig()
	cfg.StandbyLimit = 2
	s := mustNew(t, cfg)
	a := id(t, s, "a")
	r1, err1 := s.Begin(t0, a)
	r2, err2 := s.Begin(t0, a)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := s.Begin(t0, a); !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("third Begin with limit 2: %v, want rejection", err)
	} else if re := (*RejectError)(nil); !errors.As(err, &re) || re.Reason != RejectStandby || re.Standby != 2 {
		t.Fatalf("third Begin: %v, want RejectStandby with 2 waiting", err)
	}
	// Another client is not affected.
	if r, err := s.Begin(t0, id(t, s, "b")); err != nil {
		t.Fatalf("Begin(b): %v", err)
	} else {
		r.Release()
	}
	r1.Release()
	r1.Release() // idempotent
	if got := s.Standby(a); got != 1 {
		t.Fatalf("standby after one release = %d, want 1", got)
	}
	r3, err := s.Begin(t0, a)
	if err != nil {
		t.Fatalf("Begin after a release: %v", err)
	}
	r2.Done(t0.Add(time.Second), 100)
	r3.Release()
	if got := s.Standby(a); got != 0 {
		t.Fatalf("standby after all released = %d, want 0", got)
	}
	if got := s.Snapshot().Clients[a].Rejections["standby"]; got != 1 {
		t.Fatalf("standby rejections = %d, want 1", got)
	}
}

func TestEWMAAndManagerDecay(t *testing.T) {
	cfg := testConfig()
	cfg.InitialMaxBandwidth = 1500
	s := mustNew(t, cfg)
	a, b := id(t, s, "a"), id(t, s, "b")
	r, _ := s.Begin(t0, a)
	r.Release()
	steps := []struct {
		bytes int64
		rt    time.Duration
		avg   float64
	}{
		{1000, time.Second, 200},               // 0.2·1000 + 0.8·0
		{2000, 2 * time.Second, 360},           // 0.2·1000 + 0.8·200
		{250, 500 * time.Millisecond, 388},     // 0.2·500 + 0.8·360
		{0, time.Second, 388},                  // empty reply: not a sample
		{1000, 0, 388},                         // zero response time: not a sample
		{3000, 1500 * time.Millisecond, 710.4}, // 0.2·2000 + 0.8·388
	}
	for i, st := range steps {
		s.Done(t0, a, st.bytes, st.rt)
		if got := s.Average(a); !near(got, st.avg) {
			t.Fatalf("step %d: avg = %g, want %g", i, got, st.avg)
		}
	}
	if got := s.Snapshot().Clients[a].Replies; got != uint64(len(steps)) {
		t.Fatalf("replies = %d, want %d", got, len(steps))
	}
	// b: one sample of 4000 B/s → avg_b = 800. Σ = 1510.4.
	rb, _ := s.Begin(t0, b)
	rb.Release()
	s.Done(t0, b, 4000, time.Second)

	// Tick 1: both were active → no decay; flags cleared; Σ = 1510.4 >
	// Â = 1500 → Â = 1510.4.
	s.Tick(t0.Add(time.Second))
	if got := s.MaxMeasured(); !near(got, 1510.4) {
		t.Fatalf("Â after tick 1 = %g, want 1510.4", got)
	}
	// Tick 2: nobody active → both decay: 710.4·0.8 = 568.32, 800·0.8 =
	// 640; Σ = 1208.32 < Â, which keeps 1510.4.
	s.Tick(t0.Add(2 * time.Second))
	if ga, gb := s.Average(a), s.Average(b); !near(ga, 568.32) || !near(gb, 640) {
		t.Fatalf("after tick 2: avg_a = %g, avg_b = %g; want 568.32, 640", ga, gb)
	}
	if got := s.MaxMeasured(); !near(got, 1510.4) {
		t.Fatalf("Â after tick 2 = %g, want 1510.4 (it never decreases)", got)
	}
	// Tick 3: a active (a request admitted), b idle: only b decays to 512.
	r, _ = s.Begin(t0, a)
	r.Release()
	s.Tick(t0.Add(3 * time.Second))
	if ga, gb := s.Average(a), s.Average(b); !near(ga, 568.32) || !near(gb, 512) {
		t.Fatalf("after tick 3: avg_a = %g, avg_b = %g; want 568.32, 512", ga, gb)
	}
	snap := s.Snapshot()
	if !near(snap.Utilized, 568.32+512) || snap.Ticks != 3 || !snap.LastTick.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("snapshot: Σ = %g, ticks %d, last %v", snap.Utilized, snap.Ticks, snap.LastTick)
	}
	for _, c := range snap.Clients {
		if c.Active {
			t.Errorf("%s still active after a tick", c.Name)
		}
	}
}

func TestInitialMaxBandwidthDefaultsToB(t *testing.T) {
	s := mustNew(t, testConfig())
	if got := s.MaxMeasured(); got != 1000 {
		t.Fatalf("Â₀ = %g, want B = 1000", got)
	}
	cfg := testConfig()
	cfg.InitialMaxBandwidth = 4000
	if got := mustNew(t, cfg).MaxMeasured(); got != 4000 {
		t.Fatalf("Â₀ = %g, want 4000", got)
	}
}

func TestOutOfRangeClientIsOthers(t *testing.T) {
	s := mustNew(t, testConfig())
	for _, c := range []ClientID{-1, 5, 1000} {
		if s.Name(c) != OthersName {
			t.Errorf("Name(%d) = %q, want others", c, s.Name(c))
		}
	}
}

// TestIncrementalStateMatchesRecomputation checks, over a seeded random
// sequence of Begin, Done and Tick calls, that the incrementally kept
// Σ avg_j and count of unsatisfied active clients equal their definitions.
func TestIncrementalStateMatchesRecomputation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := mustNew(t, testConfig())
	now := t0
	for step := range 20000 {
		c := ClientID(rng.IntN(s.NumClients()))
		switch op := rng.IntN(10); {
		case op < 4:
			if r, err := s.Begin(now, c); err == nil {
				r.Release()
			}
		case op < 9:
			s.Done(now, c, rng.Int64N(3000), time.Duration(rng.Int64N(int64(2*time.Second))))
		default:
			s.Tick(now)
		}
		now = now.Add(time.Millisecond)
		s.mu.Lock()
		sum, unsat := 0.0, 0
		for i := range s.clients {
			sum += s.clients[i].avg
			if s.clients[i].active && s.clients[i].avg < s.clients[i].b {
				unsat++
			}
		}
		gotSum, gotUnsat := s.sum, s.unsat
		s.mu.Unlock()
		if gotUnsat != unsat || math.Abs(gotSum-sum) > 1e-9*math.Max(1, sum) {
			t.Fatalf("step %d: kept Σ = %g, unsat = %d; recomputed Σ = %g, unsat = %d", step, gotSum, gotUnsat, sum, unsat)
		}
	}
}
