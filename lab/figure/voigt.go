// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/report"
)

// The Voigt & Gunningberg figures (docs/algorithms.md §1): dual admission
// control in front of a web server with a CPU and an outgoing-link
// bottleneck, against the offered rate (Fig. 4, Table 1, Fig. 6:
// voigt-sweep), under a sudden high load (Fig. 5: voigt-step) and against
// a large-file flow (Table 2: voigt-bandwidth). The paper's expectations,
// checked on either driver's summary, are here; the two drivers model the
// server differently (the simulator's SURGE-like model, the live
// experiments' calibrated CGI and static testbeds) and keep their own
// parameters.

// VoigtSweepChecks are the expectations of Fig. 4, Table 1 and Fig. 6;
// hi is the highest offered rate's metric tag ("1000").
func VoigtSweepChecks(s *report.Summary, hi string) []Check {
	cs := []Check{
		Within(s, "At 300 req/s the controlled server serves the whole offered load (paper Fig. 4; simulator [295, 305])",
			"throughput_rps_at_300", 0.97*300, 1.03*300),
		AtMost(s, "At 300 req/s the connection policer is inactive: it resets under 1% of the connections (paper §3.2: it stays inactive while the resource rules suffice)",
			"policer_drop_fraction_at_300", 0.01),
		AtLeast(s, "With the controls, throughput does not collapse at the highest offered rate: at least 0.8 of its peak (paper Fig. 4: it stops increasing above 800 req/s; simulator [0.8, 1])",
			"plateau_ratio", 0.8),
		AtLeast(s, "Without controls, the mean response time rises sharply once the server saturates: its largest per-step mean is at least 10× the one at 300 req/s (paper Fig. 4: from about 375 req/s)",
			"mean_rt_ms_max_uncontrolled", 10*s.Metric("mean_rt_ms_at_300_uncontrolled")),
		Below(s, "Without controls, throughput falls from its peak at the highest rate more than with them (paper Fig. 4: it decreases without controls, plateaus with them; simulator ≤ 0.1 vs ≥ 0.8)",
			"plateau_ratio_uncontrolled", "plateau_ratio", 1),
		AtMost(s, "With the controls the admitted requests' mean RT at the highest rate stays well below the 2 s client timeout: ≤ 500 ms (paper Fig. 4: it increases only slightly when policing is active)",
			"mean_rt_ms_at_max_rate", 500),
		AtLeast(s, fmt.Sprintf("With the controls the throughput at %s req/s beats the uncontrolled server's (paper Fig. 4)", hi),
			"throughput_rps_at_"+hi, s.Metric("throughput_rps_at_"+hi+"_uncontrolled")*1.0001),
		Within(s, "Policing sets in later when more of the load is dynamic (paper Table 1: 610, 640, 675 req/s for 0, 10, 20 %; 1 = the onsets increase with the fraction)",
			"policing_onset_increasing", 1, 1),
		AtLeast(s, "The CPU rule defers policing beyond the uncontrolled server's saturation: the 20 % onset is above the uncontrolled peak throughput (paper: 675 vs about 375 req/s)",
			"policing_onset_rps_20pct", s.Metric("throughput_rps_max_uncontrolled")),
	}
	// Fig. 6 (left), §3.5: "we achieve about the same throughput
	// independent of the distribution of the requests when the policer's
	// bucket size is 20". The simulator runs each arrival process on its
	// own (0.4–4.5 % apart, seeds 1–3); the live driver, whose single runs
	// differ by about 10 % with where the PD's rate froze after its
	// transient, alternates the two within the same runs and reports the
	// runs' spread (throughput_rps_at_1000_run_spread).
	if _, ok := s.Get("throughput_rps_at_1000_poisson"); ok {
		c, p := s.Metric("throughput_rps_at_1000"), s.Metric("throughput_rps_at_1000_poisson")
		measured := fmt.Sprintf("throughput_rps_at_1000 = %s, throughput_rps_at_1000_poisson = %s (must differ by ≤ 10%%)", Num(c), Num(p))
		if v, ok := s.Get("throughput_rps_at_1000_run_spread"); ok {
			measured += fmt.Sprintf("; the constant parts of the two runs differ by %s", Num(v))
		}
		cs = append(cs, Check{
			Claim:    "Poisson arrivals reach about the same throughput as constant ones at 1000 req/s, policer bucket 20 (paper Fig. 6 left: \"about the same throughput independent of the distribution\"; simulator ±10 %)",
			Measured: measured,
			Pass:     math.Abs(p-c) <= 0.1*c,
		})
	}
	return cs
}

