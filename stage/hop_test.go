// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/gate"
)

// A request whose deadline has passed is rejected before any gate, as a
// deadline rejection; without a deadline the same request is admitted.
func TestStageDeadlinePassed(t *testing.T) {
	c := &scripted{cur: limitDecision(4, time.Second, 0)}
	s := concStage(t, c, nil)
	if _, o, err := s.ArriveRequest(at(10), Request{Deadline: at(10)}, nil); o != gate.Rejected || !errors.Is(err, ErrDeadline) || !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("deadline = now: %v, %v", o, err)
	}
	if _, o, err := s.ArriveRequest(at(10), Request{Deadline: at(5)}, nil); o != gate.Rejected || !errors.Is(err, ErrDeadline) {
		t.Fatalf("deadline passed: %v, %v", o, err)
	}
	tk, o, err := s.ArriveRequest(at(10), Request{Deadline: at(11)}, nil)
	if o != gate.Admitted || err != nil {
		t.Fatalf("deadline ahead: %v, %v", o, err)
	}
	tk.Finish(at(11), Outcome{OK: true})
	if tot := s.Totals(0); tot.Deadline != 2 {
		t.Errorf("deadline rejections %d, want 2", tot.Deadline)
	}
	s.Step(at(1000))
	if tot := s.Totals(0); tot.Rejected != 2 || tot.Deadline != 2 || tot.Admitted != 1 {
		t.Errorf("totals %+v", tot)
	}
	// Shadow mode admits a late request and counts it once.
	sh := newStage(t, Options{Name: "s", Controller: scriptedConfig{&scripted{cur: limitDecision(1, time.Second, 0)}}, Shadow: true}, t0)
	sh.Arrive(at(0), 0, nil) // the one slot
	if _, o, err := sh.ArriveRequest(at(10), Request{Deadline: at(5)}, nil); o != gate.Admitted || err != nil {
		t.Fatalf("shadow, late and no slot: %v, %v", o, err)
	}
	if tot := sh.Totals(0); tot.ShadowRejected != 1 || tot.Deadline != 0 {
		t.Fatalf("shadow totals %+v", tot)
	}
	// A rate stage rejects a late request too, without taking a token.
	rc := control.DefaultStaticRateConfig()
	rc.Rate = 1
	rs := newStage(t, Options{Name: "r", Controller: &rc, Burst: 1}, t0)
	if _, o, err := rs.ArriveRequest(at(1), Request{Deadline: at(0)}, nil); o != gate.Rejected || !errors.Is(err, ErrDeadline) {
		t.Fatalf("rate stage, late: %v, %v", o, err)
	}
	if _, o, _ := rs.ArriveRequest(at(1), Request{}, nil); o != gate.Admitted {
		t.Fatal("the late request took the token")
	}
}

// The predicted wait, (ahead+1)/drain, is held against what is left of
// the request's deadline as well as against the allowed wait: a request
// that would wait within the queue's limit but past its own deadline is
// rejected at once as a deadline rejection.
func TestStageDeadlinePredicted(t *testing.T) {
	c := &scripted{cur: limitDecision(1, 500*time.Millisecond, 20)} // 50 ms per waiter ahead
	s := concStage(t, c, nil)
	s.Arrive(at(0), 0, nil)
	for i := range 3 { // 3 waiters: the next predicts 4/20 s = 200 ms
		w, _ := waitFor(0)
		if _, o := s.Arrive(at(1), 0, w); o != gate.Queued {
			t.Fatalf("waiter %d: %v", i, o)
		}
	}
	w, _ := waitFor(0)
	if _, o, err := s.ArriveRequest(at(1), Request{Deadline: at(150)}, w); o != gate.Rejected || !errors.Is(err, ErrDeadline) {
		t.Fatalf("149 ms left, 200 ms predicted: %v, %v", o, err)
	}
	w2, _ := waitFor(0)
	if _, o, err := s.ArriveRequest(at(1), Request{Deadline: at(300)}, w2); o != gate.Queued || err != nil {
		t.Fatalf("299 ms left, 200 ms predicted: %v, %v", o, err)
	}
	w4, _ := waitFor(0)
	if _, o, _ := s.ArriveRequest(at(1), Request{Tenant: "acme"}, w4); o != gate.Queued || w4.Tenant != "acme" {
		t.Fatalf("tenant on the waiter: %v %q", o, w4.Tenant)
	}
	if w2.Deadline != at(300) || !w2.byDeadline {
		t.Errorf("the wait ends at %v (by deadline %v), want the request's deadline 300 ms", w2.Deadline.Sub(t0), w2.byDeadline)
	}
	// Beyond the allowed wait too: an ordinary rejection, not a deadline one.
	for range 5 {
		w, _ := waitFor(0)
		s.Arrive(at(2), 0, w)
	}
	w3, _ := waitFor(0)
	if _, o, err := s.ArriveRequest(at(2), Request{Deadline: at(400)}, w3); o != gate.Rejected || errors.Is(err, ErrDeadline) {
		t.Fatalf("beyond the allowed wait: %v, %v", o, err)
	}
	if tot := s.Totals(0); tot.Deadline != 1 {
		t.Errorf("deadline rejections %d, want 1", tot.Deadline)
	}
}

