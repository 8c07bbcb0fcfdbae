// SPDX-License-Identifier: Apache-2.0

package sim_test

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/sim"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/stage"
)

// The policer's parity: one trace of connections goes through a
// policer.Policer twice, once live (the proxy's stage.Runner stepping it
// under testing/synctest, Admit at the wall clock) and once in virtual
// time (sim.Policer), and the two must admit the same connections and take
// the same decisions at the same offsets from the same measurements. The
// queue the PD controller steers is the number of admitted connections
// still in service; the CPU guard reads 95 % during the second second of
// the run (the rate may not rise then) and 50 % otherwise.

// policerGuard is a CPU reading that depends only on the time since start.
type policerGuard struct{ start time.Time }

func (g policerGuard) Utilization(now time.Time) (float64, error) {
	if d := now.Sub(g.start); d >= time.Second && d < 2*time.Second {
		return 0.95, nil
	}
	return 0.5, nil
}

// newParityPolicer builds the policer of the parity run at start: bucket
// 20 at 1000 connections/s, the paper's PD controller with q_ref 10, Kp 5 and a
// 100 ms period.
func newParityPolicer(t *testing.T, start time.Time, queue func() float64) *policer.Policer {
	t.Helper()
	p, err := policer.New(policer.Config{Rate: 1000, Burst: 20}, start)
	if err != nil {
		t.Fatal(err)
	}
	cfg := control.DefaultVoigtQueueConfig()
	cfg.Period, cfg.QRef, cfg.Kp = 100*time.Millisecond, 10, 5
	c, err := control.NewVoigtQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetControl(policer.Control{Controller: c, Queue: queue, Utilization: policerGuard{start: start}}); err != nil {
		t.Fatal(err)
	}
	return p
}

func livePolicer(t *testing.T, trace []traceReq) (ds []string, admitted []bool, end time.Duration) {
	admitted = make([]bool, len(trace))
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var inService atomic.Int64
		p := newParityPolicer(t, start, func() float64 { return float64(inService.Load()) })
		var mu sync.Mutex
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			stage.Runner{Stepper: p, OnStep: func(_ time.Time, got []sluice.Decision) {
				mu.Lock()
				defer mu.Unlock()
				for _, d := range got {
					ds = append(ds, fmtDecision(d, start))
				}
			}}.Run(ctx)
		}()
		var wg sync.WaitGroup
		for i, q := range trace {
			wg.Go(func() {
				time.Sleep(q.at)
				if p.Admit(time.Now(), netip.Addr{}) != policer.Admitted {
					return
				}
				admitted[i] = true
				inService.Add(1)
				time.Sleep(q.service)
				inService.Add(-1)
			})
		}
		wg.Wait()
		end = time.Since(start)
		cancel()
		<-done
	})
	return ds, admitted, end
}

func simPolicer(t *testing.T, trace []traceReq, end time.Duration) (ds []string, admitted []bool) {
	e := sim.New(1)
	inService := 0
	p := newParityPolicer(t, e.Time(), func() float64 { return float64(inService) })
	admitted = make([]bool, len(trace))
	serve := sim.HandlerFunc(func(r *sim.Request) {
		admitted[r.ID] = true
		inService++
		e.After(trace[r.ID].service, func() {
			inService--
			r.Finish(e.Now(), sim.Completed)
		})
	})
	entry, err := sim.NewPolicer(e, p, serve)
	if err != nil {
		t.Fatal(err)
	}
	entry.OnStep = func(_ time.Duration, got []sluice.Decision) {
		for _, d := range got {
			ds = append(ds, fmtDecision(d, sim.DefaultBase))
		}
	}
	for i, q := range trace {
		e.Schedule(q.at, func() { entry.Handle(&sim.Request{ID: uint64(i), Sent: e.Now()}) })
	}
	e.Run(end)
	return ds, admitted
}

func TestParityPolicer(t *testing.T) {
	trace := parityTrace(5, 1500, 500, 60*time.Millisecond) // 3 s at 500 conn/s, 30 in service
	live, liveAdm, end := livePolicer(t, trace)
	virtual, simAdm := simPolicer(t, trace, end)
	if len(live) < 20 {
		t.Fatalf("%d live decisions in %v, want one per 100 ms", len(live), end)
	}
	if len(live) != len(virtual) {
		t.Errorf("%d live decisions, %d in virtual time", len(live), len(virtual))
	}
	for i := range min(len(live), len(virtual)) {
		if live[i] != virtual[i] {
			t.Fatalf("decision %d differs:\nlive:    %s\nvirtual: %s", i, live[i], virtual[i])
		}
	}
	rejected := 0
	for i := range trace {
		if liveAdm[i] != simAdm[i] {
			t.Fatalf("connection %d at %v: admitted live %v, in virtual time %v", i, trace[i].at, liveAdm[i], simAdm[i])
		}
		if !liveAdm[i] {
			rejected++
		}
	}
	t.Logf("%d decisions, %d of %d connections reset", len(live), rejected, len(trace))
	if rejected == 0 || rejected == len(trace) {
		t.Errorf("%d of %d reset: the trace should both admit and reset", rejected, len(trace))
	}
}
