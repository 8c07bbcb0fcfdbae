// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/stage"
)

// cpu is a scripted CPU guard: a reading per call, or an error.
type cpu struct {
	readings []float64
	err      error
	calls    []time.Time
}

func (c *cpu) Utilization(now time.Time) (float64, error) {
	c.calls = append(c.calls, now)
	if c.err != nil {
		return 0.5, c.err // a reading that must not be used
	}
	u := c.readings[0]
	c.readings = c.readings[1:]
	return u, nil
}

func voigtQueue(t *testing.T, period time.Duration, initial float64) *control.VoigtQueue {
	t.Helper()
	cfg := control.DefaultVoigtQueueConfig()
	cfg.Period, cfg.InitialRate = period, initial
	c, err := control.NewVoigtQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Step with explicit now: it ends the period (Collect), fills the queue
// and the CPU guard, runs the PD controller and puts its rate into force.
// Paper defaults (q_ref 100, Kp 1/16, Kd 1/4), initial rate 1000:
// 1 s: queue 180, CPU 50 % → 1000 + (100 − 180)/16 − (180 − 0)/4 = 950;
// 2 s: queue 20, CPU 95 % → the rise (+5 + 40 = +45) is refused by the guard;
// 3 s: queue 20, CPU unreadable (NaN: no guard), unchanged below q_ref → kept.
func TestStepRunsTheController(t *testing.T) {
	p := mustNew(t, Config{Rate: 1000, Burst: 20})
	q := 180.0
	guard := &cpu{readings: []float64{0.5, 0.95}}
	if err := p.SetControl(Control{Controller: voigtQueue(t, time.Second, 1000), Queue: func() float64 { return q },
		Utilization: guard}); err != nil {
		t.Fatal(err)
	}
	if p.Poll() != time.Second {
		t.Fatalf("poll %v, want the controller's period", p.Poll())
	}
	if _, _, ok := p.LastStep(); ok {
		t.Fatal("a last step before the first")
	}
	for range 3 {
		p.Admit(at(500), netip.Addr{})
	}
	ds := p.Step(at(1000))
	if len(ds) != 1 || ds[0].New != 950 || p.Rate() != 950 {
		t.Fatalf("1 s: %+v, rate in force %v; want 950", ds, p.Rate())
	}
	if in := ds[0].Inputs; in.Queue != 180 || in.Utilization != 0.5 || in.Arrivals != 3 || in.Elapsed != time.Second {
		t.Errorf("1 s: inputs %+v", in)
	}
	q = 20
	if ds = p.Step(at(2000)); ds[0].New != 950 || ds[0].Acted || !strings.Contains(ds[0].Reason, "CPU") {
		t.Fatalf("2 s, CPU 95 %%: %+v; want the rate kept by the guard", ds[0])
	}
	guard.err = errors.New("no reading")
	ds = p.Step(at(3000))
	if d := ds[0]; d.New != 950 || !math.IsNaN(d.Inputs.Utilization) || !strings.Contains(d.Reason, "unchanged") {
		t.Fatalf("3 s, no CPU reading: %+v", d)
	}
	m, guardErr, ok := p.LastStep()
	if !ok || m.Queue != 20 || !math.IsNaN(m.Utilization) || guardErr != "no reading" {
		t.Errorf("last step %+v, guard error %q", m, guardErr)
	}
	if len(guard.calls) != 3 || !guard.calls[2].Equal(at(3000)) {
		t.Errorf("guard read at %v", guard.calls)
	}
}

// Without a controller a step only ends the period; Poll is Control's
// period, else DefaultPeriod.
func TestStepWithoutController(t *testing.T) {
	p := mustNew(t, DefaultConfig())
	if p.Poll() != DefaultPeriod {
		t.Fatalf("poll %v, want %v", p.Poll(), DefaultPeriod)
	}
	if err := p.SetControl(Control{Period: -time.Second}); err == nil {
		t.Fatal("a negative period accepted")
	}
	if err := p.SetControl(Control{Period: 250 * time.Millisecond, Queue: func() float64 { return 7 }}); err != nil {
		t.Fatal(err)
	}
	p.Admit(at(10), netip.Addr{})
	if ds := p.Step(at(250)); ds != nil || p.Poll() != 250*time.Millisecond {
		t.Fatalf("decisions %v, poll %v", ds, p.Poll())
	}
	if m, _, ok := p.LastStep(); !ok || m.Arrivals != 1 || m.Queue != 7 || !math.IsNaN(m.Utilization) {
		t.Errorf("last step %+v", m)
	}
}

// The shared runner drives a policer as it drives a stage: under
// testing/synctest, stage.Runner steps it every period of the fake clock,
// at the tick's time, and each decision is in force from then on.
// A queue of 300 (over q_ref 100) at every step cuts the rate from 1000
// by (100 − 300)/16 = −12.5 per period after the first, whose derivative
// term adds −(300 − 0)/4 = −75.
func TestRunnerStepsPolicer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p, err := New(Config{Rate: 1000, Burst: 20}, start)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.SetControl(Control{Controller: voigtQueue(t, 100*time.Millisecond, 1000), Queue: func() float64 { return 300 }}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []sluice.Decision
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			stage.Runner{Stepper: p, OnStep: func(_ time.Time, ds []sluice.Decision) {
				mu.Lock()
				got = append(got, ds...)
				mu.Unlock()
			}}.Run(ctx)
		}()
		time.Sleep(450 * time.Millisecond)
		cancel()
		<-done
		want := []float64{1000 - 12.5 - 75, 1000 - 12.5 - 75 - 12.5, 1000 - 12.5 - 75 - 25, 1000 - 12.5 - 75 - 37.5}
		if len(got) != len(want) {
			t.Fatalf("%d decisions in 450 ms, want %d", len(got), len(want))
		}
		for i, d := range got {
			if at := d.At.Sub(start); at != time.Duration(i+1)*100*time.Millisecond || d.New != want[i] {
				t.Errorf("decision %d at %v: %v, want %v at %v", i, at, d.New, want[i], time.Duration(i+1)*100*time.Millisecond)
			}
		}
		if p.Rate() != want[len(want)-1] {
			t.Errorf("rate in force %v, want %v", p.Rate(), want[len(want)-1])
		}
	})
}
