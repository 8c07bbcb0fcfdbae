// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/gate"
)

// The deadline budget by hand, one slot, tenant x's service time 100 ms
// (one completion folded by a step), budget 1 (100 ms) or off:
//
//	t1         B, 90 ms left:  budget: refused (ErrDeadline), 90 ≤ 100;
//	                           off: takes the free slot, and is let go.
//	t1         C, 150 ms left: takes the free slot either way.
//	t1         D, 250 ms left: queues; budget: its wait ends at
//	                           t1 + 150 ms (250 − 100), off: t1 + 250 ms.
//	t1 + 180   C ends:         budget: D's wait has ended, it is not
//	                           started with 70 ms left (ErrDeadline), the
//	                           slot stays free; off: D gets the slot.
//	t1 + 300   a step ends a period in which x completed nothing: x is
//	           no longer budgeted (its estimate may be stale, and a
//	           budget that refused all of x would never refresh it):
//	           E, 50 ms left, takes the free slot.
func TestDeadlineBudget(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, budget := range []float64{0, 1} {
		st, err := New(Options{Name: "budget", Controller: &control.StaticConcurrencyConfig{Limit: 1, Period: ms(100)},
			QueueTimeout: time.Second, Tenants: Tenants{Fair: true, Cost: CostServiceTime, DeadlineBudget: budget}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		a, o, err := st.ArriveRequest(t0, Request{Tenant: "x"}, nil)
		if o != gate.Admitted || err != nil {
			t.Fatalf("budget %g: A %v, %v", budget, o, err)
		}
		a.Finish(t0.Add(ms(100)), Outcome{OK: true})
		st.Step(t0.Add(ms(100)))
		t1 := t0.Add(ms(200))

		bw, _ := waitFor(0)
		b, o, err := st.ArriveRequest(t1, Request{Tenant: "x", Deadline: t1.Add(ms(90))}, bw)
		switch {
		case budget > 0 && (o != gate.Rejected || !errors.Is(err, ErrDeadline)):
			t.Errorf("budget %g: B with 90 ms left of a 100 ms budget: %v, %v; want refused, ErrDeadline", budget, o, err)
		case budget == 0 && o != gate.Admitted:
			t.Errorf("budget off: B with 90 ms left: %v, %v; want admitted (a free slot)", o, err)
		case o == gate.Admitted:
			b.Finish(t1, Outcome{OK: false, NoSample: true})
		}

		cw, _ := waitFor(0)
		c, o, err := st.ArriveRequest(t1, Request{Tenant: "x", Deadline: t1.Add(ms(150))}, cw)
		if o != gate.Admitted {
			t.Fatalf("budget %g: C with 150 ms left: %v, %v; want admitted", budget, o, err)
		}
		dw, d := waitFor(0)
		if _, o, err = st.ArriveRequest(t1, Request{Tenant: "x", Deadline: t1.Add(ms(250))}, dw); o != gate.Queued {
			t.Fatalf("budget %g: D with 250 ms left: %v, %v; want queued", budget, o, err)
		}
		want := t1.Add(ms(250))
		if budget > 0 {
			want = t1.Add(ms(150))
		}
		if !dw.Deadline.Equal(want) {
			t.Errorf("budget %g: D waits until %v after t1, want %v", budget, dw.Deadline.Sub(t1), want.Sub(t1))
		}
		c.Finish(t1.Add(ms(180)), Outcome{OK: true})
		if budget > 0 {
			if d.granted || !errors.Is(d.err, ErrDeadline) {
				t.Errorf("budget %g: D at C's end with 70 ms left: granted %v, dropped %v; want dropped with ErrDeadline", budget, d.granted, d.err)
			}
			// A period without x's completions: x is no longer
			// budgeted, and E with 50 ms left takes the free slot.
			st.Step(t1.Add(ms(200)))
			st.Step(t1.Add(ms(300)))
			if _, o, err := st.ArriveRequest(t1.Add(ms(300)), Request{Tenant: "x", Deadline: t1.Add(ms(350))}, nil); o != gate.Admitted {
				t.Errorf("budget %g: E after a period without completions: %v, %v; want admitted", budget, o, err)
			}
			continue
		}
		if !d.granted {
			t.Errorf("budget off: D at C's end: not granted (%v)", d.err)
		}
	}
}

// A deadline budget is a multiple of a service time: it needs the
// service-time cost measure, and is a finite number ≥ 0.
func TestDeadlineBudgetValidate(t *testing.T) {
	for _, tc := range []Tenants{
		{Fair: true, DeadlineBudget: 1},
		{Fair: true, Cost: CostReported, DeadlineBudget: 1},
		{Fair: true, Cost: CostServiceTime, DeadlineBudget: -1},
	} {
		if err := tc.validate(); err == nil {
			t.Errorf("%+v: no error", tc)
		}
	}
	ok := Tenants{Fair: true, Cost: CostServiceTime, DeadlineBudget: 2}
	if err := ok.validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
}
