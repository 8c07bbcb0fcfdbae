// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/mathx"
)

// State is a stage as the admin API shows it.
type State struct {
	Name       string    `json:"name"`
	Controller string    `json:"controller"`
	Kind       string    `json:"kind"`
	Unit       string    `json:"unit"`
	Setting    float64   `json:"setting"`
	ClassRates []float64 `json:"class_rates,omitempty"`
	Quality    float64   `json:"quality"`
	GateOff    bool      `json:"gate_off"`
	Shadow     bool      `json:"shadow"`
	Target     string    `json:"target,omitempty"`
	// Priority is how the stage sheds its lowest classes first (Priority);
	// nil when it does not (one class, or shedding off).
	Priority        *PriorityState `json:"priority,omitempty"`
	InFlightLimited *LimiterState  `json:"concurrency,omitempty"`
	// Estimates are the controller's own estimates (auto: limit,
	// throughput, service times), by name, for controllers that keep
	// some; unknown values are left out.
	Estimates map[string]float64 `json:"estimates,omitempty"`
	// MaxRejectAdmitted counts, since start, the requests admitted past
	// the limit because rejecting them would have exceeded the
	// controller's bound on the share rejected (auto's
	// max_reject_fraction); absent from the JSON while 0.
	MaxRejectAdmitted uint64 `json:"max_reject_admitted,omitempty"`
	// TenantsQueued is the number of tenants with a waiter in the queue
	// under fair queueing (Tenants), summed over classes.
	TenantsQueued int `json:"tenants_queued,omitempty"`
	// TenantCosts are the estimated costs (Tenants.Cost) of the costliest
	// tenants estimated lately, in seconds per request, at most
	// maxShownCosts of them (absent unless the stage shares by a
	// measured cost).
	TenantCosts map[string]float64 `json:"tenant_cost_s,omitempty"`
	// HogCancelled counts the requests the hog rule cancelled since
	// start, by reason (Hog; absent without a hog rule).
	HogCancelled map[string]uint64 `json:"hog_cancelled,omitempty"`
	Classes      []ClassState      `json:"classes"`
	Decisions    []DecisionState   `json:"decisions"`
}

// Estimator is implemented by controllers that keep estimates worth
// showing (auto: the limit, the throughput, service times).
type Estimator interface {
	Estimates() map[string]float64
}

// LimiterState is a concurrency limit's occupancy.
type LimiterState struct {
	Limit    int `json:"limit"`
	InFlight int `json:"in_flight"`
	Queued   int `json:"queued"`
	// MaxWait is the longest a new arrival may wait for a slot ("0s": no
	// queue); Drain the predicted slot release rate in req/s (0: none).
	MaxWait        string  `json:"max_wait"`
	MaxWaitSeconds float64 `json:"max_wait_s"`
	Drain          float64 `json:"drain_rps"`
	// Thresholds are the in-flight counts below which each class takes a
	// slot, while the priority reserve is in force (Priority); omitted
	// when every class sees the limit.
	Thresholds []int `json:"class_thresholds,omitempty"`
}

// PriorityState is a stage's priority shedding as the admin API shows it.
type PriorityState struct {
	// Reserve is Priority.Reserve in force.
	Reserve float64 `json:"reserve"`
	// ClassDrops are each class's drop probabilities of a dropping gate.
	ClassDrops []float64 `json:"class_drop_probabilities,omitempty"`
}

// ClassTotals are a class's request totals since start: the requests
// offered to its gate, admitted, rejected, rejected in shadow mode (and
// admitted all the same), completed, and completed with an error.
// Offered, Admitted, Rejected and Completed advance at each control
// period; ShadowRejected and Errors as they happen.
type ClassTotals struct {
	Offered        uint64 `json:"offered"`
	Admitted       uint64 `json:"admitted"`
	Rejected       uint64 `json:"rejected"`
	ShadowRejected uint64 `json:"shadow_rejected"`
	Completed      uint64 `json:"completed"`
	Errors         uint64 `json:"errors"`
}

