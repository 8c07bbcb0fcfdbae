// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/lab/settle"
)

// The Yaksha figures reproduce Kamra, Misra & Nahum (docs/algorithms.md
// §2): the self-tuning PI controller of the mean response time in front
// of a processor-sharing server, against the offered load (Figs. 7–8:
// yaksha-load-sweep) and through three waves of users with a shifting
// request mix (Figs. 10–16: yaksha-workload-shift). This file is the part
// both drivers share: the parameters, declared once (the live experiments
// take the same defaults compressed by their time scale), and the paper's
// expectations.

// YakshaParams are the Yaksha figures' parameters, in the paper's time.
type YakshaParams struct {
	// ServiceTime is the mean service demand E[X] (load sweep).
	ServiceTime time.Duration
	// Tref is the mean response-time target; Period the control period.
	Tref, Period time.Duration
	// Timeout is the client timeout (load sweep): a later reply is not
	// goodput.
	Timeout time.Duration
	// Pole and TuneWindow are the controller's design pole (1/s) and
	// self-tuning window: its defaults, which the simulator keeps and the
	// live runs compress.
	Pole       float64
	TuneWindow time.Duration
}

// DeclareYakshaTarget declares the target and the control period on ps.
func DeclareYakshaTarget(ps *Params, c *YakshaParams) {
	ps.Duration(&c.Tref, "tref", 150*time.Millisecond, time.Millisecond, time.Hour, "mean response-time target Tref (paper: 150 ms)")
	ps.Duration(&c.Period, "period", time.Second, time.Millisecond, time.Hour, "control period h (Yaksha default 1 s)")
}

// DeclareYakshaSweep declares the load sweep's server and client
// parameters on ps (DeclareYakshaTarget declares the controller's).
func DeclareYakshaSweep(ps *Params, c *YakshaParams) {
	ps.Duration(&c.ServiceTime, "service_time", 20*time.Millisecond, time.Microsecond, time.Hour,
		"mean service demand E[X] of a request (capacity 1/E[X] = 50 req/s by default); the paper's bookstore is not "+
			"characterised by one number, 20 ms puts the target utilization 1 − E[X]/Tref at 0.87")
	ps.Duration(&c.Timeout, "client_timeout", 10*time.Second, 0, 100000*time.Second,
		"a client gives up on a request after this long (the server still finishes it); such replies are not goodput. 0 disables")
}

// DefaultYaksha returns the Yaksha parameters' defaults.
func DefaultYaksha() YakshaParams {
	ctl := control.DefaultYakshaConfig()
	c := YakshaParams{Pole: ctl.Pole, TuneWindow: ctl.TuneWindow}
	ps := NewParams("yaksha")
	DeclareYakshaSweep(ps, &c)
	DeclareYakshaTarget(ps, &c)
	return c
}

// YakshaSweepChecks are the expectations of Figs. 7–8 on a run's summary
// (tref_ms is the run's Tref, in the run's time).
func YakshaSweepChecks(s *report.Summary) []Check {
	tref := s.Metric("tref_ms")
	return []Check{
		Within(s, "At 3× capacity the controlled mean response time is within ±30% of Tref (paper Fig. 8)",
			"mean_rt_ms_at_3x", 0.7*tref, 1.3*tref),
		AtLeast(s, "At 3× capacity the controlled throughput is ≥ 85% of the ideal throughput at Tref, capacity × (1 − E[X]/Tref) (paper Fig. 7)",
			"throughput_ratio_at_3x", 0.85),
		AtLeast(s, "Without control the mean response time at 3× grows far beyond Tref: ≥ 10 × Tref (simulator figure; paper Fig. 8)",
			"mean_rt_ms_at_3x_uncontrolled", 10*tref),
		AtMost(s, "The controlled mean response time is within ±30% of Tref at every load ≥ 2× (the simulator asks ±25%)",
			"mean_rt_max_rel_error_at_2x_plus", 0.3),
		Below(s, "Without control the throughput that clients see at 3× declines below the controlled one (paper Fig. 7)",
			"goodput_rps_at_3x_uncontrolled", "goodput_rps_at_3x", 1),
	}
}

