// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// sameMeasurements compares two Measurements treating NaN as equal to NaN.
func sameMeasurements(a, b sluice.Measurements) bool {
	eq := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	return a.Elapsed == b.Elapsed && a.Class == b.Class &&
		eq(a.Arrivals, b.Arrivals) && eq(a.Admitted, b.Admitted) &&
		eq(a.Rejected, b.Rejected) && eq(a.Completed, b.Completed) &&
		eq(a.Samples, b.Samples) && eq(a.MeanRT, b.MeanRT) && eq(a.P90RT, b.P90RT) &&
		eq(a.Utilization, b.Utilization) && eq(a.Queue, b.Queue)
}

func TestRecorderPeriods(t *testing.T) {
	nan := math.NaN()
	r, err := NewRecorder(100, t0)
	if err != nil {
		t.Fatal(err)
	}
	type event = func(r *Recorder)
	arrive := func(r *Recorder) { r.Arrive() }
	admit := func(r *Recorder) { r.Admit() }
	reject := func(r *Recorder) { r.Reject() }
	done := func(rt time.Duration, sample bool) event {
		return func(r *Recorder) { r.Complete(rt, sample) }
	}
	periods := []struct {
		name          string
		events        []event
		wantCompleted int64 // Completed() just before Collect
		at            time.Time
		want          sluice.Measurements
	}{
		{
			name: "mixed traffic, a timeout excluded from the window",
			events: []event{arrive, arrive, arrive, arrive, arrive, admit, admit, admit, reject, reject,
				done(10*time.Millisecond, true), done(30*time.Millisecond, true), done(5*time.Second, false)},
			wantCompleted: 3,
			at:            t0.Add(time.Second),
			want: sluice.Measurements{Elapsed: time.Second, Arrivals: 5, Admitted: 3, Rejected: 2, Completed: 3,
				Samples: 2, MeanRT: 0.02, P90RT: 0.03, Utilization: nan},
		},
		{
			name: "idle period: no samples gives NaN response times",
			at:   t0.Add(2500 * time.Millisecond),
			want: sluice.Measurements{Elapsed: 1500 * time.Millisecond, MeanRT: nan, P90RT: nan, Utilization: nan},
		},
		{
			name:          "completions only, 1..100 ms",
			events:        completions(seqMS(1, 100)),
			wantCompleted: 100,
			at:            t0.Add(3500 * time.Millisecond),
			want: sluice.Measurements{Elapsed: time.Second, Completed: 100, Samples: 100,
				MeanRT: 0.0505, P90RT: 0.090, Utilization: nan},
		},
		{
			name:          "more samples than the window: the window keeps the last 100",
			events:        completions(append(seqMS(1000, 1049), seqMS(1, 100)...)),
			wantCompleted: 150,
			at:            t0.Add(4 * time.Second),
			want: sluice.Measurements{Elapsed: 500 * time.Millisecond, Completed: 150, Samples: 100,
				MeanRT: 0.0505, P90RT: 0.090, Utilization: nan},
		},
		{
			name:   "clock going backwards gives zero elapsed",
			events: []event{arrive, reject},
			at:     t0.Add(3 * time.Second),
			want:   sluice.Measurements{Elapsed: 0, Arrivals: 1, Rejected: 1, MeanRT: nan, P90RT: nan, Utilization: nan},
		},
	}
	for _, p := range periods {
		for _, e := range p.events {
			e(r)
		}
		if got := r.Completed(); got != p.wantCompleted {
			t.Errorf("%s: Completed() = %d, want %d", p.name, got, p.wantCompleted)
		}
		got := r.Collect(p.at)
		// MeanRT is computed from rounded nanoseconds; compare it with a
		// tolerance and the rest exactly.
		if math.Abs(got.MeanRT-p.want.MeanRT) < 1e-12 {
			got.MeanRT = p.want.MeanRT
		}
		if !sameMeasurements(got, p.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", p.name, got, p.want)
		}
		if r.Completed() != 0 || r.Samples() != 0 {
			t.Errorf("%s: after Collect Completed() = %d, Samples() = %d; want 0, 0", p.name, r.Completed(), r.Samples())
		}
	}
}

