// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

// submitAt submits a job of the given work at time at and records its
// finish time in *done.
func submitAt(e *Engine, st Station, at time.Duration, work float64, done *time.Duration) *Job {
	j := &Job{Work: work, Done: func(j *Job) { *done = j.Finished }}
	e.Schedule(at, func() { st.Submit(j) })
	return j
}

func TestPSByHand(t *testing.T) {
	cases := []struct {
		name  string
		cfg   PSConfig
		at    []time.Duration
		work  []float64
		want  []time.Duration
		busyT float64 // Busy() at the end
	}{
		// One core: A alone for 0.5 s, then both at 1/2: A ends at 1.5 s,
		// B (0.5 left) alone until 2 s.
		{"shared core", PSConfig{Capacity: 1, MaxRate: 1}, []time.Duration{0, 500 * time.Millisecond},
			[]float64{1, 1}, []time.Duration{1500 * time.Millisecond, 2 * time.Second}, 2},
		// Two cores, one job each: both at rate 1, never more.
		{"two cores two jobs", PSConfig{Capacity: 2, MaxRate: 1}, []time.Duration{0, 0},
			[]float64{1, 2}, []time.Duration{time.Second, 2 * time.Second}, 1 + 0.5},
		// Two cores, three jobs: each at 2/3 until all finish at 1.5 s.
		{"two cores three jobs", PSConfig{Capacity: 2, MaxRate: 1}, []time.Duration{0, 0, 0},
			[]float64{1, 1, 1}, []time.Duration{1500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond}, 1.5},
		// A link of 1000 B/s: 500 B and 1500 B share 500 B/s each; the
		// first ends at 1 s, the second (1000 B left) alone at 2 s.
		{"link", PSConfig{Capacity: 1000}, []time.Duration{0, 0},
			[]float64{500, 1500}, []time.Duration{time.Second, 2 * time.Second}, 2},
		// Zero work leaves at once.
		{"zero work", PSConfig{Capacity: 1}, []time.Duration{time.Second}, []float64{0}, []time.Duration{time.Second}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := New(1)
			p, err := NewPS(e, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]time.Duration, len(tc.work))
			for i := range tc.work {
				submitAt(e, p, tc.at[i], tc.work[i], &got[i])
			}
			e.Run(10 * time.Second)
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("job %d finished at %v, want %v", i, got[i], tc.want[i])
				}
			}
			if b := p.Busy(); math.Abs(b-tc.busyT) > 1e-9 {
				t.Errorf("Busy() = %v, want %v", b, tc.busyT)
			}
			if p.InSystem() != 0 || p.Backlog() != 0 {
				t.Errorf("not empty at the end: %d jobs, backlog %v", p.InSystem(), p.Backlog())
			}
		})
	}
}

