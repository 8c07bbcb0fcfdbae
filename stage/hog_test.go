// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
)

// hogSim sends requests of several tenants through a stage to a service
// of unbounded parallelism in virtual time: each request takes its
// tenant's duration unless it is cancelled first, as a handler that
// returns when its context ends. It counts, per tenant, the requests
// served, refused and cancelled, and the causes of the cancellations.
type hogSim struct {
	v       vsim
	st      *Stage
	tenants []string
	every   []time.Duration // time between two arrivals
	takes   []time.Duration // time in service
	ok, rej []int
	cancels []int
	causes  []error
}

func newHogSim(st *Stage, tenants []string, every, takes []time.Duration) *hogSim {
	n := len(tenants)
	h := &hogSim{st: st, tenants: tenants, every: every, takes: takes,
		ok: make([]int, n), rej: make([]int, n), cancels: make([]int, n)}
	h.v.now = st.created
	for i := range tenants {
		h.arrive(i)
	}
	h.v.every(st.Poll(), func() { st.Step(h.v.now) })
	return h
}

func (h *hogSim) arrive(i int) {
	h.v.at(h.v.now.Add(h.every[i]), func() {
		h.arrive(i)
		vArrive(&h.v, h.st, Request{Tenant: h.tenants[i]}, func(tk Ticket) { h.serve(tk, i) }, func() { h.rej[i]++ })
	})
}

func (h *hogSim) serve(tk Ticket, i int) {
	done := false
	end := h.v.at(h.v.now.Add(h.takes[i]), func() {
		done = true
		tk.Finish(h.v.now, Outcome{OK: true})
		h.ok[i]++
	})
	tk.Watch(func(cause error) {
		if done {
			return
		}
		done = true
		end.cancel(&h.v)
		h.causes = append(h.causes, cause)
		h.cancels[i]++
		tk.Finish(h.v.now, Outcome{OK: false})
	})
}

// max_service_time: requests that hang (one every 2 s) hold the slots of
// a limit of 2, and from the second one on every other request waits a
// second and is refused; with the rule
// at 1 s, each hung request is cancelled at the first step at least 1 s
// after it got its slot, with a HogError naming the reason, and the
// others are served.
func TestHogMaxServiceTime(t *testing.T) {
	for _, max := range []time.Duration{0, time.Second} {
		st, err := New(Options{Name: "hog", Controller: &control.StaticConcurrencyConfig{Limit: 2, Period: 100 * time.Millisecond},
			QueueTimeout: time.Second, Hog: Hog{MaxService: max}}, t0)
		if err != nil {
			t.Fatal(err)
		}
		h := newHogSim(st, []string{"hang", "quick"}, []time.Duration{2 * time.Second, 20 * time.Millisecond},
			[]time.Duration{time.Hour, 10 * time.Millisecond})
		h.v.run(t0.Add(20 * time.Second))
		t.Logf("max_service_time %v: hung cancelled %d; quick served %d, refused %d; state %v", max, h.cancels[0], h.ok[1], h.rej[1], st.State(0).HogCancelled)
		if max == 0 {
			if h.ok[1] > 250 || h.cancels[0] > 0 {
				t.Errorf("without the rule: quick served %d, hung cancelled %d; want only the first 4 s's (the test needs the rule)", h.ok[1], h.cancels[0])
			}
			continue
		}
		if h.cancels[0] < 9 || h.ok[1] < 900 {
			t.Errorf("hung cancelled %d (want ≥ 9 of 10), quick served %d (want ≥ 900 of 1000)", h.cancels[0], h.ok[1])
		}
		if got := st.HogCancelled()[HogMaxService]; got != uint64(h.cancels[0]) {
			t.Errorf("counted %d max_service_time cancellations, made %d", got, h.cancels[0])
		}
		for _, c := range h.causes {
			var he *HogError
			if !errors.As(c, &he) || he.Reason != HogMaxService || he.Ran < time.Second || he.Ran > 1100*time.Millisecond || !errors.Is(c, sluice.ErrHog) || !errors.Is(c, sluice.ErrRejected) {
				t.Errorf("cause %v: want a HogError for max_service_time after 1–1.1 s, wrapping ErrHog and ErrRejected", c)
			}
		}
	}
}