// A queued request whose deadline passes is dropped, never granted: by
// its own timer (Leave), or by a release that finds it expired.
func TestStageDeadlineQueued(t *testing.T) {
	c := &scripted{cur: limitDecision(1, time.Second, 0)}
	s := concStage(t, c, nil)
	first, _ := s.Arrive(at(0), 0, nil)
	wA, rA := waitFor(0)
	wB, rB := waitFor(0)
	s.ArriveRequest(at(1), Request{Deadline: at(50)}, wA)
	s.ArriveRequest(at(1), Request{Deadline: at(60)}, wB)
	// A's timer fires at its deadline.
	if !s.Leave(at(50), wA, true) {
		t.Fatal("A was not waiting at its deadline")
	}
	// B's timer is late: the release at 70 ms finds it expired and drops it.
	first.Finish(at(70), Outcome{OK: true})
	if rB.granted || !errors.Is(rB.err, ErrDeadline) {
		t.Fatalf("B after its deadline: granted %v, err %v", rB.granted, rB.err)
	}
	if rA.granted {
		t.Fatal("A granted")
	}
	if tot := s.Totals(0); tot.Deadline != 2 {
		t.Errorf("deadline rejections %d, want 2", tot.Deadline)
	}
	s.Step(at(1000))
	if m := c.seen[0]; m.Expired != 2 || m.Rejected != 2 {
		t.Errorf("expired %v rejected %v, want 2 and 2", m.Expired, m.Rejected)
	}
}

// No request is granted a slot at or after its deadline: random arrivals
// with random deadlines against a small limit and a long queue, in
// virtual time. Every request ends admitted before its deadline or
// rejected.
func TestStageNeverGrantsAfterDeadline(t *testing.T) {
	c := &scripted{cur: limitDecision(3, 2*time.Second, 0)}
	s := newStage(t, Options{Name: "c", Controller: scriptedConfig{c}, ClassNames: []string{"hi", "lo"}, MaxQueue: 1000}, t0)
	rng := rand.New(rand.NewPCG(7, 8))
	type waiter struct {
		w        *Wait
		r        *recorder
		deadline time.Time
	}
	var waiting []waiter
	var held []struct {
		tk  Ticket
		end time.Time
	}
	now := t0
	granted, rejected, early := 0, 0, 0
	check := func(x waiter) {
		if x.r.granted {
			granted++
			if !x.r.t.Start().Before(x.deadline) {
				t.Fatalf("granted at %v, deadline %v", x.r.t.Start().Sub(t0), x.deadline.Sub(t0))
			}
			held = append(held, struct {
				tk  Ticket
				end time.Time
			}{x.r.t, x.r.t.Start().Add(time.Duration(rng.IntN(40)+1) * time.Millisecond)})
		}
	}
	for i := 0; i < 20000; i++ {
		now = now.Add(time.Duration(rng.IntN(8000)) * time.Microsecond)
		// Finish what is due, then time out what is due, in time order.
		kept := held[:0]
		var due []Ticket
		for _, h := range held {
			if !h.end.After(now) {
				due = append(due, h.tk)
			} else {
				kept = append(kept, h)
			}
		}
		held = kept
		for _, tk := range due {
			tk.Finish(now, Outcome{OK: true})
		}
		var still []waiter
		for _, x := range waiting {
			switch {
			case x.r.granted:
				check(x)
			case x.r.err != nil:
				rejected++
			case !x.w.Deadline.After(now) && s.Leave(now, x.w, true):
				rejected++
			default:
				still = append(still, x)
			}
		}
		waiting = still
		w, r := waitFor(0)
		dl := now.Add(time.Duration(rng.IntN(100)) * time.Millisecond)
		tk, o, _ := s.ArriveRequest(now, Request{Class: rng.IntN(2), Deadline: dl}, w)
		switch o {
		case gate.Admitted:
			early++
			held = append(held, struct {
				tk  Ticket
				end time.Time
			}{tk, now.Add(time.Duration(rng.IntN(40)+1) * time.Millisecond)})
		case gate.Queued:
			waiting = append(waiting, waiter{w, r, dl})
		default:
			rejected++
		}
	}
	t.Logf("admitted at once %d, granted from the queue %d, rejected %d", early, granted, rejected)
	if granted < 1000 || rejected < 1000 {
		t.Fatalf("the test did not load the queue: granted %d, rejected %d", granted, rejected)
	}
}