func completions(rts []time.Duration) []func(*Recorder) {
	var ev []func(*Recorder)
	for _, rt := range rts {
		ev = append(ev, func(r *Recorder) { r.Complete(rt, true) })
	}
	return ev
}

func TestNewRecorderError(t *testing.T) {
	if _, err := NewRecorder(0, t0); err == nil {
		t.Fatal("NewRecorder(0) succeeded")
	}
}

// TestRecorderConcurrentNothingLost runs the hot path from several
// goroutines while another goroutine collects periods; the sums over all
// periods must equal what was recorded.
func TestRecorderConcurrentNothingLost(t *testing.T) {
	const workers, per = 4, 3000
	r, err := NewRecorder(workers*per, t0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range per {
				r.Arrive()
				if i%3 == 0 {
					r.Reject()
					continue
				}
				r.Admit()
				r.Complete(time.Millisecond, i%5 != 0)
			}
		})
	}
	var sum sluice.Measurements
	add := func(m sluice.Measurements) {
		sum.Elapsed += m.Elapsed
		sum.Arrivals += m.Arrivals
		sum.Admitted += m.Admitted
		sum.Rejected += m.Rejected
		sum.Completed += m.Completed
		sum.Samples += m.Samples
	}
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		now := t0
		for {
			select {
			case <-stop:
				return
			default:
			}
			now = now.Add(time.Millisecond)
			add(r.Collect(now))
		}
	}()
	wg.Wait()
	close(stop)
	<-collected
	last := r.Collect(t0.Add(time.Hour))
	add(last)

	// Per worker: i%3 == 0 rejected (1000 of 3000), the rest admitted and
	// completed; of those, i%5 == 0 are not samples.
	var rejected, admitted, samples float64
	for i := range per {
		if i%3 == 0 {
			rejected++
			continue
		}
		admitted++
		if i%5 != 0 {
			samples++
		}
	}
	want := sluice.Measurements{
		Elapsed:   time.Hour,
		Arrivals:  workers * per,
		Admitted:  workers * admitted,
		Rejected:  workers * rejected,
		Completed: workers * admitted,
		Samples:   workers * samples,
	}
	if sum != want {
		t.Errorf("sum over periods = %+v\nwant %+v", sum, want)
	}
}

func TestRecorderHotPathNoAllocs(t *testing.T) {
	r, err := NewRecorder(100, t0)
	if err != nil {
		t.Fatal(err)
	}
	a := testing.AllocsPerRun(100, func() {
		r.Arrive()
		r.Admit()
		r.Reject()
		r.Complete(time.Millisecond, true)
		r.Complete(time.Millisecond, false)
		r.Completed()
	})
	if a != 0 {
		t.Errorf("hot path allocates %v times per request", a)
	}
	if a := testing.AllocsPerRun(10, func() { r.Collect(t0) }); a != 0 {
		t.Errorf("Collect allocates %v times per call", a)
	}
}

func BenchmarkRecordRecorder(b *testing.B) { benchRecorder(b, false) }

func BenchmarkRecordRecorderParallel(b *testing.B) { benchRecorder(b, true) }

func benchRecorder(b *testing.B, parallel bool) {
	r, err := NewRecorder(100, t0)
	if err != nil {
		b.Fatal(err)
	}
	benchRecord(b, parallel, func(d time.Duration) { r.Complete(d, true) })
}

// Fail marks completions as failed without changing how they are counted
// or sampled; Collect reports and resets the failures.
func TestRecorderFailed(t *testing.T) {
	now := time.Unix(0, 0)
	r, err := NewRecorder(16, now)
	if err != nil {
		t.Fatal(err)
	}
	r.Complete(10*time.Millisecond, true)
	r.Complete(5*time.Second, true)
	r.Fail()
	r.Complete(time.Millisecond, false)
	r.Fail()
	m := r.Collect(now.Add(time.Second))
	if m.Completed != 3 || m.Failed != 2 || m.Samples != 2 {
		t.Fatalf("completed %v failed %v samples %v", m.Completed, m.Failed, m.Samples)
	}
	if g := m.Goodput(); g != 1 {
		t.Fatalf("goodput %v, want 1/s", g)
	}
	if m := r.Collect(now.Add(2 * time.Second)); m.Failed != 0 {
		t.Fatalf("failures not reset: %v", m.Failed)
	}
}
