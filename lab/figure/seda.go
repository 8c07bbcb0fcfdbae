// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/report"
)

// The SEDA figures reproduce Welsh & Culler (docs/algorithms.md §5): one
// bottleneck stage under closed-loop users, with SEDA's AIMD controller on
// the stage's p90 (Figs. 7, 10: seda-spike), per class (Figs. 14–15:
// seda-classes) and with service degradation (Figs. 12–13:
// seda-degradation). This file is the part both drivers share: the
// stage's parameters, declared once (the live experiments take the same
// defaults compressed by their time scale), and the paper's expectations.

// SEDAStageParams are the parameters of the SEDA figures' stage, in the
// paper's time.
type SEDAStageParams struct {
	// ServiceTime is the stage's mean service time (at full quality), and
	// Service its distribution.
	ServiceTime time.Duration
	Service     string
	// Think is the mean of the users' exponential think time; RetryWait
	// the wait of a rejected user before retrying.
	Think     time.Duration
	RetryWait dist.Dist
	// Target is the controller's p90 target; Burst the token bucket's
	// size; InitialRate the controller's initial token rate, req/s.
	Target      time.Duration
	Burst       int
	InitialRate float64
}

// SEDADefaults are one figure's defaults of the stage parameters.
type SEDADefaults struct {
	ServiceTime, Target time.Duration
	ServiceDoc          string
	// RetryWait and RetryDoc default to "det:5s" and the paper's 5 s.
	RetryWait, RetryDoc string
}

// The SEDA figures' stages.
var (
	SEDASpikeStage = SEDADefaults{ServiceTime: 20 * time.Millisecond, Target: time.Second,
		ServiceDoc: "mean service time of the bottleneck stage (one server, FIFO queue): 20 ms is 50 req/s"}
	SEDAClassesStage = SEDADefaults{ServiceTime: 20 * time.Millisecond, Target: time.Second,
		ServiceDoc: "mean service time of the bottleneck stage (one server, FIFO queue): 20 ms is 50 req/s; the paper's 10 s " +
			"target for its slow e-mail service becomes 1 s for this fast stage",
		RetryWait: "uniform:4s,6s",
		RetryDoc: "wait of a rejected user before retrying: 5 s on average (paper), ±1 s. The 128 high-priority users join in " +
			"the same instant; with a deterministic 5 s wait those rejected together retry together for the rest of the run, " +
			"each lockstep burst meets a 5-token bucket, and the class is rejected more than the desynchronised low class " +
			"even without differentiation (with det:5s: low − high ≈ −0.2). Real clients drift apart; the jitter models that"}
	SEDADegradationStage = SEDADefaults{ServiceTime: 100 * time.Millisecond, Target: 5 * time.Second,
		ServiceDoc: "mean work of a request at full quality (one server, FIFO queue); a request served at quality q takes q " +
			"times its work. 100 ms (10 ms at the lowest quality) makes the stage unable to serve 1000 users within the 5 s " +
			"target (paper) even fully degraded, as in the paper"}
)

// ServiceKinds are the service-time distributions a figure's service
// parameter accepts (see the simulator's serviceDist).
var ServiceKinds = []string{"exp", "det", "lognormal", "pareto"}

// DeclareSEDAStage declares the stage parameters on ps, bound to c, with
// the defaults d.
func DeclareSEDAStage(ps *Params, c *SEDAStageParams, d SEDADefaults) {
	if d.RetryWait == "" {
		d.RetryWait, d.RetryDoc = "det:5s", "wait of a rejected user before retrying (paper: 5 s)"
	}
	ps.Duration(&c.ServiceTime, "service_time", d.ServiceTime, time.Microsecond, time.Hour, d.ServiceDoc)
	ps.Choice(&c.Service, "service", "exp", ServiceKinds, "service-time distribution of the stage")
	ps.Duration(&c.Think, "think", 20*time.Millisecond, 0, time.Hour, "mean of the users' exponential think time (paper: 20 ms)")
	ps.DurationDist(&c.RetryWait, "retry_wait", d.RetryWait, d.RetryDoc)
	ps.Duration(&c.Target, "target", d.Target, time.Millisecond, time.Hour, "90th-percentile response-time target of the controller")
	ps.Int(&c.Burst, "burst", 5, 1, 1000000, "token-bucket size of the stage's gate (the paper does not give it; sluice's default)")
	ps.Float(&c.InitialRate, "initial_rate", 50, 0.05, 5000,
		"the controller's initial token rate in req/s. The paper does not give it; 50 req/s is the capacity of the default 20 ms stage, "+
			"which an operator sizing the stage knows (the degradation controller ignores it: it starts with admission control off). Under the light base load the additive increase raises it by about 1.6 req/s per run. The "+
			"controller's own default is rate_max = 5000 (start open); with track_demand its first cut starts from the admitted rate, "+
			"and that start gives a spike p90 of 1.35–1.82 s for seeds 1–5 (8.4–9.3 s with track_demand false)")
}