// Live, in virtual time: a context deadline is the request's; a queued
// request gets ErrDeadline at its deadline (not ctx's error), counted;
// one whose deadline has passed never waits.
func TestStageEnterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &scripted{cur: limitDecision(1, time.Second, 0)}
		s := newStage(t, Options{Name: "c", Controller: scriptedConfig{c}, MaxQueue: 8}, time.Now())
		hold, err := s.Enter(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 80*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = s.Enter(ctx, 0)
		if !errors.Is(err, ErrDeadline) || !errors.Is(err, sluice.ErrRejected) || time.Since(start) != 80*time.Millisecond {
			t.Fatalf("queued past its deadline: %v after %v", err, time.Since(start))
		}
		late, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Millisecond))
		defer cancel2()
		start = time.Now()
		if _, err := s.Enter(late, 0); !errors.Is(err, ErrDeadline) || time.Since(start) != 0 {
			t.Fatalf("late request: %v after %v", err, time.Since(start))
		}
		hold.Done(sluice.Success)
		if tot := s.Totals(0); tot.Deadline != 2 {
			t.Errorf("deadline rejections %d, want 2", tot.Deadline)
		}
		if s.InFlight() != 0 || s.QueueLen() != 0 {
			t.Fatalf("leak: in flight %d queue %d", s.InFlight(), s.QueueLen())
		}
	})
}

// A queued request whose deadline passes at the moment the stage grants
// it a slot, or drops it, is still answered as a deadline rejection
// (ErrDeadline, wrapping sluice.ErrRejected), whichever of the wait's
// wake-ups the select takes; never with its context's error, which means
// "the client left" and leaves the request unanswered (a proxy answered
// nothing: TestNoRequestReachesBackendAfterDeadline, under load). The
// wake-ups are made ready before the wait starts, so the select picks
// among them at random; 200 rounds take each many times.
func TestStageAwaitDeadlineAtRelease(t *testing.T) {
	for _, drop := range []bool{false, true} {
		ready := 0
		for i := range 200 {
			c := &scripted{cur: limitDecision(1, time.Second, 0)}
			s := newStage(t, Options{Name: "c", Controller: scriptedConfig{c}, MaxQueue: 8}, t0)
			hold, o, _, err := s.arrive(t0, Request{}, nil, s.mkWait)
			if o != gate.Admitted || err != nil {
				t.Fatalf("first request: %v, %v", o, err)
			}
			dl := t0.Add(10 * time.Millisecond)
			_, o, w, _ := s.arrive(t0, Request{Deadline: dl}, nil, s.mkWait)
			if o != gate.Queued {
				t.Fatalf("second request: %v, want queued", o)
			}
			lw := w.Notify.(*liveWait)
			lw.timer = time.NewTimer(0)     // its deadline's timer has fired
			at := dl.Add(-time.Millisecond) // granted just before its deadline
			if drop {
				at = dl // dropped at it
			}
			hold.Finish(at, Outcome{OK: true})
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
			<-ctx.Done()
			if len(lw.ch) == 1 {
				ready++ // the grant or drop and the context: both ready
			}
			tk, err := s.await(ctx, lw)
			cancel()
			switch {
			case err == nil:
				tk.Finish(dl, Outcome{OK: true}) // granted: served
			case !errors.Is(err, sluice.ErrRejected):
				t.Fatalf("drop %v, round %d: %v: not a rejection, so nobody answers the request", drop, i, err)
			}
			if s.InFlight() != 0 || s.QueueLen() != 0 {
				t.Fatalf("drop %v, round %d: leak: in flight %d queue %d", drop, i, s.InFlight(), s.QueueLen())
			}
		}
		if ready != 200 {
			t.Fatalf("drop %v: the grant or drop was ready before the wait in %d of 200 rounds", drop, ready)
		}
	}
}

