package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRecorderRowByHand(t *testing.T) {
	e := New(1)
	f, _ := NewFIFO(e, FIFOConfig{Servers: 2})
	rec, err := NewRecorder(e, RecorderConfig{Busy: f.Busy, Queue: func() float64 { return e.Now().Seconds() }, QueueSamples: 4})
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	if err := rec.Start(time.Second, func(w Row) { rows = append(rows, w) }); err != nil {
		t.Fatal(err)
	}
	// One job of 1 s on one of two servers: utilization 0.5.
	f.Submit(&Job{Work: 1})
	for i := 1; i <= 10; i++ {
		rec.Offer()
		rec.Admit()
		rec.Complete(time.Duration(i) * time.Millisecond)
	}
	rec.Offer()
	rec.Reject()
	rec.Fail()
	e.Run(time.Second)
	if len(rows) != 1 {
		t.Fatalf("%d rows after one period", len(rows))
	}
	w := rows[0]
	if w.Offered != 11 || w.Admitted != 10 || w.Rejected != 1 || w.Completed != 10 || w.Failed != 1 {
		t.Errorf("counts %+v", w)
	}
	// Mean of 1..10 ms is 5.5 ms; nearest-rank p90 of 10 samples is the
	// 9th; max 10 ms.
	if math.Abs(w.MeanRT-0.0055) > 1e-12 || math.Abs(w.P90RT-0.009) > 1e-12 || math.Abs(w.MaxRT-0.010) > 1e-12 {
		t.Errorf("mean %v, p90 %v, max %v", w.MeanRT, w.P90RT, w.MaxRT)
	}
	if math.Abs(w.Utilization-0.5) > 1e-12 {
		t.Errorf("utilization %v, want 0.5", w.Utilization)
	}
	// Samples at 0.25, 0.5, 0.75 and 1 s.
	if math.Abs(w.Queue-0.625) > 1e-12 {
		t.Errorf("queue %v, want 0.625", w.Queue)
	}
	m := w.Measurements()
	if m.Elapsed != time.Second || m.Arrivals != 11 || m.Samples != 10 || m.P90RT != w.P90RT || m.Utilization != 0.5 || m.Throughput() != 10 {
		t.Errorf("measurements %+v", m)
	}
	// An empty period: NaN statistics, zero utilization.
	e.Run(2 * time.Second)
	w = rows[1]
	if !math.IsNaN(w.MeanRT) || !math.IsNaN(w.P90RT) || w.Utilization != 0 || math.Abs(w.Queue-1.625) > 1e-12 {
		t.Errorf("empty period %+v", w)
	}
	if got := strings.Join(w.Record(), ","); got != "2,0,0,0,0,0,NaN,NaN,NaN,0,1.625" {
		t.Errorf("Record() = %s", got)
	}
	if len(RowHeader) != len(w.Record()) {
		t.Error("RowHeader and Record disagree")
	}
	rec.Stop()
	e.Run(5 * time.Second)
	if len(rec.Rows()) != 2 {
		t.Errorf("%d rows after Stop", len(rec.Rows()))
	}
}

func TestRecorderP90NearestRank(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want float64 // ms
	}{{1, 1}, {2, 2}, {9, 9}, {11, 10}, {100, 90}, {101, 91}} {
		e := New(1)
		rec, _ := NewRecorder(e, RecorderConfig{})
		// Insert in reverse order to exercise the sort.
		for i := tc.n; i >= 1; i-- {
			rec.Complete(time.Duration(i) * time.Millisecond)
		}
		if w := rec.Flush(); math.Abs(w.P90RT-tc.want/1e3) > 1e-12 {
			t.Errorf("n=%d: p90 %v, want %v ms", tc.n, w.P90RT, tc.want)
		}
	}
}

func TestGateAndTrack(t *testing.T) {
	e := New(1)
	rec, _ := NewRecorder(e, RecorderConfig{})
	f, _ := NewFIFO(e, FIFOConfig{Servers: 1, QueueLimit: 1})
	n := 0
	g := &Gate{Engine: e, Recorder: rec,
		Admitter: AdmitFunc(func(now time.Time, r *Request) bool { n++; return n%2 == 1 }),
		Next:     &Visit{Engine: e, Station: f}}
	var outcomes []Outcome
	for range 6 {
		r := &Request{Demand: 1, OnFinish: func(r *Request) { outcomes = append(outcomes, r.Outcome) }}
		g.Handle(r)
	}
	e.Run(Forever)
	// Admitted 1, 3, 5: 1 served, 3 queued, 5 refused by the full queue.
	w := rec.Flush()
	if w.Offered != 6 || w.Admitted != 3 || w.Rejected != 3 || w.Completed != 2 || w.Failed != 1 {
		t.Errorf("row %+v", w)
	}
	want := []Outcome{Rejected, Rejected, Rejected, Rejected, Completed, Completed}
	if !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %v, want %v", outcomes, want)
	}
	if w.MeanRT != 1.5 {
		t.Errorf("mean RT %v, want 1.5 (1 s and 2 s)", w.MeanRT)
	}
}

func TestRequestFinishOnce(t *testing.T) {
	var order []string
	r := &Request{OnFinish: func(*Request) { order = append(order, "finish") }}
	r.Defer(func(*Request) { order = append(order, "first") })
	r.Defer(func(*Request) { order = append(order, "second") })
	if !r.Finish(time.Second, TimedOut) || r.Finish(2*time.Second, Completed) {
		t.Error("Finish: want true once, then false")
	}
	if !slices.Equal(order, []string{"second", "first", "finish"}) || r.Outcome != TimedOut || r.Finished != time.Second || !r.Done() {
		t.Errorf("order %v, request %+v", order, r)
	}
}
