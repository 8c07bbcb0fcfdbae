// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

// newStage returns New(opts, now), failing tb if New refuses opts.
func newStage(tb testing.TB, opts Options, now time.Time) *Stage {
	tb.Helper()
	s, err := New(opts, now)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func sedaStage(t *testing.T, classes []string, shadow bool) *Stage {
	t.Helper()
	cfg := control.DefaultSEDAConfig()
	cfg.Target, cfg.InitialRate, cfg.NReq = 100*time.Millisecond, 100, 20
	if len(classes) > 1 {
		cfg.Classes = len(classes)
	}
	s := newStage(t, Options{Name: "api", Controller: &cfg, ClassNames: classes, Shadow: shadow, Burst: 1}, time.Now())
	return s
}

// A SEDA stage whose requests take 1 s (10× the 100 ms target) cuts its
// rate after nreq = 20 completions; the runner's decisions are in force
// and in the history.
func TestStageSEDACutsRateUnderSlowResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sedaStage(t, nil, false)
		ctx, cancel := context.WithCancel(t.Context())
		go s.Run(ctx)
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			tk, err := s.Enter(ctx, 0)
			if err != nil {
				t.Fatalf("request %d rejected at the initial rate: %v", i, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Second)
				tk.Done(sluice.Success)
			}()
			time.Sleep(11 * time.Millisecond) // under 100/s with burst 1
		}
		wg.Wait()
		// Totals are accumulated at each collection: wait one period.
		time.Sleep(1100 * time.Millisecond)
		cancel()
		st := s.State(10)
		if st.Setting >= 100 || len(st.Decisions) == 0 {
			t.Fatalf("rate not cut: %+v", st)
		}
		var cut *DecisionState
		for i := range st.Decisions {
			if d := &st.Decisions[i]; d.Acted && d.New < d.Old {
				cut = d
			}
		}
		if cut == nil || cut.New != st.Setting {
			t.Fatalf("no acted cut matching the setting %v in %+v", st.Setting, st.Decisions)
		}
		if got := s.gates.Rates()[0]; got != st.Setting {
			t.Fatalf("gate rate %v, decision %v", got, st.Setting)
		}
		tot := s.Totals(0)
		if tot.Completed != 20 || tot.Admitted != 20 || tot.Offered != 20 {
			t.Fatalf("totals %+v", tot)
		}
	})
}

// At 10/s with burst 1, back-to-back requests are rejected with an error
// wrapping ErrRejected and counted; shadow mode admits them and counts them
// as would-be rejections.
func TestStageRejectAndShadow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, shadow := range []bool{false, true} {
			cfg := control.StaticRateConfig{Rate: 10, Period: time.Second}
			s := newStage(t, Options{Name: "x", Controller: &cfg, Burst: 1, Shadow: shadow}, time.Now())
			var rejected int
			for i := 0; i < 5; i++ {
				tk, err := s.Enter(t.Context(), 0)
				if errors.Is(err, sluice.ErrRejected) {
					rejected++
					continue
				}
				tk.Done(sluice.Success)
			}
			time.Sleep(time.Second)
			s.Step(time.Now())
			tot := s.Totals(0)
			if !shadow && (rejected != 4 || tot.Rejected != 4 || tot.Admitted != 1) {
				t.Fatalf("rejected %d, totals %+v", rejected, tot)
			}
			if shadow && (rejected != 0 || tot.ShadowRejected != 4 || tot.Admitted != 5) {
				t.Fatalf("shadow: rejected %d, totals %+v", rejected, tot)
			}
		}
	})
}

