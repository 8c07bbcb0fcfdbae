// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/gate"
)

// scripted is a concurrency controller that returns prepared decisions
// and keeps what it saw.
type scripted struct {
	cur  sluice.Decision
	next []sluice.Decision
	seen []sluice.Measurements
	trig int
}

func (c *scripted) Update(now time.Time, m sluice.Measurements) sluice.Decision {
	c.seen = append(c.seen, m)
	if len(c.next) > 0 {
		c.cur, c.next = c.next[0], c.next[1:]
	}
	c.cur.At = now
	return c.cur
}
func (c *scripted) Current() sluice.Decision { return c.cur }
func (c *scripted) Period() time.Duration    { return time.Second }
func (c *scripted) TriggerSamples() int      { return c.trig }

type scriptedConfig struct{ c *scripted }

func (s scriptedConfig) Validate() error                 { return nil }
func (s scriptedConfig) New() (sluice.Controller, error) { return s.c, nil }

func limitDecision(limit float64, maxWait time.Duration, drain float64) sluice.Decision {
	return sluice.Decision{Controller: "scripted", Kind: sluice.KindConcurrency, New: limit, MaxWait: maxWait, Drain: drain}
}

func concStage(t *testing.T, c *scripted, classes []string) *Stage {
	t.Helper()
	s := newStage(t, Options{Name: "c", Controller: scriptedConfig{c}, ClassNames: classes, MaxQueue: 16}, t0)
	return s
}

// recorder is a Waiter that keeps what it was told.
type recorder struct {
	t       Ticket
	granted bool
	err     error
}

func (r *recorder) Granted(t Ticket)  { r.t, r.granted = t, true }
func (r *recorder) Dropped(err error) { r.err = err }