func TestPSBacklog(t *testing.T) {
	e := New(1)
	link, err := NewLink(e, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var d1, d2 time.Duration
	submitAt(e, link, 0, 500, &d1)
	submitAt(e, link, 0, 1500, &d2)
	for _, tc := range []struct {
		at      time.Duration
		backlog float64
		n       int
	}{{0, 2000, 2}, {500 * time.Millisecond, 1500, 2}, {1500 * time.Millisecond, 500, 1}, {3 * time.Second, 0, 0}} {
		e.Run(tc.at)
		if got := link.Backlog(); math.Abs(got-tc.backlog) > 1e-6 || link.InSystem() != tc.n {
			t.Errorf("at %v: backlog %v with %d jobs, want %v with %d", tc.at, got, link.InSystem(), tc.backlog, tc.n)
		}
	}
}

func TestPSValidate(t *testing.T) {
	e := New(1)
	for _, tc := range []struct {
		cfg  PSConfig
		want string
	}{
		{PSConfig{Capacity: 0}, "Capacity = 0"},
		{PSConfig{Capacity: math.Inf(1)}, "Capacity = +Inf"},
		{PSConfig{Capacity: 1, MaxRate: -1}, "MaxRate = -1"},
		{PSConfig{Capacity: 1, MaxRate: math.NaN()}, "MaxRate = NaN"},
	} {
		if _, err := NewPS(e, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPS(%+v) error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// openLoad runs Poisson arrivals at lambda with the given demand into
// target for the horizon.
func openLoad(t *testing.T, e *Engine, lambda float64, demand dist.Dist, target Handler, horizon time.Duration) {
	t.Helper()
	rate, err := dist.ConstantSchedule(lambda)
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewOpen(e, OpenConfig{Arrivals: dist.Poisson{Rate: rate}, Types: []RequestType{{Demand: demand}}, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	src.Start()
	e.Run(horizon)
}

func exp(t *testing.T, mean float64) dist.Dist {
	d, err := dist.NewExponential(mean)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func det(t *testing.T, v float64) dist.Dist {
	d, err := dist.NewDeterministic(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// meanWait runs an open Poisson load through st and returns the mean
// response time and mean wait (start − enqueue) of completed jobs, and the
// utilization.
func meanWait(t *testing.T, e *Engine, st Station, lambda float64, demand dist.Dist, horizon time.Duration) (rt, wait, util float64, n int) {
	var sumRT, sumW float64
	target := HandlerFunc(func(r *Request) {
		st.Submit(&Job{Req: r, Work: r.Demand, Done: func(j *Job) {
			// Skip the warm-up.
			if j.Enqueued > 100*time.Second {
				sumRT += (j.Finished - j.Enqueued).Seconds()
				sumW += (j.Started - j.Enqueued).Seconds()
				n++
			}
			r.Finish(e.Now(), j.Outcome)
		}})
	})
	openLoad(t, e, lambda, demand, target, horizon)
	return sumRT / float64(n), sumW / float64(n), st.Busy() / horizon.Seconds(), n
}

// TestMM1PS checks the processor-sharing mean response time E[X]/(1 − ρ)
// for exponential and (by insensitivity) deterministic service.
func TestMM1PS(t *testing.T) {
	for _, tc := range []struct {
		name   string
		demand dist.Dist
	}{{"M/M/1-PS", exp(t, 0.01)}, {"M/D/1-PS", det(t, 0.01)}} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(3)
			cpu, err := NewCPU(e, 1)
			if err != nil {
				t.Fatal(err)
			}
			const lambda, ex = 60.0, 0.01
			rho := lambda * ex
			rt, _, util, n := meanWait(t, e, cpu, lambda, tc.demand, 3000*time.Second)
			want := ex / (1 - rho)
			t.Logf("mean RT %.5f s over %d jobs (want %.5f), utilization %.4f", rt, n, want, util)
			if math.Abs(rt-want)/want > 0.04 {
				t.Errorf("mean response time %.5f s over %d jobs, want %.5f (E[X]/(1−ρ))", rt, n, want)
			}
			if math.Abs(util-rho) > 0.01 {
				t.Errorf("utilization %.4f, want %.4f", util, rho)
			}
		})
	}
}

// TestMM1FIFO checks the M/M/1 mean wait ρE[X]/(1 − ρ) and the M/M/2 mean
// wait from the Erlang C formula.
func TestMMcFIFO(t *testing.T) {
	erlangC := func(c int, a float64) float64 {
		sum, term := 0.0, 1.0
		for k := 0; k < c; k++ {
			if k > 0 {
				term *= a / float64(k)
			}
			sum += term
		}
		top := term * a / float64(c) * float64(c) / (float64(c) - a)
		return top / (sum + top)
	}
	for _, tc := range []struct {
		c      int
		lambda float64
	}{{1, 60}, {2, 150}} {
		e := New(4)
		f, err := NewFIFO(e, FIFOConfig{Servers: tc.c})
		if err != nil {
			t.Fatal(err)
		}
		const ex = 0.01
		a := tc.lambda * ex
		_, wait, util, n := meanWait(t, e, f, tc.lambda, exp(t, ex), 3000*time.Second)
		want := erlangC(tc.c, a) * ex / (float64(tc.c) - a)
		t.Logf("M/M/%d: mean wait %.5f s over %d jobs (want %.5f), utilization %.4f", tc.c, wait, n, want, util)
		if tc.c == 1 && math.Abs(want-a*ex/(1-a)) > 1e-12 {
			t.Fatalf("Erlang C for c=1 disagrees with ρE[X]/(1−ρ)")
		}
		if math.Abs(wait-want)/want > 0.05 {
			t.Errorf("M/M/%d: mean wait %.5f s over %d jobs, want %.5f", tc.c, wait, n, want)
		}
		if rho := a / float64(tc.c); math.Abs(util-rho) > 0.01 {
			t.Errorf("M/M/%d: utilization %.4f, want %.4f", tc.c, util, rho)
		}
	}
}

func TestFIFOQueueLimitAndTimeout(t *testing.T) {
	e := New(1)
	f, err := NewFIFO(e, FIFOConfig{Servers: 1, QueueLimit: 2, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]*Job, 5)
	var log []string
	for i := range jobs {
		jobs[i] = &Job{Work: 3, Done: func(j *Job) {
			log = append(log, j.Outcome.String()+"@"+j.Finished.String())
		}}
	}
	f.Submit(jobs[0]) // serves 0–3 s
	f.Submit(jobs[1]) // waits, times out at 1 s
	e.Run(500 * time.Millisecond)
	f.Submit(jobs[2]) // waits from 0.5 s, times out at 1.5 s
	f.Submit(jobs[3]) // queue full: rejected at once
	if f.Waiting() != 2 || f.InSystem() != 3 || f.InService() != 1 {
		t.Errorf("waiting %d, in system %d", f.Waiting(), f.InSystem())
	}
	if jobs[3].Outcome != Rejected || len(log) != 1 {
		t.Fatalf("fourth job: outcome %v, log %v", jobs[3].Outcome, log)
	}
	e.Run(2 * time.Second)
	f.Submit(jobs[4]) // waits from 2 s, served 3–6 s
	if got := f.Backlog(); math.Abs(got-(1+3)) > 1e-9 {
		t.Errorf("backlog at 2 s: %v, want 4 (1 s left + 3 s waiting)", got)
	}
	e.Run(Forever)
	want := []string{"rejected@500ms", "timed_out@1s", "timed_out@1.5s", "completed@3s", "completed@6s"}
	if strings.Join(log, " ") != strings.Join(want, " ") {
		t.Errorf("log %v, want %v", log, want)
	}
	if jobs[4].Started != 3*time.Second {
		t.Errorf("last job started at %v, want 3s", jobs[4].Started)
	}
	if b := f.Busy(); math.Abs(b-6) > 1e-9 {
		t.Errorf("Busy() = %v, want 6", b)
	}
}

func TestFIFOHoldMode(t *testing.T) {
	e := New(1)
	f, err := NewFIFO(e, FIFOConfig{Servers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var started []*Job
	done := 0
	for range 3 {
		f.Submit(&Job{OnStart: func(j *Job) { started = append(started, j) }, Done: func(*Job) { done++ }})
	}
	if len(started) != 2 || f.Waiting() != 1 || f.InService() != 2 {
		t.Fatalf("started %d, waiting %d", len(started), f.Waiting())
	}
	if f.Release(&Job{}) {
		t.Error("Release of a foreign job succeeded")
	}
	e.Run(time.Second)
	if !f.Release(started[0]) || f.Release(started[0]) {
		t.Error("Release: want true once, then false")
	}
	if len(started) != 3 || done != 1 {
		t.Errorf("after one release: started %d, done %d", len(started), done)
	}
	// Two servers busy for 1 s: busy fraction 1 for 1 s.
	if b := f.Busy(); math.Abs(b-1) > 1e-9 {
		t.Errorf("Busy() = %v, want 1", b)
	}
}

func TestFIFOValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  FIFOConfig
		want string
	}{
		{FIFOConfig{}, "Servers = 0"},
		{FIFOConfig{Servers: 1, QueueLimit: -1}, "QueueLimit = -1"},
		{FIFOConfig{Servers: 1, Timeout: -time.Second}, "Timeout = -1s"},
	} {
		if _, err := NewFIFO(New(1), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewFIFO(%+v) error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// Cancel on a hand-worked trace: one core, A (1 s) and B (1 s) from 0,
// C (0.5 s) from 0.2 s. At 0.5 s B is cancelled: it had 0.1 + 0.3/3 =
// 0.2 s of work (1/2 of the core until 0.2 s, 1/3 after); its remaining
// 0.8 s is not done. A then has 0.8 left and C 0.4, at 1/2 each: C ends
// at 1.3 s, A (0.4 left) alone at 1.7 s — 0.8 s sooner than had B run.
// B's Done is never called, and a second Cancel, or one of a finished
// job, does nothing.
func TestPSCancel(t *testing.T) {
	e := New(1)
	p, err := NewCPU(e, 1)
	if err != nil {
		t.Fatal(err)
	}
	var a, b, c time.Duration
	submitAt(e, p, 0, 1, &a)
	jb := submitAt(e, p, 0, 1, &b)
	jc := submitAt(e, p, 200*time.Millisecond, 0.5, &c)
	var worked float64
	var ok, again bool
	e.Schedule(500*time.Millisecond, func() {
		worked, ok = p.Cancel(jb)
		_, again = p.Cancel(jb)
	})
	e.Run(10 * time.Second)
	if !ok || math.Abs(worked-0.2) > 1e-9 {
		t.Errorf("Cancel(B) = %v, %v; want 0.2 s of work, true", worked, ok)
	}
	if again {
		t.Error("a second Cancel(B) reported a job in service")
	}
	if b != 0 {
		t.Errorf("B's Done was called (finished at %v)", b)
	}
	if c != 1300*time.Millisecond || a != 1700*time.Millisecond {
		t.Errorf("C finished at %v, A at %v; want 1.3s and 1.7s", c, a)
	}
	if _, ok := p.Cancel(jc); ok {
		t.Error("Cancel of a finished job reported a job in service")
	}
	if p.InSystem() != 0 || p.Backlog() != 0 {
		t.Errorf("not empty at the end: %d jobs, backlog %v", p.InSystem(), p.Backlog())
	}
}
