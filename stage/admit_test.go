// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"cmp"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/gate"
)

// Every way a request meets a concurrency limit, with what each counts:
// the outcome, whether the ticket holds a slot, and the stage's counters
// (rejected, shadow-rejected, expired waits) once the period is
// collected. Each case holds one slot of a limit of 1 first (unless
// free), then offers one request of the given class.
func TestArriveOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		free     bool          // do not hold the slot first
		maxWait  time.Duration // the decision's MaxWait (< 0: no queue)
		drain    float64       // the decision's Drain, req/s
		maxQueue int
		shadow   bool
		queued   []int // classes queued before the request
		class    int
		noWaiter bool // offer no Wait (Arrive with nil)

		want       gate.Outcome
		held       bool // the admitted ticket holds a slot
		rejected   uint64
		shadowRej  uint64
		expired    uint64
		victimTold bool // the queued waiter of the lowest class was dropped
	}{
		{name: "free slot", free: true, maxWait: time.Second, want: gate.Admitted, held: true},
		{name: "queued", maxWait: time.Second, want: gate.Queued},
		{name: "predicted wait fits", maxWait: time.Second, drain: 2, want: gate.Queued},
		{name: "predicted wait too long", maxWait: 100 * time.Millisecond, drain: 1, want: gate.Rejected, rejected: 1, expired: 1},
		{name: "no queue", maxWait: -1, class: 1, want: gate.Rejected, rejected: 1},
		// Priority shedding (on by default): a higher class gets the
		// reserve's room beyond a limit that rejects at once.
		{name: "no queue, a higher class in the reserve", maxWait: -1, class: 0, want: gate.Admitted, held: true},
		{name: "no waiter", maxWait: time.Second, noWaiter: true, want: gate.Rejected, rejected: 1},
		{name: "full queue of its class", maxWait: time.Second, maxQueue: 1, queued: []int{0}, want: gate.Rejected, rejected: 1},
		{name: "full queue, evicts a lower class", maxWait: time.Second, maxQueue: 1, queued: []int{1}, want: gate.Queued,
			rejected: 1, expired: 1, victimTold: true},
		{name: "shadow admits without a slot", maxWait: time.Second, shadow: true, want: gate.Admitted, shadowRej: 1},
		{name: "shadow, free slot", free: true, maxWait: time.Second, shadow: true, want: gate.Admitted, held: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &scripted{cur: limitDecision(1, tc.maxWait, tc.drain)}
			mq := tc.maxQueue
			mq = cmp.Or(mq, 16)
			s := newStage(t, Options{Name: "c", Controller: scriptedConfig{c}, ClassNames: []string{"gold", "bronze"},
				MaxQueue: mq, Shadow: tc.shadow}, t0)
			if !tc.free {
				if _, o := s.Arrive(at(0), 0, nil); o != gate.Admitted {
					t.Fatalf("holding the slot: %v", o)
				}
			}
			var victims []*recorder
			for _, qc := range tc.queued {
				w, r := waitFor(qc)
				if _, o := s.Arrive(at(1), qc, w); o != gate.Queued {
					t.Fatalf("queueing class %d: %v", qc, o)
				}
				victims = append(victims, r)
			}
			var w *Wait
			if !tc.noWaiter {
				w, _ = waitFor(tc.class)
			}
			tk, o := s.Arrive(at(2), tc.class, w)
			if o != tc.want {
				t.Fatalf("outcome %v, want %v", o, tc.want)
			}
			if o == gate.Admitted && tk.Held() != tc.held {
				t.Errorf("ticket holds a slot: %v, want %v", tk.Held(), tc.held)
			}
			if o == gate.Queued && (w.Arrival != at(2) || w.Deadline != at(2).Add(tc.maxWait) || w.Class != tc.class) {
				t.Errorf("waiter %+v", *w)
			}
			if tc.victimTold && (len(victims) == 0 || !errors.Is(victims[0].err, sluice.ErrRejected)) {
				t.Errorf("evicted waiter not told: %+v", victims)
			}
			s.Step(at(1000))
			m := c.seen[0]
			var rej, srej uint64
			for i := range s.Classes() {
				tot := s.Totals(i)
				rej += tot.Rejected
				srej += tot.ShadowRejected
			}
			if rej != tc.rejected || srej != tc.shadowRej || uint64(m.Expired) != tc.expired {
				t.Errorf("rejected %d, shadow-rejected %d, expired %v; want %d, %d, %d", rej, srej, m.Expired,
					tc.rejected, tc.shadowRej, tc.expired)
			}
		})
	}
}

// A wait for a slot that runs out is one error, whichever layer reports
// it: the proxy's pool (package gate) and a stage alike.
func TestOneQueueTimeoutError(t *testing.T) {
	ctrl := control.DefaultStaticConcurrencyConfig()
	ctrl.Limit = 1
	st := newStage(t, Options{Name: "db", Controller: &ctrl, MaxQueue: 1, QueueTimeout: time.Millisecond}, time.Now())
	done, err := st.Admit(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer done(sluice.Success)
	if _, err := st.Admit(context.Background(), 0); !errors.Is(err, gate.ErrQueueTimeout) {
		t.Errorf("a stage's queue timeout %v is not gate.ErrQueueTimeout", err)
	}
}
