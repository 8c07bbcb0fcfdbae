// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// worker is one worker serving its queue in order, behind a stage that
// admits a request while fewer than the limit are in service and refuses
// it otherwise (no wait queue): the shape of graph-hotel's shared backend.
// Requests arrive evenly spaced at rate per second, each needs s seconds
// of the worker. It is stepped in ticks of dt; admitted holds the
// admission times of the requests in service, oldest first.
type worker struct {
	rate, s  float64
	admitted []float64
	left     float64 // work left on the oldest, s
	clock    float64 // s
	nextArr  float64 // s
	// longest is the longest time in service of a request admitted at or
	// after from, s.
	from, longest float64
}

const workerTick = 0.0005 // s

// step runs the worker for h under the limit and returns the step's
// measurements.
func (w *worker) step(limit float64, h time.Duration) sluice.Measurements {
	end := w.clock + h.Seconds()
	var m sluice.Measurements
	m.Elapsed = h
	var times []float64
	for w.clock < end-1e-12 {
		for w.nextArr <= w.clock {
			m.Arrivals++
			if float64(len(w.admitted)) < limit {
				if len(w.admitted) == 0 {
					w.left = w.s
				}
				w.admitted = append(w.admitted, w.clock)
				m.Admitted++
			} else {
				m.Rejected++
			}
			w.nextArr += 1 / w.rate
		}
		m.InFlight += float64(len(w.admitted)) * workerTick / h.Seconds()
		m.MaxInFlight = math.Max(m.MaxInFlight, float64(len(w.admitted)))
		w.clock += workerTick
		if len(w.admitted) == 0 {
			continue
		}
		if w.left -= workerTick; w.left <= 1e-12 {
			t := w.clock - w.admitted[0]
			if w.admitted[0] >= w.from {
				w.longest = math.Max(w.longest, t)
			}
			times = append(times, t)
			w.admitted = w.admitted[1:]
			w.left = w.s
		}
	}
	if n := len(times); n > 0 {
		slices.Sort(times)
		sum := 0.0
		for _, t := range times {
			sum += t
		}
		p := func(q float64) float64 { return times[min(n-1, int(math.Ceil(q*float64(n)))-1)] }
		m.Completed, m.ServiceSamples, m.ServiceMean = float64(n), float64(n), sum/float64(n)
		m.ServiceP50, m.ServiceP90, m.ServiceP99, m.ServiceMin = p(0.5), p(0.9), p(0.99), times[0]
		m.ServiceTailSamples, m.ServiceTailP99 = float64(n), p(0.99)
	} else {
		m.ServiceMean, m.ServiceP50, m.ServiceP90, m.ServiceP99, m.ServiceMin = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		m.ServiceTailP99 = math.NaN()
	}
	m.QueueWaitMean, m.QueueWaitMin = math.NaN(), math.NaN()
	return m
}

// run steps a on w for d from *now.
func (w *worker) run(a *Auto, now *time.Time, d time.Duration) []string {
	var why []string
	for end := now.Add(d); now.Before(end); {
		*now = now.Add(a.Period())
		why = append(why, a.Update(*now, w.step(a.Current().New, a.Period())).Reason)
	}
	return why
}

// graph-hotel's capacity drop, on its shared backend alone: one worker at
// 70 % (110 req/s of 6.4 ms), whose work triples (19.2 ms: 52 req/s).
// Before the drop demand never fills the limit, so L is still
// InitialLimit, 16. Without the early cut L stays 16 for the drop's first
// second (no base window is judged before MaxWindow), the worker's queue
// grows to 16 and a request admitted then waits up to 16 × 19.2 ms = 307
// ms in service, over the SLO of 250 ms. Little's law on the first ten
// completions of the drop (about 0.2 s) shows 136 ms in service and cuts
// L to about 3.4: what is admitted after the first 0.3 s spends at most
// half the SLO in service.
func TestAutoEarlyCut(t *testing.T) {
	a := newAuto(t, nil)
	now := t0
	w := &worker{rate: 110, s: 0.0064}
	w.run(a, &now, 5*time.Second)
	if a.Limit() != 16 {
		t.Fatalf("limit %g before the drop, want the initial 16 (demand never fills it)", a.Limit())
	}
	w.s *= 3
	w.from = w.clock + 0.3
	why := w.run(a, &now, 2*time.Second)
	early := 0
	for _, r := range why[:3] {
		if strings.Contains(r, "Little's law") {
			early++
		}
	}
	if early == 0 || w.longest > a.cfg.SLO.Seconds()/2 {
		t.Fatalf("after the drop: longest time in service %.3gs of what was admitted after 0.3 s (want ≤ SLO/2), first steps %q",
			w.longest, why[:3])
	}
	if a.Estimates()["cut_from"] != 16 {
		t.Fatalf("cut_from %v, want 16 (the limit the early cut cut from)", a.Estimates()["cut_from"])
	}
	t.Logf("L %.3g, longest in service %.3gs; %s", a.Limit(), w.longest, why[1])

	// Back to 6.4 ms: the queue drains within a second and the limit
	// refuses nothing after it (the uncut raises L while demand fills it).
	w.s /= 3
	w.run(a, &now, time.Second)
	for range 10 {
		now = now.Add(a.Period())
		m := w.step(a.Current().New, a.Period())
		a.Update(now, m)
		if m.Rejected > 0 {
			t.Fatalf("limit %.3g refuses %g of %g a second after the backend is fast again", a.Limit(), m.Rejected, m.Arrivals)
		}
	}
}

// Requests that hold their slots without completing (stuck behind a
// costly call downstream) while the completions stay fast: Little's law
// reads a long time in service, but the completions do not confirm it
// (R̂ below SLO/8), and the early cut leaves L alone. Cut, the few slots
// left would be held by the stuck requests and the fast ones starve.
func TestAutoEarlyCutNeedsSlowCompletions(t *testing.T) {
	a := newAuto(t, nil)
	now := t0
	for range 30 {
		now = now.Add(a.Period())
		// 10 fast completions of 9 ms a step and 6 requests stuck in
		// service: n̄ 6.9, R = n̄/X = 69 ms > SLO/4.
		m := sluice.Measurements{Elapsed: a.Period(), Arrivals: 10, Admitted: 10, Completed: 10, InFlight: 6.9, MaxInFlight: 8,
			ServiceSamples: 10, ServiceMean: 0.009, ServiceP50: 0.009, ServiceP90: 0.01, ServiceP99: 0.012, ServiceMin: 0.008,
			QueueWaitMean: math.NaN(), QueueWaitMin: math.NaN()}
		if d := a.Update(now, m); strings.Contains(d.Reason, "Little's law") {
			t.Fatalf("early cut on fast completions: %s", d.Reason)
		}
	}
	if r := a.Estimates()["little_r_s"]; !(r > 0.0625) {
		t.Fatalf("little_r_s %v, want Little's R over SLO/4 (the test's premise)", r)
	}
}
