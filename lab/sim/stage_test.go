// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/stage"
)

// TestStageExactTrigger: a SEDA stage with nreq = 5 behind arrivals every
// 100 ms and a constant 13 ms service. The fifth sample lands at
// 0.513 s; with ExactTrigger the controller runs then, without it at the
// next poll (stage.MaxPoll = 10 ms: 0.52 s), as the live runner does.
func TestStageExactTrigger(t *testing.T) {
	for _, exact := range []bool{true, false} {
		e := New(1)
		cfg := control.DefaultSEDAConfig()
		cfg.NReq, cfg.Timeout, cfg.Target = 5, 10*time.Second, time.Second
		st, err := stage.New(stage.Options{Name: "s", Controller: &cfg}, e.Time())
		if err != nil {
			t.Fatal(err)
		}
		server, _ := NewFIFO(e, FIFOConfig{Servers: 1})
		entry, err := NewStage(e, st, &Visit{Engine: e, Station: server}, nil)
		if err != nil {
			t.Fatal(err)
		}
		entry.ExactTrigger = exact
		var at []time.Duration
		var samples []float64
		entry.OnStep = func(now time.Duration, ds []sluice.Decision) {
			for _, d := range ds {
				at = append(at, now)
				samples = append(samples, d.Inputs.Samples)
			}
		}
		rate, _ := dist.ConstantSchedule(10)
		svc, _ := dist.NewDeterministic(0.013)
		src, err := NewOpen(e, OpenConfig{Arrivals: dist.Constant{Rate: rate}, Types: []RequestType{{Demand: svc}}, Target: entry})
		if err != nil {
			t.Fatal(err)
		}
		src.Start()
		e.Run(1100 * time.Millisecond)
		want := []time.Duration{513 * time.Millisecond, 1013 * time.Millisecond}
		if !exact {
			want = []time.Duration{520 * time.Millisecond, 1020 * time.Millisecond}
		}
		if len(at) != 2 || at[0] != want[0] || at[1] != want[1] || samples[0] != 5 || samples[1] != 5 {
			t.Errorf("exact %v: steps at %v with %v samples, want at %v with 5 each", exact, at, samples, want)
		}
	}
}

// TestStageDeadlineAndCancel: the deadline a request carries and its
// sender leaving act in virtual time as they do live. A stage of one
// slot with a queue in front of one server of 100 ms: the first request
// is served; a queued one with a deadline of 50 ms leaves the queue then
// (a deadline rejection); one whose deadline has already passed is
// rejected on arrival (another); a queued one whose sender leaves at
// 20 ms leaves the queue then and is never served; the last one is
// served after the first.
func TestStageDeadlineAndCancel(t *testing.T) {
	e := New(1)
	cfg := control.DefaultStaticConcurrencyConfig()
	cfg.Limit = 1
	st, err := stage.New(stage.Options{Name: "s", Controller: &cfg, QueueTimeout: time.Second}, e.Time())
	if err != nil {
		t.Fatal(err)
	}
	server, _ := NewFIFO(e, FIFOConfig{Servers: 1})
	served := map[string]bool{}
	visit := &Visit{Engine: e, Station: server, Work: func(r *Request) float64 {
		served[r.Data.(string)] = true
		return 0.1
	}}
	entry, err := NewStage(e, st, visit, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]*Request{}
	send := func(at time.Duration, name string, deadline time.Duration) *Request {
		r := &Request{ID: e.NextID(), Data: name, Deadline: deadline}
		done[name] = r
		e.Schedule(at, func() { r.Sent = e.Now(); entry.Handle(r) })
		return r
	}
	send(0, "first", 0)
	send(time.Millisecond, "short", 50*time.Millisecond)
	send(10*time.Millisecond, "late", 5*time.Millisecond)
	gone := send(2*time.Millisecond, "gone", 0)
	send(3*time.Millisecond, "last", 0)
	e.Schedule(20*time.Millisecond, gone.Cancel)
	e.Run(time.Second)
	want := map[string]struct {
		o      Outcome
		at     time.Duration
		served bool
	}{
		"first": {Completed, 100 * time.Millisecond, true},
		"short": {Rejected, 50 * time.Millisecond, false},
		"late":  {Rejected, 10 * time.Millisecond, false},
		"gone":  {Rejected, 20 * time.Millisecond, false},
		"last":  {Completed, 200 * time.Millisecond, true},
	}
	for name, w := range want {
		r := done[name]
		if !r.Done() || r.Outcome != w.o || r.Finished != w.at || served[name] != w.served {
			t.Errorf("%s: done %v, %v at %v, served %v; want %v at %v, served %v", name, r.Done(), r.Outcome, r.Finished, served[name], w.o, w.at, w.served)
		}
	}
	if !gone.Canceled() || done["first"].Canceled() {
		t.Errorf("Canceled: gone %v, first %v; want true, false", gone.Canceled(), done["first"].Canceled())
	}
	cs := st.State(0).Classes[0]
	if cs.Deadline != 2 || cs.Rejected != 3 || cs.Completed != 2 {
		t.Errorf("stage counted %d deadline rejections, %d rejected, %d completed; want 2, 3, 2", cs.Deadline, cs.Rejected, cs.Completed)
	}
}

// TestRequestCancel: Cancel runs the OnCancel functions once, newest
// first, and does nothing after Finish.
func TestRequestCancel(t *testing.T) {
	var order []int
	r := &Request{}
	r.OnCancel(func(*Request) { order = append(order, 1) })
	r.OnCancel(func(*Request) { order = append(order, 2) })
	r.Cancel()
	r.Cancel()
	if len(order) != 2 || order[0] != 2 || order[1] != 1 || !r.Canceled() {
		t.Errorf("cancel ran %v, canceled %v; want [2 1], true", order, r.Canceled())
	}
	f := &Request{}
	f.OnCancel(func(*Request) { t.Error("a finished request was canceled") })
	f.Finish(0, Completed)
	f.Cancel()
	if f.Canceled() {
		t.Error("a finished request reports Canceled")
	}
}