// VoigtStepChecks are the expectations of Fig. 5: stepLen is the length of
// the high load, cgiDemand the dynamic requests' offered rate at the low
// load (req/s), which the CPU rule should have climbed to by the step,
// and timeout the clients' timeout.
func VoigtStepChecks(s *report.Summary, stepLen time.Duration, cgiDemand float64, timeout time.Duration) []Check {
	cs := []Check{
		Within(s, "At 300 req/s before the step the policer is inactive: its rate is still about its initial 1000/s (paper Fig. 5; simulator 1000)",
			"policer_rate_at_step", 950, 1000),
		// The paper's figure shows the rate falling below half its
		// initial 1000/s, because its server's capacity under the step
		// was below 500 req/s: every connection let through cost the
		// server's own CPU kernel work (the simulator's cpu_kernel). The
		// law's aim is the capacity, whatever it is; a server that keeps
		// more of it (the live testbed, where the proxy's connection work
		// runs on the other CPU; the simulator with cpu_kernel=0: rate
		// after 5 periods 727–797/s, minimum 493–566/s, never below half
		// with seeds 2 and 3) must not be held to 500/s. lab/NOTEBOOK.md.
		Within(s, "After the step to 850 req/s the policer's rate closes half its gap to what the server sustains within a few periods: below the midpoint of its initial rate and the step's controlled throughput within ≤ 8 periods (paper Fig. 5: \"decreases very quickly\", below half of 1000/s as its capacity was below 500; simulator [1, 8])",
			"periods_to_halfway_to_capacity", 1, 8),
		AtMost(s, "After the step the policer's rate comes down to the server's capacity: its minimum is at most 1.25 × the controlled throughput during the step (simulator 1.13–1.23 with the paper's kernel cost, 0.90–0.96 without)",
			"policer_rate_min", 1.25*s.Metric("throughput_rps_step")),
		AtMost(s, "After the load is back at 300 req/s the policer lets every connection through again: it resets ≤ 1% of them (paper: it rises to about 340/s, enough for 300 req/s)",
			"policer_drop_fraction_after", 0.01),
		AtMost(s, "With the controls the admitted requests' mean RT is back to normal before the high load ends: per-second mean within 10× its level before the step (simulator ≤ 19 s of the 20 s step)",
			"rt_settle_s", stepLen.Seconds()-1),
		AtMost(s, "After the step the mean RT is back to its level before the step (≤ 2×)",
			"mean_rt_ms_after", 2*s.Metric("mean_rt_ms_before")),
		// The paper's Fig. 5 gives no response time. The whole step's mean
		// of the answered requests is about the clients' timeout with and
		// without the controls (the listen queue fills to its 1024 cap
		// while the PD brings the rate down, and the uncontrolled server's
		// few answers are those of its first seconds): the paper's model
		// in the simulator, seeds 1–3, 883 / 973 / 962 ms against 940 /
		// 931 / 969 uncontrolled; live 894 against 1101. Once the policer
		// has settled the controls hold the RT well below the
		// uncontrolled server's, which by then answers almost nothing
		// (simulator 0–0.6 req/s, at 1989 ms: the clients' timeout).
		// lab/NOTEBOOK.md.
		AtMost(s, fmt.Sprintf("In the high load's last quarter the controls keep the admitted requests' mean RT well below the uncontrolled server's, whose few answers then take the clients' timeout: ≤ half of it, %v (simulator 242–413 ms; 501–533 with the paper's kernel cost moved into the requests' demands; uncontrolled 0–0.6 answers/s at 1989 ms)", timeout/2),
			"mean_rt_ms_step_last_quarter", float64(timeout/2)/float64(time.Millisecond)),
		AtLeast(s, "During the high load the controls lose no throughput against the uncontrolled server (simulator: more than twice as much)",
			"throughput_rps_step", s.Metric("throughput_rps_step_uncontrolled")),
		AtMost(s, "The CGI acceptance rate falls by at most Kp·10 = 2 req/s per period during the high load (paper §3.3)",
			"cgi_rate_max_fall_per_period", 2+1e-9),
		AtLeast(s, "At 300 req/s the CPU rule has climbed to the dynamic requests' demand: its rate is at least 0.8 × their offered rate (paper Fig. 5: 74–77/s)",
			"cgi_rate_at_step", 0.8*cgiDemand),
	}
	return cs
}

// VoigtBandwidthChecks are the expectations of Table 2; hi is the highest
// rate of large-file requests' metric tag ("120").
func VoigtBandwidthChecks(s *report.Summary, hi string) []Check {
	cs := []Check{
		AtMost(s, fmt.Sprintf("With the bandwidth rule the small files' mean RT at %s req/s of large files stays within 10× their RT without the large flow (paper Table 2: 27–29 ms; simulator ≤ 10×)", hi),
			"small_rt_ratio", 10),
		AtLeast(s, "Without controls the small files' mean RT is at least 10× the controlled one (paper Table 2: 1395–3455 ms vs 27–29 ms)",
			"small_rt_ms_uncontrolled", 10*s.Metric("small_rt_ms")),
		AtLeast(s, "Both workloads together complete at least as many requests with the controls as without (paper Table 2: 331 vs 317 and 261 req/s)",
			"total_throughput_gain", 1),
		AtLeast(s, fmt.Sprintf("The premise: without controls the large flow saturates the emulated link (utilization ≥ 0.95 at %s req/s)", hi),
			"link_utilization_at_"+hi+"_uncontrolled", 0.95),
		AtLeast(s, "The rule keeps the link busy: utilization ≥ 0.8 with the controls (simulator ≥ 0.9)",
			"link_utilization_at_"+hi, 0.8),
		AtLeast(s, "With the controls the SURGE-like workload keeps most of its throughput: ≥ 0.85 × its throughput without the large flow (paper: 285–289 of 300 req/s)",
			"surge_throughput_rps_at_"+hi, 0.85*s.Metric("surge_throughput_rps_unloaded")),
	}
	return cs
}