// Which stages shed by priority by default: every controller but the
// papers' (seda, yaksha, kihl, voigt-*), and only with several classes.
func TestStagePriorityDefaults(t *testing.T) {
	two := []string{"hi", "lo"}
	for _, name := range control.Names() {
		cfg, err := control.NewConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		on, r, err := Priority{}.resolve(cfg, 2)
		if err != nil {
			t.Fatal(err)
		}
		if want := !control.NeedsOf(cfg).PriorityOptIn; on != want || r != DefaultPriorityReserve {
			t.Errorf("%s: shed %v reserve %v, want %v and %v", name, on, r, want, DefaultPriorityReserve)
		}
		if on, _, _ := (Priority{}).resolve(cfg, 1); on {
			t.Errorf("%s: sheds by priority with one class", name)
		}
		if on, _, _ := (Priority{Shed: ShedOn}).resolve(cfg, 2); !on {
			t.Errorf("%s: ShedOn off", name)
		}
		if on, _, _ := (Priority{Shed: ShedOff}).resolve(cfg, 2); on {
			t.Errorf("%s: ShedOff on", name)
		}
	}
	for _, bad := range []Priority{{Reserve: -0.1}, {Reserve: 1}, {Shed: 9}} {
		cfg := control.DefaultNoneConfig()
		if _, err := New(Options{Name: "x", Controller: &cfg, ClassNames: two, Priority: bad}, t0); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// A concurrency stage keeps the reserve while it rejects at once and
// drops it while it queues (its queue's class order protects the higher
// classes then).
func TestStagePriorityReserveFollowsQueue(t *testing.T) {
	c := &scripted{cur: limitDecision(10, -1, 0), next: []sluice.Decision{limitDecision(10, time.Second, 0)}}
	s := newStage(t, Options{Name: "c", Controller: scriptedConfig{c}, ClassNames: []string{"hi", "lo"}, MaxQueue: 4}, t0)
	for i := range 10 {
		if _, o := s.Arrive(at(0), 1, nil); o != gate.Admitted {
			t.Fatalf("low %d: %v", i, o)
		}
	}
	if _, o := s.Arrive(at(0), 1, nil); o != gate.Rejected {
		t.Fatalf("low at the limit: %v", o)
	}
	for i := range 3 { // reserve 0.3 of 10
		if _, o := s.Arrive(at(0), 0, nil); o != gate.Admitted {
			t.Fatalf("high %d in the reserve: %v", i, o)
		}
	}
	if _, o := s.Arrive(at(0), 0, nil); o != gate.Rejected {
		t.Fatalf("high beyond the reserve: %v", o)
	}
	if st := s.State(0); st.Priority == nil || st.InFlightLimited.Thresholds[0] != 13 || st.InFlightLimited.Thresholds[1] != 10 {
		t.Fatalf("state: %+v %+v", st.Priority, st.InFlightLimited)
	}
	s.Step(at(1000)) // a queue opens: the reserve is lifted
	if _, o := s.Arrive(at(1000), 0, nil); o != gate.Rejected {
		t.Fatalf("high beyond the limit with a queue in force: %v", o)
	}
	if st := s.State(0); st.InFlightLimited.Thresholds != nil {
		t.Fatalf("thresholds shown with a queue: %v", st.InFlightLimited.Thresholds)
	}
	// Off: nobody goes beyond the limit.
	c2 := &scripted{cur: limitDecision(10, -1, 0)}
	s2, _ := New(Options{Name: "c", Controller: scriptedConfig{c2}, ClassNames: []string{"hi", "lo"}, Priority: Priority{Shed: ShedOff}}, t0)
	for i := range 10 {
		if _, o := s2.Arrive(at(0), 1, nil); o != gate.Admitted {
			t.Fatalf("shedding off: low %d %v", i, o)
		}
	}
	if _, o := s2.Arrive(at(0), 0, nil); o != gate.Rejected {
		t.Fatalf("shedding off: high beyond the limit %v", o)
	}
}

// A rate stage (static-rate) sheds its lowest class first under a crowd
// of it; with shedding off (or one class) it is the plain bucket.
func TestStagePriorityRate(t *testing.T) {
	run := func(p Priority) (high float64) {
		rc := control.DefaultStaticRateConfig()
		rc.Rate = 100
		s := newStage(t, Options{Name: "r", Controller: &rc, ClassNames: []string{"hi", "lo"}, Priority: p}, t0)
		rng := rand.New(rand.NewPCG(9, 10))
		now := t0
		var offered, admitted [2]int
		for now.Before(t0.Add(30 * time.Second)) {
			now = now.Add(time.Duration(rng.ExpFloat64() / 1240 * 1e9)) // high 40/s, low 1200/s
			c := 1
			if rng.Float64() < 40.0/1240 {
				c = 0
			}
			offered[c]++
			if tk, o := s.Arrive(now, c, nil); o == gate.Admitted {
				admitted[c]++
				tk.Finish(now, Outcome{OK: true})
			}
		}
		return float64(admitted[0]) / float64(offered[0])
	}
	if h := run(Priority{}); h < 0.994 {
		t.Errorf("static-rate, default: high admitted %.4f, want ≥ 0.994", h)
	}
	if h := run(Priority{Shed: ShedOff}); h > 0.2 {
		t.Errorf("static-rate, off: high admitted %.4f: expected the plain bucket's share", h)
	}
}

// A dropping stage (yaksha) with shedding on puts its drops on the lowest
// class first, in proportion to the last period's class mix.
func TestStagePriorityDrops(t *testing.T) {
	g, err := NewGates(sluice.Decision{Kind: sluice.KindDropProbability, New: 0}, 3, 1, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	g.setPriority(3, 0.2)
	for _, c := range []struct {
		mix  []float64
		p    float64
		want []float64
	}{
		{[]float64{10, 30, 60}, 0.3, []float64{0, 0, 0.5}},
		{[]float64{10, 30, 60}, 0.75, []float64{0, 0.5, 1}},
		{[]float64{10, 30, 60}, 1, []float64{1, 1, 1}},
		{[]float64{50, 0, 50}, 0.25, []float64{0, 0, 0.5}},
		{[]float64{50, 0, 50}, 0.75, []float64{0.5, 1, 1}}, // an idle class below the cut drops all
		{[]float64{0, 0, 0}, 0.4, []float64{0.4, 0.4, 0.4}},
		{[]float64{10, 30, 60}, 0, []float64{0, 0, 0}},
	} {
		g.SetClassMix(c.mix)
		if err := g.Apply(t0, sluice.Decision{Kind: sluice.KindDropProbability, New: c.p}); err != nil {
			t.Fatal(err)
		}
		got := g.ClassDrops()
		for i := range got {
			if !near(got[i], c.want[i]) {
				t.Errorf("mix %v p %v: drops %v, want %v", c.mix, c.p, got, c.want)
				break
			}
		}
	}
	// In a stage, yaksha's stage sheds by priority only when asked.
	yc := control.DefaultYakshaConfig()
	yc.Tref = 100 * time.Millisecond
	s := newStage(t, Options{Name: "y", Controller: &yc, ClassNames: []string{"hi", "lo"}}, t0)
	if s.State(0).Priority != nil || s.shedMix {
		t.Fatal("yaksha sheds by priority by default")
	}
	s, err = New(Options{Name: "y", Controller: &yc, ClassNames: []string{"hi", "lo"}, Priority: Priority{Shed: ShedOn}}, t0)
	if err != nil || !s.shedMix {
		t.Fatalf("yaksha with ShedOn: %v %v", err, s.shedMix)
	}
}

func TestStageClassFrom(t *testing.T) {
	cfg := control.DefaultNoneConfig()
	s := newStage(t, Options{Name: "x", Controller: &cfg, ClassNames: []string{"gold", "silver", "bronze"}}, t0)
	ctx := context.Background()
	for _, c := range []struct {
		p    string
		want int
	}{{"", 2}, {"gold", 0}, {"silver", 1}, {sluice.CriticalPlus, 0}, {sluice.Sheddable, 2}, {"platinum", 2}} {
		got := s.ClassFrom(sluice.WithHop(ctx, sluice.Hop{Priority: c.p}), 2)
		if got != c.want {
			t.Errorf("ClassFrom(%q) = %d, want %d", c.p, got, c.want)
		}
	}
	if got := s.ClassFrom(ctx, 1); got != 1 {
		t.Errorf("no hop: %d, want the default 1", got)
	}
}