// over_share, Atropos's policy: a tenant whose requests take 30 s each
// ends up holding all 4 slots of a fair queue (each slot it gets when the
// other tenant has no waiter, it keeps), and the light tenant's requests
// (every 20 ms, 10 ms each) wait and are refused. With the rule, while the
// light tenant waits, the costly tenant's longest request beyond its share
// (2 of 4) and beyond min_service_time (1 s) is cancelled at each step:
// the light tenant is served, and the costly one keeps its share.
func TestHogOverShare(t *testing.T) {
	for _, on := range []bool{false, true} {
		st, h := costlyBesideLight(t, "over_share", on, 30*time.Second, Tenants{}, Hog{OverShare: on, MinService: time.Second})
		if !on {
			continue
		}
		if h.ok[1] < 1425 {
			t.Errorf("light tenant served %d of 1500 (want ≥ 95 %%)", h.ok[1])
		}
		if got := st.HogCancelled()[HogOverShare]; got == 0 || got != uint64(h.cancels[0]) {
			t.Errorf("counted %d over_share cancellations, made %d", got, h.cancels[0])
		}
		for _, c := range h.causes {
			var he *HogError
			if !errors.As(c, &he) || he.Reason != HogOverShare || he.Ran < time.Second {
				t.Errorf("cause %v: want a HogError for over_share after ≥ 1 s", c)
			}
		}
	}
}

// costlyBesideLight runs a costly tenant (a request every 300 ms, each
// taking costly) beside a light one (a request every 20 ms, each taking
// 10 ms) for 40 s of virtual time through a stage of a concurrency limit
// of 4 and a queue timeout of 500 ms, with fair queueing among tenants
// (tenants, its Fair set) and the hog rule hog. It returns the stage and
// the sim with its served and refused counts of the last 30 s (1500
// light requests offered). Without the setting under test (on false),
// the light tenant must get at most half of its requests served: else
// the scenario would not need the setting.
func costlyBesideLight(t *testing.T, setting string, on bool, costly time.Duration, tenants Tenants, hog Hog) (*Stage, *hogSim) {
	t.Helper()
	tenants.Fair = true
	st := newStage(t, Options{Name: "costly-beside-light", Controller: &control.StaticConcurrencyConfig{Limit: 4, Period: 100 * time.Millisecond},
		QueueTimeout: 500 * time.Millisecond, Tenants: tenants, Hog: hog}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHogSim(st, []string{"costly", "light"}, []time.Duration{300 * time.Millisecond, 20 * time.Millisecond},
		[]time.Duration{costly, 10 * time.Millisecond})
	h.v.run(st.created.Add(10 * time.Second))
	h.ok[0], h.ok[1], h.rej[1] = 0, 0, 0
	h.v.run(st.created.Add(40 * time.Second))
	t.Logf("%s %v: light served %d, refused %d of 1500; costly served %d, cancelled %d", setting, on, h.ok[1], h.rej[1], h.ok[0], h.cancels[0])
	if !on && h.ok[1] > 750 {
		t.Errorf("without %s the light tenant got %d of 1500: the test needs %[1]s", setting, h.ok[1])
	}
	return st, h
}

// A hog rule's settings are checked: over_share needs fair queueing and
// a min service time (auto's SLO by default), durations are ≥ 0.
func TestHogSettings(t *testing.T) {
	static := &control.StaticConcurrencyConfig{Limit: 2, Period: time.Second}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"negative max", Options{Controller: static, Hog: Hog{MaxService: -time.Second}}, "must be ≥ 0"},
		{"negative min", Options{Controller: static, Hog: Hog{MinService: -time.Second}}, "must be ≥ 0"},
		{"over_share without fairness", Options{Controller: static, Hog: Hog{OverShare: true, MinService: time.Second}}, "needs fair queueing"},
		{"over_share without a target", Options{Controller: static, Tenants: Tenants{Fair: true}, Hog: Hog{OverShare: true}}, "needs a min service time"},
	} {
		if _, err := New(tc.o, t0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	cfg := auto.DefaultConfig()
	st, err := New(Options{Controller: &cfg, Tenants: Tenants{Fair: true}, Hog: Hog{OverShare: true}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if st.hog.rule.MinService != cfg.SLO {
		t.Errorf("min service %v, want auto's SLO %v", st.hog.rule.MinService, cfg.SLO)
	}
}
