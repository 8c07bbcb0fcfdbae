package figure

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/report"
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