// YakshaShiftChecks are the expectations of Figs. 10–16; timeScale is the
// run's compression (1 in the simulator), which scales the bound of 30
// paper-seconds on settling.
func YakshaShiftChecks(s *report.Summary, timeScale float64) []Check {
	bound := 30 * timeScale
	return []Check{
		AtMost(s, fmt.Sprintf("After each wave the self-tuning controller brings the mean RT back within ±25%% of Tref within 30 s of paper time (%gs here) (simulator figure; paper Figs. 10–13)", bound),
			"settle_s_max", bound),
		Below(s, "Self-tuning has a lower integrated absolute RT error than the static controller designed for the first wave (paper Figs. 14–16: sluggish)",
			"iae_self", "iae_static_low", 1),
		Below(s, "Self-tuning has a lower integrated absolute RT error than the static controller designed for 3× the first wave (paper Figs. 14–16: oscillating)",
			"iae_self", "iae_static_high", 1),
		AtMost(s, "In the last half of the third wave the self-tuning mean RT is back below Tref (+25%) (paper Figs. 10–13: the response time returns below Tref)",
			"mean_rt_ms_wave3_late_self", 1.25*s.Metric("tref_ms")),
	}
}

// YakshaShiftParams are the workload shift's load and settling rule.
type YakshaShiftParams struct {
	// Users is the number of closed-loop users each wave adds; Wave the
	// time between waves (the run lasts three).
	Users int
	Wave  time.Duration
	// Think and ThinkCap are the mean and cap of the exponential think
	// time.
	Think, ThinkCap time.Duration
	// HighFactor is the multiple of the first wave's rate the static
	// "high" controller is designed for.
	HighFactor float64
	// SettleBand and SettleWindow define a wave's settle_s (settle.Return).
	SettleBand   float64
	SettleWindow time.Duration
}

// DeclareYakshaShift declares the workload shift's parameters on ps (the
// controller's with DeclareYakshaTarget).
func DeclareYakshaShift(ps *Params, c *YakshaShiftParams) {
	ps.Int(&c.Users, "users_per_wave", 100, 1, 100000,
		"closed-loop users added by each wave (the paper's 700 → 1400 → 2100 browsers scaled by 1/7 to a one-core PS "+
			"server: wave 1 offers about 1.5× capacity, waves 1+2 about 3.5×, all three about 6×)")
	ps.Duration(&c.Wave, "wave_length", 50*time.Second, time.Second, 100000*time.Second,
		"time between waves (paper: waves at 0, 50 and 100 s); the run lasts three waves")
	ps.Duration(&c.Think, "think", 700*time.Millisecond, time.Millisecond, time.Hour, "mean of the exponential think time (paper: 0.7 s)")
	ps.Duration(&c.ThinkCap, "think_cap", 7*time.Second, time.Millisecond, time.Hour, "cap of the think time (paper: 7 s)")
	ps.Float(&c.HighFactor, "high_factor", 3, 1.01, 1000,
		"the static 'high' controller is designed for this multiple of the first wave's rate (paper: 3×, 2100 vs 700 browsers)")
	ps.Float(&c.SettleBand, "settle_band", 0.25, 0.01, 10, "settle_s_max band: relative distance of the mean RT from Tref")
	ps.Duration(&c.SettleWindow, "settle_window", 5*time.Second, 0, time.Hour,
		"settling uses the completion-weighted mean RT over a centred window of this length (per-period means of a PS server "+
			"near saturation are noisy): a wave's settle_s is the time from its start until that mean, having left the band, "+
			"is back within it")
}

// DefaultYakshaShift returns the workload shift's defaults.
func DefaultYakshaShift() YakshaShiftParams {
	var c YakshaShiftParams
	DeclareYakshaShift(NewParams("yaksha-workload-shift"), &c)
	return c
}

// YakshaShiftMetrics sets one controller's metrics (each name + suffix)
// from its per-period mean response times (s), weighted by their
// samples, the same way in both modes: settle_s_wave1..3 (settle.Return
// over each wave), settle_s_max (NaN when a wave never settled) and iae,
// the integral of |mean RT − Tref| over the periods with samples (s·s).
// It returns the waves' settling times.
func YakshaShiftMetrics(s *report.Summary, suffix string, pts []settle.Point, c YakshaShiftParams, tref, h time.Duration) []float64 {
	iae := 0.0
	for _, p := range pts {
		if p.Weight > 0 {
			iae += math.Abs(p.Value-tref.Seconds()) * (p.End - p.Start).Seconds()
		}
	}
	var settles []float64
	worst := 0.0
	for k := range 3 {
		from, to := time.Duration(k)*c.Wave, time.Duration(k+1)*c.Wave
		st := settle.Return(pts, from, to, tref.Seconds(), c.SettleBand, settle.HalfWindow(c.SettleWindow, h))
		settles = append(settles, st)
		s.Set(fmt.Sprintf("settle_s_wave%d%s", k+1, suffix), st)
		worst = math.Max(worst, st)
		if math.IsNaN(st) {
			worst = math.Inf(1)
		}
	}
	if math.IsInf(worst, 1) {
		worst = math.NaN() // a wave that never settled
	}
	s.Set("settle_s_max"+suffix, worst)
	s.Set("iae"+suffix, iae)
	return settles
}