// DefaultSEDAStage returns the stage parameters' defaults d.
func DefaultSEDAStage(d SEDADefaults) SEDAStageParams {
	var c SEDAStageParams
	DeclareSEDAStage(NewParams("seda"), &c, d)
	return c
}

// SEDASpikeChecks are the expectations of Fig. 10 on a run's summary
// (target_ms is the run's p90 target, in the run's time).
func SEDASpikeChecks(s *report.Summary) []Check {
	target := s.Metric("target_ms")
	return []Check{
		AtMost(s, "Admitted requests' p90 during the spike stays near the target: ≤ 1.5 × target (paper Fig. 10)",
			"p90_ms_spike", 1.5*target),
		AtLeast(s, "Without admission control the p90 during the spike is far above the target: ≥ 5 × target (paper Fig. 10)",
			"p90_ms_spike_uncontrolled", 5*target),
		Within(s, "Most of the spike is rejected, as in the paper (70–80%; the simulator's band is [0.6, 0.95])",
			"reject_fraction_spike", 0.6, 0.95),
		AtLeast(s, "Controlled goodput (answers within the target) during the spike beats the uncontrolled one",
			"goodput_within_target_rps_spike", s.Metric("goodput_within_target_rps_spike_uncontrolled")+1e-9),
	}
}

// SEDAClassesChecks are the expectations of Figs. 14–15.
func SEDAClassesChecks(s *report.Summary) []Check {
	diffNo := s.Metric("reject_diff_nodiff")
	return []Check{
		AtLeast(s, "With differentiation the low class is rejected much more than the high class while both are active: reject_low − reject_high ≥ 0.2 (paper: 87.9% vs 48.8%)",
			"reject_diff", 0.2),
		{Claim: "Without differentiation both classes are rejected alike: |reject_low − reject_high| ≤ 0.1 (paper: 55.5% vs 57.6%)",
			Measured: fmt.Sprintf("reject_diff_nodiff = %s (must be within ±0.1)", Num(diffNo)), Pass: math.Abs(diffNo) <= 0.1},
		Below(s, "Differentiation favours the high class: it is rejected less than without differentiation",
			"reject_high", "reject_high_nodiff", 1),
	}
}

// SEDADegradationChecks are the expectations of Figs. 12–13; steady is
// the spike's onset left out of the _after_60s metrics, in the run's time.
//
// Over the whole spike the checks count the answers within the target,
// not the p90. The paper plots the p90 per interval (Fig. 13) and
// re-enables admission control only once the quality is at its floor
// (§3.4, §4.5), so the requests queued before then are served late by the
// paper's design, in both variants alike, and when that onset holds more
// than a tenth of the spike's answers the whole spike's p90 is the
// onset's: it measures the spike's length and the capacity at q_min, not
// the controller. The paper's model in the simulator (seeds 1–3,
// 2026-11-27, target 5000 ms) meets "p90 ≤ 1.5 × target over the spike"
// for its 300 s spike (6308–6735 ms) but not for the live run's 240
// paper-seconds (8646–9262 ms), nor for 300 s with the live stage's
// capacity at q_min (quality_min 0.133: 8927–10214 ms); with both (240 s,
// quality_min 0.138) it gives 12.5–13.8 s, 2.5–2.8 × target and 0.88–0.95
// of degradation alone's, where live runs measured 2.65–2.98 × and
// 0.90–1.02. The answers within the target tell the variants apart in
// every one of those runs (37–61 against 0.17–0.27 a second; live
// 135–157 against 0.7), and the p90 after the onset stays within 1.5 ×
// target in all of them (5673–7188 ms): those state the paper's "much
// more effective at meeting the response time target".
//
// After the onset the two variants' p90s are compared by how far each
// misses the target, max(0, p90 − target) < 0.5 × max(0, p90 alone −
// target), not by their ratio. The paper gives no p90 for either figure
// (its text: degradation alone "oscillating near the target", with
// admission control "much more effective at meeting the response time
// target", 99% rejected). The AIMD law steers the p90 into the band
// [(1 + err_i)·target, (1 + err_d)·target] = [0.5, 1] × target, while
// degradation alone's p90 is the closed loop's N·s(q_min) − Z, the
// stage's size; so the ratio measures the stage. The paper's model in the
// simulator (seeds 1–3, 2026-11-27) gives 0.68, 0.57, 0.54, 0.49, 0.43
// and 0.36 for quality_min 0.07, 0.085, 0.1, 0.12, 0.16 and 0.2
// (degradation alone at 1.5–4.3 × target, admission at 1.0–1.6 ×); the
// same with the paper's law without sluice's refinements (0.54–0.55 at
// 0.1) and for any window from 30 to 150 s after the spike's start
// (0.52–0.60); 0.45–0.46 with the live stage's capacity at q_min (290 of
// 400 req/s: quality_min 0.138), where live runs gave 0.35–0.49. The miss
// over the target is 0.003–0.20 of degradation alone's in every one of
// those runs, and 0–0.22 live.
func SEDADegradationChecks(s *report.Summary, steady time.Duration) []Check {
	target := s.Metric("target_ms")
	cs := []Check{
		Below(s, "Over the spike, degradation + admission control answers far more requests within the target than degradation alone: more than twice as many a second (paper: \"much more effective at meeting the response time target\")",
			"goodput_within_target_rps_degrade_only", "goodput_within_target_rps", 0.5),
		Below(s, "Degradation alone \"does a fair job\": its p90 is below that of no control (paper Fig. 12)",
			"p90_ms_degrade_only", "p90_ms_none", 1),
		AtMost(s, "Under the spike the quality level falls: mean quality of degradation alone during the spike < 0.5",
			"quality_mean_degrade_only", 0.5),
	}
	if _, ok := s.Get("p90_ms_after_60s"); ok {
		cs = append(cs, AtMost(s, fmt.Sprintf("After the spike's onset (its first paper-minute, %v here), degradation + admission control holds the p90 near the target: ≤ 1.5 × target", steady),
			"p90_ms_after_60s", 1.5*target),
			MissesLess(s, "After the onset, degradation + admission control is much more effective at meeting the target than degradation alone: its p90 exceeds the target by less than half as much (paper Figs. 12–13)",
				"p90_ms_after_60s", "p90_ms_after_60s_degrade_only", target, 0.5))
	}
	return cs
}