// A concurrency cap of 2 with a queue: the third request waits FIFO, a
// cancelled waiter leaves, and no slot leaks.
func TestStageConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := control.StaticConcurrencyConfig{Limit: 2, Period: time.Second}
		s := newStage(t, Options{Name: "c", Controller: &cfg, MaxQueue: 4, QueueTimeout: 500 * time.Millisecond}, time.Now())
		a, _ := s.Enter(t.Context(), 0)
		b, _ := s.Enter(t.Context(), 0)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { _, err := s.Enter(ctx, 0); errc <- err }()
		synctest.Wait()
		if q := s.State(0).InFlightLimited.Queued; q != 1 {
			t.Fatalf("queued %d", q)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		// Queue timeout: 500 ms without a free slot → rejected.
		_, err := s.Enter(t.Context(), 0)
		if !errors.Is(err, sluice.ErrRejected) {
			t.Fatalf("queue timeout: %v", err)
		}
		a.Done(sluice.Success)
		b.Done(sluice.Failure)
		st := s.State(0)
		if st.InFlightLimited.InFlight != 0 || st.InFlightLimited.Queued != 0 {
			t.Fatalf("leaked: %+v", st.InFlightLimited)
		}
		time.Sleep(time.Second)
		s.Step(time.Now())
		if tot := s.Totals(0); tot.Errors != 1 || tot.Completed != 2 || tot.Rejected != 2 {
			t.Fatalf("totals %+v", tot)
		}
	})
}

// Multi-class SEDA: the high class's slow responses cut the low class's
// rate (÷ adjlo_d) while the high class keeps its own.
func TestStageClassAware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sedaStage(t, []string{"gold", "bronze"}, false)
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			tk, err := s.Enter(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() { defer wg.Done(); time.Sleep(time.Second); tk.Done(sluice.Success) }()
			time.Sleep(11 * time.Millisecond)
		}
		wg.Wait()
		ds := s.Step(time.Now())
		if len(ds) != 2 { // both classes are due: gold by nreq... and bronze by its timeout
			t.Fatalf("decisions %d: %+v", len(ds), ds)
		}
		r := s.gates.Rates()
		if r[0] != 100 || r[1] != 10 {
			t.Fatalf("class rates %v", r)
		}
		// An unknown class index is the lowest class.
		if _, err := s.Enter(t.Context(), 7); err != nil && !errors.Is(err, sluice.ErrRejected) {
			t.Fatal(err)
		}
		if s.Totals(1).Offered != 0 { // not collected yet
			t.Fatal("totals before collection")
		}
	})
}

// A utilization sensor error reaches the controller as NaN (it holds) and
// the admin view names it.
func TestStageSensorError(t *testing.T) {
	cfg := control.DefaultKihlConfig()
	now := time.Now()
	s := newStage(t, Options{Name: "k", Controller: &cfg, Utilization: failing{}}, now)
	ds := s.Step(now.Add(time.Second))
	if len(ds) != 1 || ds[0].Acted || !math.IsNaN(ds[0].Inputs.Utilization) {
		t.Fatalf("decision %+v", ds)
	}
	if p := s.Totals(0).Last; p == nil || p.SensorError == "" {
		t.Fatalf("sensor error not shown: %+v", p)
	}
}

type failing struct{}

func (failing) Utilization(time.Time) (float64, error) {
	return 0, fmt.Errorf("read /proc/stat: no such file")
}
func (failing) Describe() string { return "failing" }