// ClassState holds one class's totals since start and its last period.
// ClassTotals is embedded without a JSON name, so that its fields stand
// in the admin API's class object beside the name, as they always have.
type ClassState struct {
	Name string `json:"name"`
	ClassTotals
	// Deadline counts the rejections (also in Rejected) of requests whose
	// deadline had passed, or would pass before they got service; unlike
	// the totals collected each period it is counted as they happen.
	Deadline uint64 `json:"rejected_deadline"`
	// FairEvicted counts the waiters (also in Rejected) evicted under fair
	// queueing (stage.Tenants) to make room for a tenant behind them in
	// virtual time, counted as they happen.
	FairEvicted uint64  `json:"rejected_fair_evicted"`
	Last        *Period `json:"last_period,omitempty"`
}

// DecisionState is one decision as the admin API shows it.
type DecisionState struct {
	At         time.Time `json:"at"`
	Class      int       `json:"class"`
	Old        float64   `json:"old"`
	New        float64   `json:"new"`
	ClassRates []float64 `json:"class_rates,omitempty"`
	Quality    float64   `json:"quality,omitempty"`
	GateOff    bool      `json:"gate_off,omitempty"`
	Acted      bool      `json:"acted"`
	Reason     string    `json:"reason"`
}

// Totals returns the counters of class c (totals up to the last collected
// period), for metrics.
func (s *Stage) Totals(c int) ClassState {
	cs := s.classes[c]
	return ClassState{Name: cs.name, ClassTotals: ClassTotals{Offered: cs.offered.Load(), Admitted: cs.admitted.Load(),
		Rejected: cs.rejected.Load(), ShadowRejected: cs.shadowRejected.Load(),
		Completed: cs.completed.Load(), Errors: cs.errors.Load()}, Deadline: cs.deadline.Load(), FairEvicted: cs.fairEvicted.Load(), Last: cs.last.Load()}
}

// State returns the stage's current state with its last n decisions.
func (s *Stage) State(n int) State {
	s.mu.Lock() // the controller is only read between steps
	defer s.mu.Unlock()
	cur := s.ctrl.Current()
	st := State{Name: s.name, Controller: cur.Controller, Kind: cur.Kind.String(), Unit: cur.Kind.Unit(),
		Setting: cur.New, ClassRates: cur.ClassRates, Quality: s.gates.Quality(), GateOff: s.gates.Off(),
		Shadow: s.shadow, MaxRejectAdmitted: s.maxRejectAdmits.Load(), HogCancelled: s.HogCancelled()}
	if t, ok := s.ctrl.Unwrap().(interface{ Target() time.Duration }); ok {
		st.Target = t.Target().String()
	}
	if e, ok := s.ctrl.Unwrap().(Estimator); ok {
		for k, v := range e.Estimates() {
			if mathx.Finite(v) {
				if st.Estimates == nil {
					st.Estimates = map[string]float64{}
				}
				st.Estimates[k] = v
			}
		}
	}
	if on, r := s.gates.Shedding(); on {
		st.Priority = &PriorityState{Reserve: r, ClassDrops: s.gates.ClassDrops()}
	}
	if c := s.conc; c != nil {
		c.mu.Lock()
		st.InFlightLimited = &LimiterState{Limit: c.setLimit, InFlight: c.slots.InFlight(), Queued: c.slots.QueueLen(),
			MaxWait: c.wait.String(), MaxWaitSeconds: c.wait.Seconds(), Drain: c.drain}
		if c.fair != nil {
			st.TenantsQueued = len(c.fair.flows)
			if c.fair.costs != nil {
				st.TenantCosts = c.fair.costs.costliest(maxShownCosts)
			}
		}
		if c.slots.Reserve() > 0 {
			for cl := range s.classes {
				st.InFlightLimited.Thresholds = append(st.InFlightLimited.Thresholds, c.slots.Threshold(cl))
			}
		}
		c.mu.Unlock()
	}
	for c := range s.classes {
		st.Classes = append(st.Classes, s.Totals(c))
	}
	for _, d := range s.ctrl.History.Last(n) {
		st.Decisions = append(st.Decisions, decisionState(d))
	}
	return st
}

func decisionState(d sluice.Decision) DecisionState {
	return DecisionState{At: d.At, Class: d.Class, Old: d.Old, New: d.New, ClassRates: d.ClassRates,
		Quality: d.Quality, GateOff: d.GateOff, Acted: d.Acted, Reason: d.Reason}
}