func waitFor(class int) (*Wait, *recorder) {
	r := &recorder{}
	return &Wait{Class: class, Notify: r}, r
}

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The measurements of a concurrency stage: in flight (time-weighted mean
// and peak), service times of successful requests, waits.
func TestStageConcurrencyMeasurements(t *testing.T) {
	c := &scripted{cur: limitDecision(2, time.Second, 0)}
	s := concStage(t, c, nil)
	a, _ := s.Arrive(at(0), 0, nil)
	b, _ := s.Arrive(at(0), 0, nil)
	w, r := waitFor(0)
	if _, o := s.Arrive(at(0), 0, w); o != gate.Queued {
		t.Fatalf("third arrival %v, want queued", o)
	}
	a.Finish(at(100), Outcome{OK: true}) // service 100 ms; grants the waiter at 100 ms
	if !r.granted {
		t.Fatal("waiter not granted the freed slot")
	}
	b.Finish(at(200), Outcome{OK: true})                                     // service 200 ms
	r.t.Finish(at(400), Outcome{OK: true, Excluded: 100 * time.Millisecond}) // 300 ms less 100 excluded
	s.Step(at(1000))
	m := c.seen[0]
	// ∫n = 0.1·2 + 0.1·2 (a, b until 100/200; c from 100) ... computed:
	// [0,100) 2, [100,200) 2, [200,400) 1, [400,1000) 0 → 0.2+0.2+0.2 = 0.6 s.
	if !near(m.InFlight, 0.6) || m.MaxInFlight != 2 {
		t.Errorf("in flight mean %v peak %v, want 0.6 and 2", m.InFlight, m.MaxInFlight)
	}
	if m.ServiceSamples != 3 || !near(m.ServiceMean, 0.5/3) || !near(m.ServiceMin, 0.1) || !near(m.ServiceP90, 0.2) {
		t.Errorf("service: n %v mean %v min %v p90 %v, want 3, 0.1667, 0.1, 0.2", m.ServiceSamples, m.ServiceMean, m.ServiceMin, m.ServiceP90)
	}
	if !near(m.QueueWaitMean, 0.1/3) || m.QueueWaitMin != 0 {
		t.Errorf("waits mean %v min %v, want 0.0333 and 0", m.QueueWaitMean, m.QueueWaitMin)
	}
	if m.Admitted != 3 || m.Completed != 3 {
		t.Errorf("admitted %v completed %v", m.Admitted, m.Completed)
	}
	// An idle interval: nothing in flight, no samples.
	s.Step(at(2000))
	m = c.seen[1]
	if m.InFlight != 0 || m.MaxInFlight != 0 || m.ServiceSamples != 0 || !math.IsNaN(m.ServiceMean) || !math.IsNaN(m.QueueWaitMean) {
		t.Errorf("idle interval: %+v", m)
	}
}

// A failed request is never a service-time sample.
func TestStageFailureIsNoServiceSample(t *testing.T) {
	c := &scripted{cur: limitDecision(2, time.Second, 0)}
	s := concStage(t, c, nil)
	a, _ := s.Arrive(at(0), 0, nil)
	a.Finish(at(5), Outcome{OK: false})
	s.Step(at(1000))
	if m := c.seen[0]; m.ServiceSamples != 0 || m.Failed != 1 {
		t.Errorf("samples %v failed %v", m.ServiceSamples, m.Failed)
	}
}

// A request whose predicted wait, (ahead+1)/drain, exceeds the allowed
// wait is rejected at once, and counted as expired.
func TestStagePredictiveRejection(t *testing.T) {
	c := &scripted{cur: limitDecision(1, 100*time.Millisecond, 20)}
	s := concStage(t, c, nil)
	s.Arrive(at(0), 0, nil)
	w1, _ := waitFor(0)
	w2, _ := waitFor(0)
	w3, _ := waitFor(0)
	if _, o := s.Arrive(at(1), 0, w1); o != gate.Queued { // 1/20 s ≤ 100 ms
		t.Fatalf("w1 %v", o)
	}
	if _, o := s.Arrive(at(1), 0, w2); o != gate.Queued { // 2/20 s ≤ 100 ms
		t.Fatalf("w2 %v", o)
	}
	if _, o := s.Arrive(at(1), 0, w3); o != gate.Rejected { // 3/20 s > 100 ms
		t.Fatalf("w3 %v, want rejected", o)
	}
	if w1.Deadline != at(101) {
		t.Errorf("deadline %v, want arrival + 100ms", w1.Deadline.Sub(t0))
	}
	s.Step(at(1000))
	if m := c.seen[0]; m.Expired != 1 || m.Rejected != 1 || m.Queue != 2 {
		t.Errorf("expired %v rejected %v queue %v", m.Expired, m.Rejected, m.Queue)
	}
}

// MaxWait < 0 means no queue at all; a decision can open one again.
func TestStageNoQueue(t *testing.T) {
	c := &scripted{cur: limitDecision(1, -1, 0), next: []sluice.Decision{limitDecision(1, 50*time.Millisecond, 0)}}
	s := concStage(t, c, nil)
	s.Arrive(at(0), 0, nil)
	w, _ := waitFor(0)
	if _, o := s.Arrive(at(1), 0, w); o != gate.Rejected {
		t.Fatalf("no queue: %v", o)
	}
	s.Step(at(1000))
	if _, o := s.Arrive(at(1001), 0, w); o != gate.Queued {
		t.Fatalf("after MaxWait 50ms: %v", o)
	}
}

// Waiters of a higher class get the slot first, and a full queue sheds
// the lower class.
func TestStageClassPriorityQueue(t *testing.T) {
	c := &scripted{cur: limitDecision(1, time.Second, 0)}
	s := newStage(t, Options{Name: "c", Controller: scriptedConfig{c}, ClassNames: []string{"gold", "bronze"}, MaxQueue: 2}, t0)
	first, _ := s.Arrive(at(0), 1, nil)
	lo1, rlo1 := waitFor(1)
	lo2, rlo2 := waitFor(1)
	hi, rhi := waitFor(0)
	s.Arrive(at(1), 1, lo1)
	s.Arrive(at(2), 1, lo2)
	if _, o := s.Arrive(at(3), 0, hi); o != gate.Queued { // evicts lo2
		t.Fatalf("gold into a full queue: %v", o)
	}
	if !errors.Is(rlo2.err, sluice.ErrRejected) {
		t.Fatalf("evicted bronze waiter told %v", rlo2.err)
	}
	first.Finish(at(10), Outcome{OK: true})
	if !rhi.granted || rlo1.granted {
		t.Fatalf("gold granted %v, bronze %v: gold must go first", rhi.granted, rlo1.granted)
	}
	rhi.t.Finish(at(20), Outcome{OK: true})
	if !rlo1.granted {
		t.Fatal("bronze never granted")
	}
	rlo1.t.Finish(at(30), Outcome{OK: true})
	s.Step(at(1000))
	if tot := s.Totals(1); tot.Rejected != 1 || tot.Admitted != 2 {
		t.Errorf("bronze totals %+v", tot)
	}
}

// A decision with Fence drops the samples of requests admitted before it;
// the trigger is re-read after every step; a raised limit admits waiters.
func TestStageFenceTriggerAndRaise(t *testing.T) {
	c := &scripted{cur: limitDecision(1, time.Second, 0),
		next: []sluice.Decision{{Controller: "scripted", Kind: sluice.KindConcurrency, New: 2, MaxWait: time.Second, Fence: true}}}
	s := concStage(t, c, nil)
	old, _ := s.Arrive(at(0), 0, nil)
	w, r := waitFor(0)
	s.Arrive(at(100), 0, w)
	c.trig = 2
	s.Step(at(1000)) // limit 2 with a fence: the waiter goes in
	if !r.granted || r.t.Start() != at(1000) {
		t.Fatalf("raised limit did not grant the waiter: %+v", r)
	}
	old.Finish(at(1100), Outcome{OK: true})   // admitted before the fence
	r.t.Finish(at(1200), Outcome{OK: true})   // granted after it
	if s.due(0, s.classes[0].rec, at(1200)) { // one fenced sample of 2
		t.Fatal("due with 1 of 2 trigger samples")
	}
	n, _ := s.Arrive(at(1200), 0, nil)
	n.Finish(at(1250), Outcome{OK: true})
	if !s.due(0, s.classes[0].rec, at(1250)) {
		t.Fatal("not due with 2 of 2 trigger samples")
	}
	s.Step(at(1250))
	if m := c.seen[1]; m.ServiceSamples != 2 || !near(m.ServiceMean, 0.125) {
		t.Errorf("fenced samples %v mean %v, want 2 and 0.125 (200 and 50 ms)", m.ServiceSamples, m.ServiceMean)
	}
}

// tailConfig is scriptedConfig for a controller that reads the service
// tail regardless of fences (control.Needs.ServiceTail), as auto does.
type tailConfig struct{ scriptedConfig }

func (tailConfig) Needs() control.Needs { return control.Needs{ServiceTail: true} }

// The tail counts every completion, fences or not: a long request
// admitted before a fence is dropped from the fenced service times but
// not from ServiceTailP99; a stage whose controller does not ask for it
// reports none.
func TestStageServiceTailIgnoresFences(t *testing.T) {
	for _, tail := range []bool{false, true} {
		c := &scripted{cur: limitDecision(2, time.Second, 0),
			next: []sluice.Decision{{Controller: "scripted", Kind: sluice.KindConcurrency, New: 2, MaxWait: time.Second, Fence: true}}}
		var cfg control.Config = scriptedConfig{c}
		if tail {
			cfg = tailConfig{scriptedConfig{c}}
		}
		s := newStage(t, Options{Name: "c", Controller: cfg, MaxQueue: 16}, t0)
		long, _ := s.Arrive(at(0), 0, nil)
		s.Step(at(1000)) // the fence
		short, _ := s.Arrive(at(1000), 0, nil)
		short.Finish(at(1010), Outcome{OK: true})
		long.Finish(at(1900), Outcome{OK: true}) // straddles the fence
		s.Step(at(2000))
		m := c.seen[len(c.seen)-1]
		if m.ServiceSamples != 1 || !near(m.ServiceP99, 0.010) {
			t.Errorf("tail %v: fenced samples %v p99 %v, want 1 and 10 ms", tail, m.ServiceSamples, m.ServiceP99)
		}
		switch {
		case tail && (m.ServiceTailSamples != 2 || !near(m.ServiceTailP99, 1.9)):
			t.Errorf("tail samples %v p99 %v, want 2 and 1.9 s", m.ServiceTailSamples, m.ServiceTailP99)
		case !tail && (m.ServiceTailSamples != 0 || !math.IsNaN(m.ServiceTailP99)):
			t.Errorf("no tail asked: samples %v p99 %v, want 0 and NaN", m.ServiceTailSamples, m.ServiceTailP99)
		}
	}
}

// Live Enter in virtual time: a waiter gets the freed slot, another times
// out at its deadline with a rejection, a cancelled one leaves.
func TestStageEnterQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &scripted{cur: limitDecision(1, 100*time.Millisecond, 0)}
		s := newStage(t, Options{Name: "c", Controller: scriptedConfig{c}, MaxQueue: 8}, time.Now())
		first, err := s.Enter(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			tk, err := s.Enter(t.Context(), 0)
			if err == nil {
				time.Sleep(10 * time.Millisecond)
				tk.Done(sluice.Success)
			}
			got <- err
		}()
		time.Sleep(50 * time.Millisecond)
		first.Done(sluice.Success)
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		hold, _ := s.Enter(t.Context(), 0)
		start := time.Now()
		_, err = s.Enter(t.Context(), 0)
		if !errors.Is(err, sluice.ErrRejected) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("timeout: %v after %v", err, time.Since(start))
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		if _, err := s.Enter(ctx, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
		hold.Done(sluice.Success)
		if s.InFlight() != 0 || s.QueueLen() != 0 {
			t.Fatalf("leak: in flight %d queue %d", s.InFlight(), s.QueueLen())
		}
	})
}