func TestStageAdmitDoneOnceAndTarget(t *testing.T) {
	s := sedaStage(t, nil, false)
	done, err := s.Admit(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	done(sluice.Success)
	done(sluice.Success)
	s.Step(time.Now().Add(2 * time.Second))
	if c := s.Totals(0).Completed; c != 1 {
		t.Fatalf("completed %d", c)
	}
	if err := s.SetTarget(2 * time.Second); err != nil || s.State(0).Target != "2s" {
		t.Fatalf("SetTarget: %v %q", err, s.State(0).Target)
	}
	k, _ := New(Options{Name: "k", Controller: &control.KihlConfig{Period: time.Second, RhoRef: 0.8, K: 20, Ti: time.Second, MaxRate: 10}}, time.Now())
	if err := k.SetTarget(time.Second); err == nil {
		t.Fatal("kihl has no response-time target")
	}
	if _, err := New(Options{Name: "bad", Controller: &control.SEDAConfig{}}, time.Now()); err == nil {
		t.Fatal("invalid controller accepted")
	}
}

// The three outcomes of the stage API: a success is a completion and a
// response-time sample, a failure a failed completion (fast: no sample),
// an ignored request a completion that is neither a sample nor a
// failure.
func TestStageAdmitOutcomes(t *testing.T) {
	for _, tc := range []struct {
		o               sluice.Outcome
		samples, failed float64
	}{
		{sluice.Success, 1, 0},
		{sluice.Failure, 0, 1},
		{sluice.Ignore, 0, 0},
	} {
		synctest.Test(t, func(t *testing.T) {
			s := sedaStage(t, nil, false)
			done, err := s.Admit(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
			done(tc.o)
			ds := s.Step(time.Now().Add(2 * time.Second))
			if len(ds) != 1 {
				t.Fatalf("%v: %d decisions", tc.o, len(ds))
			}
			in := ds[0].Inputs
			if in.Completed != 1 || in.Samples != tc.samples || in.Failed != tc.failed {
				t.Errorf("%v: completed %g samples %g failed %g, want 1 %g %g", tc.o, in.Completed, in.Samples, in.Failed, tc.samples, tc.failed)
			}
			if e := s.Totals(0).Errors; e != uint64(tc.failed) {
				t.Errorf("%v: errors %d", tc.o, e)
			}
		})
	}
}

// A controller given as a Go literal with only the fields that matter
// gets the defaults of the others (control.WithDefaults), and the
// caller's value is not modified.
func TestStageSparseController(t *testing.T) {
	ctrl := &control.StaticConcurrencyConfig{Limit: 3}
	s := newStage(t, Options{Name: "db", Controller: ctrl}, time.Now())
	if p, want := s.Period(), control.DefaultStaticConcurrencyConfig().Period; p != want {
		t.Errorf("period %v, want the default %v", p, want)
	}
	if ctrl.Period != 0 {
		t.Errorf("the caller's configuration was modified: period %v", ctrl.Period)
	}
}

// A stage's Poll is its controller's period, or MaxPoll for a
// sample-triggered one; Runner.Step steps it at the given now and shows
// OnStep only the steps that took a decision.
func TestRunnerStepsStage(t *testing.T) {
	rate := control.DefaultStaticRateConfig()
	rate.Rate = 10
	s := newStage(t, Options{Name: "r", Controller: &rate}, t0)
	if s.Poll() != s.Period() {
		t.Errorf("poll %v, want the period %v", s.Poll(), s.Period())
	}
	if st := sedaStage(t, nil, false); st.Poll() != MaxPoll {
		t.Errorf("SEDA stage polls every %v, want MaxPoll", st.Poll())
	}
	var seen []time.Time
	r := Runner{Stepper: s, OnStep: func(now time.Time, ds []sluice.Decision) {
		if len(ds) != 1 || !ds[0].At.Equal(now) {
			t.Errorf("OnStep at %v: %+v", now, ds)
		}
		seen = append(seen, now)
	}}
	if ds := r.Step(t0.Add(s.Period() / 2)); len(ds) != 0 {
		t.Fatalf("a step half a period in: %+v", ds)
	}
	if ds := r.Step(t0.Add(s.Period())); len(ds) != 1 {
		t.Fatalf("a step after a period: %+v", ds)
	}
	if len(seen) != 1 || !seen[0].Equal(t0.Add(s.Period())) {
		t.Errorf("OnStep saw %v", seen)
	}
}

// A class's totals (ClassTotals, embedded in ClassState) stand in the
// admin API's class object under their own names, between the class's
// name and its deadline and fair-eviction counts, as before they had a
// type of their own: a JSON name on the embedded field would nest them.
func TestClassStateJSON(t *testing.T) {
	cs := ClassState{Name: "gold", ClassTotals: ClassTotals{Offered: 1, Admitted: 2, Rejected: 3, ShadowRejected: 4,
		Completed: 5, Errors: 6}, Deadline: 7, FairEvicted: 8}
	got, err := json.Marshal(cs)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"name":"gold","offered":1,"admitted":2,"rejected":3,"shadow_rejected":4,"completed":5,"errors":6,` +
		`"rejected_deadline":7,"rejected_fair_evicted":8}`
	if string(got) != want {
		t.Fatalf("ClassState JSON\n%s\nwant\n%s", got, want)
	}
}