// SEDASpikeLoad is the flash crowd of Figs. 10 and 12–13: BaseUsers
// closed-loop users, SpikeUsers from SpikeStart for SpikeLen, then
// BaseUsers again for After.
type SEDASpikeLoad struct {
	BaseUsers, SpikeUsers       int
	SpikeStart, SpikeLen, After time.Duration
}

// DeclareSEDASpikeLoad declares the flash crowd on ps with the paper's
// 3 → 1000 users (and the simulator's 60 s, 300 s, 60 s).
func DeclareSEDASpikeLoad(ps *Params, c *SEDASpikeLoad) {
	ps.Int(&c.BaseUsers, "base_users", 3, 0, 1000000, "users before and after the spike (paper: 3)")
	ps.Int(&c.SpikeUsers, "spike_users", 1000, 1, 1000000, "users during the spike (paper: 1000)")
	ps.Duration(&c.SpikeStart, "spike_start", 60*time.Second, 0, 100000*time.Second, "time the spike starts")
	ps.Duration(&c.SpikeLen, "spike_length", 300*time.Second, time.Second, 100000*time.Second, "length of the spike")
	ps.Duration(&c.After, "after", 60*time.Second, 0, 100000*time.Second, "time simulated after the spike")
}

// DefaultSEDASpikeLoad returns the flash crowd's defaults.
func DefaultSEDASpikeLoad() SEDASpikeLoad {
	var c SEDASpikeLoad
	DeclareSEDASpikeLoad(NewParams("seda"), &c)
	return c
}

// Schedule returns the number of users over time.
func (c SEDASpikeLoad) Schedule() (dist.Schedule, error) {
	return dist.NewSchedule(dist.Segment{Start: 0, Rate: float64(c.BaseUsers)},
		dist.Segment{Start: c.SpikeStart, Rate: float64(c.SpikeUsers)},
		dist.Segment{Start: c.SpikeStart + c.SpikeLen, Rate: float64(c.BaseUsers)})
}

// End returns the end of the run.
func (c SEDASpikeLoad) End() time.Duration { return c.SpikeStart + c.SpikeLen + c.After }

// SEDAClassesLoad is the load of Figs. 14–15: Users low-priority users
// throughout and as many high-priority users from HighStart to HighEnd,
// in a run of Duration.
type SEDAClassesLoad struct {
	Users                        int
	HighStart, HighEnd, Duration time.Duration
}

// DeclareSEDAClassesLoad declares the classes' load on ps with the
// paper's values.
func DeclareSEDAClassesLoad(ps *Params, c *SEDAClassesLoad) {
	ps.Int(&c.Users, "users_per_class", 128, 1, 1000000, "users of each class (paper: 128)")
	ps.Duration(&c.HighStart, "high_start", 100*time.Second, 0, 100000*time.Second, "time the high-priority users start (paper: 100 s)")
	ps.Duration(&c.HighEnd, "high_end", 200*time.Second, 0, 100000*time.Second, "time the high-priority users leave (paper: 200 s)")
	ps.Duration(&c.Duration, "duration", 300*time.Second, time.Second, 100000*time.Second, "length of the run")
}

// DefaultSEDAClassesLoad returns the classes' load's defaults.
func DefaultSEDAClassesLoad() SEDAClassesLoad {
	var c SEDAClassesLoad
	DeclareSEDAClassesLoad(NewParams("seda-classes"), &c)
	return c
}
