// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

// scenario runs a small but complete system: Poisson arrivals and
// closed-loop users through a random-dropping gate into a listen queue in
// front of an M/M/1 server, with the server's utilization and its mean
// queue (10 samples a second) read every second. It returns the request
// trace and the rows as text.
func scenario(tb testing.TB, seed uint64, horizon time.Duration) (trace, rows string) {
	e := New(seed)
	var b strings.Builder
	f, err := NewFIFO(e, FIFOConfig{Servers: 1, QueueLimit: 20, Timeout: 150 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	busy, err := NewBusy(e, f.Busy, "server")
	if err != nil {
		tb.Fatal(err)
	}
	queue, err := NewSampler(e, 100*time.Millisecond, func() float64 { return float64(f.Waiting()) })
	if err != nil {
		tb.Fatal(err)
	}
	var rb strings.Builder
	if _, err := e.Every(time.Second, func() {
		u, err := busy.Utilization(e.Time())
		if err != nil {
			tb.Error(err)
		}
		fmt.Fprintf(&rb, "%v,%.6f,%.3f\n", e.Now(), u, queue.Mean())
	}); err != nil {
		tb.Fatal(err)
	}
	drop := e.Stream("gate")
	gate := &Gate{Engine: e, Next: &Visit{Engine: e, Station: f},
		Admitter: AdmitFunc(func(time.Time, *Request) bool { return drop.Float64() > 0.1 })}
	demand, _ := dist.NewExponential(0.012)
	rate, _ := dist.ParseSchedule("0s:50,20s:120,40s:50")
	logf := func(r *Request) {
		fmt.Fprintf(&b, "%d %d %v %v %s\n", r.ID, r.User, r.Sent, r.Finished, r.Outcome)
	}
	open, err := NewOpen(e, OpenConfig{Arrivals: dist.Poisson{Rate: rate}, Types: []RequestType{{Demand: demand}}, Target: gate, OnFinish: logf})
	if err != nil {
		tb.Fatal(err)
	}
	think, _ := dist.ParseDuration("exp:0.7s,max=7s")
	users, err := NewUsers(e, UsersConfig{Count: dist.Schedule{}, Think: think, Types: []RequestType{{Demand: demand}}, Target: gate, OnFinish: logf})
	if err != nil {
		tb.Fatal(err)
	}
	users.SetCount(10)
	open.Start()
	e.Run(horizon)
	return b.String(), rb.String()
}

func TestDeterminism(t *testing.T) {
	t1, r1 := scenario(t, 1, 60*time.Second)
	t2, r2 := scenario(t, 1, 60*time.Second)
	t3, r3 := scenario(t, 2, 60*time.Second)
	if t1 != t2 || r1 != r2 {
		t.Error("same seed gave different runs")
	}
	if t1 == t3 || r1 == r3 {
		t.Error("different seeds gave identical runs")
	}
	if strings.Count(r1, "\n") != 60 || strings.Count(t1, "\n") < 4000 {
		t.Errorf("%d rows, %d requests: the scenario did not run", strings.Count(r1, "\n"), strings.Count(t1, "\n"))
	}
	for _, o := range []string{"completed", "rejected", "timed_out"} {
		if !strings.Contains(t1, o) {
			t.Errorf("no %s request in the trace", o)
		}
	}
}

// benchSteps starts 1000 chains of the self-rescheduling event fn on e
// and measures e's steps, in events per second.
func benchSteps(b *testing.B, e *Engine, fn func()) {
	for range 1000 {
		e.After(0, fn)
	}
	e.Run(0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEngine measures raw event throughput: 1000 self-rescheduling
// events with pseudo-random delays, so the heap holds 1000 entries.
func BenchmarkEngine(b *testing.B) {
	e := New(1)
	x := uint64(88172645463325252)
	var fn func()
	fn = func() {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		e.After(time.Duration(x%1_000_000), fn)
	}
	benchSteps(b, e, fn)
}

// BenchmarkEngineTimerCancel schedules and cancels a timeout per event, as
// a listen queue with timeouts does.
func BenchmarkEngineTimerCancel(b *testing.B) {
	e := New(1)
	x := uint64(88172645463325252)
	noop := func() {}
	var fn func()
	fn = func() {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		t := e.After(time.Second, noop)
		e.After(time.Duration(x%1_000_000), fn)
		t.Stop()
	}
	benchSteps(b, e, fn)
}

// BenchmarkMM1 runs a complete 1000 s M/M/1 at 100 req/s (ρ = 0.8) per
// iteration: Poisson source, gate, FIFO server, utilization read every
// second.
func BenchmarkMM1(b *testing.B) {
	var events uint64
	for range b.N {
		e := New(1)
		f, _ := NewFIFO(e, FIFOConfig{Servers: 1})
		busy, _ := NewBusy(e, f.Busy, "server")
		_, _ = e.Every(time.Second, func() { _, _ = busy.Utilization(e.Time()) })
		rate, _ := dist.ConstantSchedule(100)
		demand, _ := dist.NewExponential(0.008)
		src, _ := NewOpen(e, OpenConfig{Arrivals: dist.Poisson{Rate: rate}, Types: []RequestType{{Demand: demand}},
			Target: &Gate{Engine: e, Next: &Visit{Engine: e, Station: f}}})
		src.Start()
		e.Run(1000 * time.Second)
		events += e.Processed()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
