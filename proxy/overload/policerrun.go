// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/mathx"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/proxy/internal/dashboard"
	"github.com/sluicehq/sluice/stage"
)

// PolicerRunner drives the connection policer: the policer steps its own
// control loop (policer.Policer.Step: every control period it collects
// what it saw, reads the backend pool's wait queue, the papers' listen
// queue, and the CPU guard's utilization, runs the voigt-queue controller,
// docs/algorithms.md §1, and puts its rate into force), and the shared
// stage.Runner calls that step as it does a stage's. Decisions are kept in
// a history for /state.
//
//	rate(t+1) = rate(t) + Kp·(q_ref − q(t)) − Kd·(q(t) − q(t−1))
//
// with the controller's guards: while q(t) < q_ref the rate changes only
// if q(t) ≠ q(t−1), and it may increase only while the CPU utilization is
// below util_ref. An unavailable CPU reading is passed as NaN, which the
// controller reads as "no guard" for that period; the sensor's error is
// shown in /state. Step is safe for concurrent use (calls are serialised).
type PolicerRunner struct {
	p     *policer.Policer
	ctrl  *control.Logged // nil for controller: none
	guard *Sensor         // CPU guard, nil for none
	h     Host
	reg   *policer.Registry // the live connections, for /state
	cfg   *PolicerConfig
	path  string // where the global rate is enforced, for /state (set by StartKernel)

	decisions atomic.Uint64
}

func newPolicerRunner(cfg *PolicerConfig, guard *Sensor, h Host, reg *policer.Registry, now time.Time) (*PolicerRunner, error) {
	p, err := policer.New(cfg.Config, now)
	if err != nil {
		return nil, err
	}
	r := &PolicerRunner{p: p, guard: guard, h: h, reg: reg, cfg: cfg}
	ctl := policer.Control{Period: cfg.Control.Period, Queue: r.queueLen}
	if guard != nil {
		ctl.Utilization = guard
	}
	if cfg.Controller == PolicerControllerVoigtQueue {
		c, err := control.NewVoigtQueue(cfg.Control.VoigtQueueConfig)
		if err != nil {
			return nil, err
		}
		if r.ctrl, err = control.WithHistory(c, cfg.Control.History); err != nil {
			return nil, err
		}
		ctl.Controller = r.ctrl
	}
	if err := p.SetControl(ctl); err != nil {
		return nil, err
	}
	return r, nil
}

// Policer returns the policer the runner drives.
func (r *PolicerRunner) Policer() *policer.Policer { return r.p }

// Config returns the policer's section, with its defaults.
func (r *PolicerRunner) Config() *PolicerConfig { return r.cfg }

// queueLen is the backend pool's wait queue of the running generation.
func (r *PolicerRunner) queueLen() float64 { return float64(r.h.QueueLen()) }

// runner is the policer's stage.Runner: it counts the decisions.
func (r *PolicerRunner) runner() stage.Runner {
	return stage.Runner{Stepper: r.p, OnStep: func(_ time.Time, ds []sluice.Decision) { r.decisions.Add(uint64(len(ds))) }}
}

// Step ends a control period at now and applies the controller's
// decision. Without a controller it only collects the period.
func (r *PolicerRunner) Step(now time.Time) (sluice.Decision, bool) {
	ds := r.runner().Step(now)
	if len(ds) == 0 {
		return sluice.Decision{}, false
	}
	return ds[0], true
}

// run steps every control period until ctx ends.
func (r *PolicerRunner) run(ctx context.Context) { r.runner().Run(ctx) }

// PolicerState is the connection policer as /state shows it.
type PolicerState struct {
	Controller string  `json:"controller"`
	Rate       float64 `json:"rate"`
	Burst      int     `json:"burst"`
	// QRef and UtilRef are the controller's queue reference (requests in
	// the pool's wait queue) and CPU guard reference (percent).
	QRef    float64 `json:"q_ref,omitempty"`
	UtilRef float64 `json:"util_ref,omitempty"`
	// Offered (the paper's hits), Admitted and Rejected by reason count
	// connections since start.
	Offered        uint64 `json:"offered"`
	Admitted       uint64 `json:"admitted"`
	RejectedRate   uint64 `json:"rejected_rate"`
	RejectedSource uint64 `json:"rejected_source"`
	// RejectedKernel counts the SYNs the kernel dropped (retransmissions
	// included), with the kernel path; Path says where the global rate is
	// enforced (the kernel's table, or user space and why) and
	// KernelError the last error reading the kernel's counter.
	RejectedKernel uint64 `json:"rejected_kernel"`
	Path           string `json:"path,omitempty"`
	KernelError    string `json:"kernel_error,omitempty"`
	AcceptErrors   uint64 `json:"accept_errors"`
	TrackedSources int    `json:"tracked_sources"`
	Evictions      uint64 `json:"evictions"`
	LiveConns      int    `json:"live_connections"`
	// Last is the last period's input: hits per second, the queue and
	// the CPU guard's utilization (percent; absent when unavailable).
	Last       *PolicerPeriod        `json:"last_period,omitempty"`
	GuardError string                `json:"guard_error,omitempty"`
	Guard      string                `json:"guard,omitempty"`
	Decisions  []stage.DecisionState `json:"decisions"`
}

// PolicerPeriod is the input of the policer's last control step: its
// length, connections offered per second, admitted and rejected in it,
// the wait queue, and the CPU guard's utilization in percent (nil when
// unavailable). The dashboard carries the same type to the page.
type PolicerPeriod = dashboard.PolicerPeriod

// State returns the policer as /state shows it, with its last n
// decisions.
func (r *PolicerRunner) State(n int) PolicerState {
	st := r.p.Stats()
	ps := PolicerState{Controller: r.cfg.Controller, Rate: st.Rate, Burst: st.Burst, Offered: st.Offered,
		Admitted: st.Admitted, RejectedRate: st.RejectedRate, RejectedSource: st.RejectedSource,
		AcceptErrors: st.AcceptErrors, TrackedSources: st.TrackedSources, Evictions: st.Evictions,
		RejectedKernel: st.RejectedKernel, Path: r.path, KernelError: st.KernelError}
	if math.IsInf(ps.Rate, 1) {
		ps.Rate = math.MaxFloat64 // JSON has no +Inf
	}
	if r.reg != nil {
		ps.LiveConns = r.reg.Len()
	}
	if r.guard != nil {
		ps.Guard = r.guard.name
	}
	if r.ctrl != nil {
		ps.QRef, ps.UtilRef = r.cfg.Control.QRef, r.cfg.Control.UtilRef
		for _, d := range r.ctrl.History.Last(n) {
			ps.Decisions = append(ps.Decisions, stage.DecisionState{At: d.At, Old: d.Old, New: d.New, Acted: d.Acted, Reason: d.Reason})
		}
	}
	m, guardErr, stepped := r.p.LastStep()
	ps.GuardError = guardErr
	if stepped {
		lp := &PolicerPeriod{Elapsed: m.Elapsed, Admitted: m.Admitted, Rejected: m.Rejected, Queue: m.Queue}
		if s := m.Elapsed.Seconds(); s > 0 {
			lp.HitsPerSec = m.Arrivals / s
		}
		if mathx.Finite(m.Utilization) {
			u := 100 * m.Utilization
			lp.Utilization = &u
		}
		ps.Last = lp
	}
	return ps
}
