// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/report"
)

// The tests below assert, for seeds 1–5, the papers' figures that the
// models reproduce, each with the default parameters. Where a figure is
// not met (the ordering of the Yaksha IAE against the static low-load
// design), the test asserts what the run does show, and the comment says why.

var seeds = []uint64{1, 2, 3, 4, 5}

// run runs a scenario with overrides and returns its summary.
func run(t *testing.T, name string, seed uint64, sets ...string) *report.Summary {
	t.Helper()
	return runResult(t, name, seed, sets...).Summary
}

// runResult runs a scenario with overrides and returns its result; any
// error fails the test.
func runResult(t testing.TB, name string, seed uint64, sets ...string) *figure.Result {
	t.Helper()
	res, err := runErr(t, name, seed, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runErr runs a scenario with overrides and returns the run's result and
// error; an unknown scenario or a refused override fails the test.
func runErr(t testing.TB, name string, seed uint64, sets ...string) (*figure.Result, error) {
	t.Helper()
	p, err := Prepare(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set(sets...); err != nil {
		t.Fatal(err)
	}
	return p.Run(seed)
}

// within asserts lo ≤ metric ≤ hi (a NaN metric fails).
func within(t *testing.T, s *report.Summary, name string, lo, hi float64) {
	t.Helper()
	v := s.Metric(name)
	if !(v >= lo && v <= hi) {
		t.Errorf("seed %d: %s = %v, want within [%v, %v]", s.Seed, name, v, lo, hi)
	}
}

// allPass asserts that every check of a spec passes, prefixing a failure
// with what (the seed and the variant).
func allPass(t *testing.T, what string, cs []figure.Check) {
	t.Helper()
	for _, c := range cs {
		if !c.Pass {
			t.Errorf("%s: %s: %s", what, c.Claim, c.Measured)
		}
	}
}

func forSeeds(t *testing.T, f func(t *testing.T, seed uint64)) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			f(t, seed)
		})
	}
}

func TestKihlStep(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "kihl-step", seed)
		within(t, s, "utilization_mean", 0.75, 0.85)
		// The good setting settles (M/D/1 variant, whose per-period
		// utilization is not drowned in service-time noise, in about 15 s;
		// the paper's {20, 2.8} puts the empty-queue loop's slow pole at
		// 0.879, so reaching ±0.1 from 0 takes ≥ 13 periods: "≤ 10 s"
		// is not reachable from I(0) = 0). The paper's noise-free fluid
		// model needs 15 s by the same rule, and the spec's bound is that
		// plus half a settle window: every check passes.
		within(t, s, "settling_time_s_model", 14, 16)
		within(t, s, "settling_time_s_md1", 5, 20)
		allPass(t, fmt.Sprintf("seed %d", seed), figure.KihlChecks(s, figure.DefaultKihl(60*time.Second), 1, false))
		within(t, s, "settling_time_s", 5, 60)
		// The paper's M/D/1 server adds no noise of its own: the settle
		// window stays the configured 5 s.
		within(t, s, "settle_window_s", 5, 5)
		within(t, s, "settle_noise_sd_md1", 0, 0.03)
		within(t, s, "utilization_mean_md1", 0.75, 0.85)
		within(t, s, "utilization_std_md1", 0, 0.06)
		// The bad setting never settles and swings between 0 and 1.
		if v := s.Metric("settling_time_s_compare_ti"); !math.IsNaN(v) && v < 50 {
			t.Errorf("seed %d: Ti = 0.1 s settled at %v s", seed, v)
		}

		// The figure: with --set ti=0.1 the std is at least twice
		// the good run's.
		bad := run(t, "kihl-step", seed, "ti=0.1", "compare_ti=0", "compare_service=false")
		if b, g := bad.Metric("utilization_std"), s.Metric("utilization_std"); !(b >= 2*g) {
			t.Errorf("seed %d: utilization_std with ti=0.1 is %v, good run %v: want ≥ 2×", seed, b, g)
		}
		// --set service=det gives the M/D/1 variant as the main run.
		det := run(t, "kihl-step", seed, "service=det", "compare_ti=0", "compare_service=false")
		if det.Metric("utilization_std") != s.Metric("utilization_std_md1") {
			t.Errorf("seed %d: service=det std %v differs from the md1 variant %v", seed, det.Metric("utilization_std"), s.Metric("utilization_std_md1"))
		}
		// The live CPU's wandering cost (speed_cv = 0.12, φ = 0.55 per
		// period) spreads the M/D/1 utilization as live (std 0.097 on the
		// quiet machine); the window from that noise keeps every check.
		noisy := run(t, "kihl-step", seed, "speed_cv=0.12")
		within(t, noisy, "utilization_std_md1", 0.06, 0.13)
		within(t, noisy, "settle_noise_sd_md1", 0.06, 0.13)
		within(t, noisy, "settle_window_s", 7, 59)
		allPass(t, fmt.Sprintf("seed %d, speed_cv=0.12", seed), figure.KihlChecks(noisy, figure.DefaultKihl(60*time.Second), 1, false))
		// The fluid model of the paper behaves like the queue.
		fl := run(t, "kihl-step", seed, "model=fluid", "compare_service=false")
		within(t, fl, "utilization_mean", 0.75, 0.85)
		if b, g := fl.Metric("utilization_std_compare_ti"), fl.Metric("utilization_std"); !(b >= 2*g) {
			t.Errorf("seed %d: fluid model: bad std %v, good %v", seed, b, g)
		}
	})
}

func TestKihlDistribution(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "kihl-distribution", seed)
		// The M/D/1 run meets the 80 % reading of Fig. 8; in M/M/1 the
		// work admitted per 1 s period alone has a standard deviation of
		// √35·22.5 ms ≈ 0.13 s, so no admission count can keep 80 % of
		// the periods within ±0.1 (a fixed rate at the exact operating
		// point gives 0.54–0.62): the spec's bound is 0.9 × that ideal
		// share (figure.KihlIdealWithin), and the figure's checks pass.
		within(t, s, "p_util_within_0_1_ideal", 0.54, 0.55)
		within(t, s, "p_util_within_0_1_ideal_md1", 1, 1)
		allPass(t, fmt.Sprintf("seed %d", seed), figure.KihlChecks(s, figure.DefaultKihl(1000*time.Second), 1, true))
		within(t, s, "p_util_within_0_1_md1", 0.8, 1)
		within(t, s, "p_util_within_0_1", 0.45, 0.7)
		within(t, s, "utilization_mean", 0.78, 0.82)
		if g, b := s.Metric("p_util_within_0_1"), s.Metric("p_util_within_0_1_compare_ti"); !(g >= 5*b) {
			t.Errorf("seed %d: share within ±0.1: good %v, bad %v", seed, g, b)
		}
	})
}

func TestYakshaLoadSweep(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "yaksha-load-sweep", seed)
		tref := 150.0
		for _, l := range []string{"2x", "3x", "4x", "5x"} {
			within(t, s, "mean_rt_ms_at_"+l, 0.75*tref, 1.25*tref)
			within(t, s, "throughput_ratio_at_"+l, 0.9, 1.1)
		}
		within(t, s, "throughput_ratio_at_3x", 0.9, 1.1)
		within(t, s, "mean_rt_ms_at_3x_uncontrolled", 10*tref, math.Inf(1))
		// Uncontrolled goodput collapses, controlled throughput does not.
		if u, c := s.Metric("goodput_rps_at_3x_uncontrolled"), s.Metric("goodput_rps_at_3x"); !(u < 0.5*c) {
			t.Errorf("seed %d: goodput at 3×: uncontrolled %v, controlled %v", seed, u, c)
		}
	})
}

func TestYakshaWorkloadShift(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "yaksha-workload-shift", seed)
		within(t, s, "settle_s_max", 0, 30)
		// Self-tuning beats the static design for 3× the load clearly. The
		// static design for the first wave has the larger gains
		// (Kp = 1/(√2·λ0·Tref²)); on this PS plant, which answers within a
		// period, a 3.5× loop-gain excess does not destabilise a PI with a
		// 10 s time constant, so it ties with self-tuning (±10%) instead
		// of losing as the issue expects.
		self, low, high := s.Metric("iae_self"), s.Metric("iae_static_low"), s.Metric("iae_static_high")
		if !(self < 0.75*high) {
			t.Errorf("seed %d: iae_self %v not well below iae_static_high %v", seed, self, high)
		}
		if !(self < 1.12*low) {
			t.Errorf("seed %d: iae_self %v more than 12%% above iae_static_low %v", seed, self, low)
		}
		// The sluggish design is the slowest to recover from the first wave.
		if sh, ss := s.Metric("settle_s_wave1_static_high"), s.Metric("settle_s_wave1_self"); !(math.IsNaN(sh) || sh > ss) {
			t.Errorf("seed %d: wave 1 settles in %v s with the high design, %v s self-tuned", seed, sh, ss)
		}
	})
}

func TestSEDASpike(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "seda-spike", seed)
		within(t, s, "p90_ms_spike", 0, 1500)
		within(t, s, "reject_fraction_spike", 0.6, 0.95)
		within(t, s, "p90_ms_spike_uncontrolled", 10000, math.Inf(1))
		within(t, s, "reject_fraction_spike_uncontrolled", 0, 0)
	})
}

func TestSEDAClasses(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "seda-classes", seed)
		within(t, s, "reject_diff", 0.2, 1)
		within(t, s, "reject_diff_nodiff", -0.1, 0.1)
		// Both classes are rejected a lot without differentiation, and the
		// high class much less with it.
		within(t, s, "reject_high_nodiff", 0.3, 0.9)
		if d, n := s.Metric("reject_high"), s.Metric("reject_high_nodiff"); !(d < n-0.1) {
			t.Errorf("seed %d: high class rejected %v with differentiation, %v without", seed, d, n)
		}
	})
}

func TestSEDADegradation(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "seda-degradation", seed)
		target := s.Metric("target_ms")
		within(t, s, "p90_ms", 0, 1.5*target)
		if a, d := s.Metric("p90_ms"), s.Metric("p90_ms_degrade_only"); !(a < d) {
			t.Errorf("seed %d: p90 with admission %v, degradation alone %v", seed, a, d)
		}
		if d, n := s.Metric("p90_ms_degrade_only"), s.Metric("p90_ms_none"); !(d < n/2) {
			t.Errorf("seed %d: degradation alone %v does not beat no control %v", seed, d, n)
		}
		within(t, s, "reject_fraction_degrade_only", 0, 0)
		within(t, s, "reject_fraction", 0.3, 0.99)
		within(t, s, "quality_mean", 0.1, 0.5)
		// The spec both drivers use: every expectation met, after the
		// onset too.
		allPass(t, fmt.Sprintf("seed %d", seed), figure.SEDADegradationChecks(s, time.Minute))
	})
}

// The Voigt & Gunningberg scenarios, asserted for seeds 1–5 with their
// default parameters (a sweep takes about 3.5 s of CPU, a step or
// bandwidth run 0.3 s).

func TestVoigtSweep(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "voigt-sweep", seed)
		// Table 1: SYN policing sets in at higher offered rates when more of
		// the load is dynamic (the CPU rule absorbs it first), with margins
		// well above the bisection's 5 req/s resolution.
		o0, o10, o20 := s.Metric("policing_onset_rps_0pct"), s.Metric("policing_onset_rps_10pct"), s.Metric("policing_onset_rps_20pct")
		if !(100 < o0 && o0+10 < o10 && o10+10 < o20 && o20 < 1000) {
			t.Errorf("seed %d: onsets %v, %v, %v req/s for 0, 10, 20 %% dynamic: want increasing by > 10 within (100, 1000)", seed, o0, o10, o20)
		}
		within(t, s, "policing_onset_increasing", 1, 1)
		// Fig. 4: no drops at low load; a plateau without collapse and a
		// bounded mean RT with the controls; collapse without them.
		within(t, s, "throughput_rps_at_300", 295, 305)
		within(t, s, "policer_drop_fraction_at_300", 0, 0)
		within(t, s, "throughput_rps_max", 400, 700)
		within(t, s, "plateau_ratio", 0.8, 1)
		within(t, s, "mean_rt_ms_max", 0, 1000)
		within(t, s, "mean_rt_ms_at_max_rate", 0, 50)
		within(t, s, "plateau_ratio_uncontrolled", 0, 0.1)
		if rt := s.Metric("mean_rt_ms_at_500_uncontrolled"); !(rt >= 1000) {
			t.Errorf("seed %d: uncontrolled mean RT at 500 req/s %v ms, want ≥ 1000 (collapse)", seed, rt)
		}
		// Fig. 6: Poisson arrivals reach the same plateau.
		c, p := s.Metric("throughput_rps_at_1000"), s.Metric("throughput_rps_at_1000_poisson")
		if !(math.Abs(p-c) <= 0.1*c) {
			t.Errorf("seed %d: throughput at 1000 req/s: constant %v, Poisson %v", seed, c, p)
		}
	})
}

func TestVoigtStep(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "voigt-step", seed)
		// The policer stays inactive at 300 req/s, falls fast after the
		// step and discards nothing once the load is back at 300 req/s.
		within(t, s, "policer_rate_at_step", 1000, 1000)
		// The issue asks for < 500/s within 5 periods; the paper's PD law
		// cannot do that unless the server stops serving altogether (see
		// TestVoigtQueueStepBound). The run falls by > 400/s in 5 periods
		// and below 500/s within 8.
		within(t, s, "policer_rate_after_5_periods", 0, 600)
		within(t, s, "periods_to_half_rate", 1, 8)
		within(t, s, "periods_to_halfway_to_capacity", 1, 8)
		within(t, s, "policer_rate_min", 300, 450)
		within(t, s, "policer_drop_fraction_after", 0, 0)
		within(t, s, "mean_rt_ms_after", 0, 10)
		// The admitted requests' RT: bounded by the client timeout during
		// the transient, back to normal before the step ends; without the
		// controls it never is, and far fewer requests are served.
		within(t, s, "mean_rt_ms_step", 0, 1200)
		within(t, s, "mean_rt_ms_step_last_quarter", 0, 500)
		within(t, s, "rt_settle_s", 0, 19)
		if v := s.Metric("rt_settle_s_uncontrolled"); !math.IsNaN(v) {
			t.Errorf("seed %d: uncontrolled RT settled %v s after the step", seed, v)
		}
		if c, u := s.Metric("throughput_rps_step"), s.Metric("throughput_rps_step_uncontrolled"); !(c > 2*u) {
			t.Errorf("seed %d: throughput during the step %v req/s controlled, %v uncontrolled", seed, c, u)
		}
		// The CPU rule moves by at most Kp·10 = 2 req/s per period.
		drop := s.Metric("cgi_rate_at_step") - s.Metric("cgi_rate_at_step_end")
		if !(drop > 10 && drop <= 40) {
			t.Errorf("seed %d: CGI rate fell by %v req/s in 20 periods, want within (10, 40]", seed, drop)
		}
		within(t, s, "cgi_rate_at_step", 60, 100)
	})
}

// TestVoigtQueueStepBound pins why the step's "below 500/s within 5
// periods" is out of reach here: the real connection-policer controller,
// fed the fastest listen queue the step can produce (850 req/s arriving,
// the policer admitting at most its rate plus its bucket, a 1024-entry
// queue that fills at once, the server serving mu req/s), is below 500/s
// after 5 periods only if the server serves fewer than about 410 req/s
// under the high load. The model's server, calibrated on the paper's
// Table 1 and on its 70–80 % CPU at 300 req/s, serves 500–560 req/s then.
func TestVoigtQueueStepBound(t *testing.T) {
	after5 := func(mu float64) float64 {
		ctrl, err := control.NewVoigtQueue(control.DefaultVoigtQueueConfig())
		if err != nil {
			t.Fatal(err)
		}
		rate, q := ctrl.Current().New, 0.0
		now := time.Unix(0, 0)
		for k := 1; k <= 5; k++ {
			q = math.Min(1024, math.Max(0, q+math.Min(850, rate+20)-mu))
			now = now.Add(time.Second)
			rate = ctrl.Update(now, sluice.Measurements{Elapsed: time.Second, Queue: q, Utilization: 1}).New
		}
		return rate
	}
	for _, tc := range []struct {
		mu       float64
		below500 bool
	}{{0, true}, {300, true}, {400, true}, {450, false}, {520, false}} {
		if got := after5(tc.mu); (got < 500) != tc.below500 {
			t.Errorf("server at %v req/s: rate after 5 periods %v, want below 500: %v", tc.mu, got, tc.below500)
		}
	}
}

func TestVoigtBandwidth(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "voigt-bandwidth", seed)
		unloaded := s.Metric("small_rt_ms_unloaded")
		within(t, s, "small_rt_ms_unloaded", 1, 20)
		for _, lr := range []string{"80", "120"} {
			// The link is saturated without controls and small files wait
			// for seconds; with the bandwidth rule they stay within 10×
			// their unloaded RT and the total throughput is higher.
			within(t, s, "link_utilization_at_"+lr+"_uncontrolled", 0.99, 1)
			within(t, s, "small_rt_ratio_at_"+lr, 0, 10)
			within(t, s, "small_rt_ms_at_"+lr+"_uncontrolled", 100*unloaded, math.Inf(1))
			if c, u := s.Metric("total_throughput_rps_at_"+lr), s.Metric("total_throughput_rps_at_"+lr+"_uncontrolled"); !(c >= u) {
				t.Errorf("seed %d, %s req/s: total throughput %v with controls < %v without", seed, lr, c, u)
			}
			// The rule keeps the link busy: most of the large files it can
			// carry still go through.
			within(t, s, "link_utilization_at_"+lr, 0.9, 1)
		}
		within(t, s, "small_rt_ratio", 0, 10)
		within(t, s, "total_throughput_gain", 1, math.Inf(1))
	})
}

// TestVoigtBandwidthRuleOff shows the bandwidth rule is what protects the
// small files: without a link bottleneck (50 req/s of large files, 74 %
// of the link) the rule drops nothing and both variants agree.
func TestVoigtBandwidthRuleOff(t *testing.T) {
	s := run(t, "voigt-bandwidth", 1, "large_rates=50")
	if c, u := s.Metric("total_throughput_rps"), s.Metric("total_throughput_rps_uncontrolled"); math.Abs(c-u) > 0.01*u {
		t.Errorf("at 50 req/s: total %v with controls, %v without", c, u)
	}
	within(t, s, "small_rt_ratio", 0, 2)
}

func TestVoigtParamErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{"voigt-sweep", []string{"warmup=60s"}},
		{"voigt-step", []string{"step_end=40s"}},
		// The recovery is measured from 10 s after the step's end: a run
		// that ends before that panicked (slice bounds) instead.
		{"voigt-step", []string{"step_at=10s", "step_end=25s"}},
		{"voigt-bandwidth", []string{"warmup=1h"}},
		{"voigt-sweep", []string{"size_tail_min_kb=5000"}},
	} {
		_, err := runErr(t, tc.name, 1, append(tc.set, "duration=30s")...)
		var pe *ParamError
		if err == nil || !errors.As(err, &pe) {
			t.Errorf("%s with %s: error %v, want a *ParamError", tc.name, tc.set, err)
		}
	}
}

// TestVoigtDeterminism checks that a run's folder is byte-identical for
// the same seed.
func TestVoigtDeterminism(t *testing.T) {
	for _, name := range []string{"voigt-step", "lijamin-epochs"} {
		a, b := writeRun(t, name, 1), writeRun(t, name, 1)
		files, err := os.ReadDir(a)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) < 3 {
			t.Errorf("%s wrote %d files", name, len(files))
		}
		for _, f := range files {
			x, _ := os.ReadFile(filepath.Join(a, f.Name()))
			y, err := os.ReadFile(filepath.Join(b, f.Name()))
			if err != nil || !bytes.Equal(x, y) {
				t.Errorf("%s: %s differs between two runs with seed 1 (%v)", name, f.Name(), err)
			}
		}
	}
}

// TestVoigtWindowBeforeTheRun: a window that starts before the run (the
// "before the step" window with step_at under 10 s) counts from the
// start instead of panicking.
func TestVoigtWindowBeforeTheRun(t *testing.T) {
	run := &voigtRun{bins: [][]voigtBin{{{offered: 2, good: 1}, {offered: 3, good: 3}}}}
	if w := run.window(0, -10*time.Second, time.Second); w.offered != 2 || w.good != 1 {
		t.Errorf("window from -10 s to 1 s: %+v", w)
	}
}

// TestLiJaminEpochs asserts the figures for seeds 1–5 with the
// default parameters: the shares of epochs 17–18 within the paper's own
// error and the goal, every client within half a point of its allocation,
// and the total close to B while two or more clients are active.
func TestLiJaminEpochs(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "lijamin-epochs", seed)
		within(t, s, "allocation_error", 0, 0.005)
		within(t, s, "total_bw_ratio", 0.9, 1.05)
		within(t, s, "total_bw_ratio_17_18", 0.95, 1.05)
		for i, want := range []float64{10, 20, 30, 40} {
			within(t, s, fmt.Sprintf("share_%s_percent", figure.LiJaminClients[i]), want-0.5, want+0.5)
		}
		// Idle bandwidth goes to the active clients: no epoch with two or
		// more active clients falls far below B, none exceeds it by much.
		within(t, s, "total_bw_ratio_epoch_min", 0.65, 1)
		within(t, s, "total_bw_ratio_epoch_max", 0.95, 1.05)
	})
}

// TestLiJaminModelChoices pins the findings behind the defaults, each
// documented on its parameter: Â₀ = B overshoots on a link faster than B
// (the paper's Table IV shape), a link at B does not redistribute idle
// bandwidth, and sluice's parallel delays do not enforce the shares
// against httperf's open-loop clients.
func TestLiJaminModelChoices(t *testing.T) {
	cases := []struct {
		set                []string
		errLo, errHi       float64
		totalLo, totalHi   float64
		shareDLo, shareDHi float64
	}{
		{[]string{"initial_max_factor=1"}, 0.019, 0.04, 0.9, 1.05, 41, 43},
		{[]string{"initial_max_factor=4"}, 0.005, 0.012, 0.9, 1.05, 40, 41},
		{[]string{"link_rate=100000"}, 0.02, 0.1, 0.3, 0.8, 30, 40},
		{[]string{"standby=parallel"}, 0.2, 0.3, 1.5, 2, 24, 26},
		{[]string{"arrivals=poisson"}, 0, 0.005, 0.9, 1.05, 39.5, 40.5},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.set), func(t *testing.T) {
			t.Parallel()
			s := run(t, "lijamin-epochs", 1, tc.set...)
			within(t, s, "allocation_error", tc.errLo, tc.errHi)
			within(t, s, "total_bw_ratio", tc.totalLo, tc.totalHi)
			within(t, s, "share_d_percent", tc.shareDLo, tc.shareDHi)
		})
	}
}

func TestLiJaminParamErrors(t *testing.T) {
	for _, set := range []string{"shares=10,20,30", "shares=50,30,20,10", "epoch=1s"} {
		if _, err := runErr(t, "lijamin-epochs", 1, set); err == nil {
			t.Errorf("%s: run succeeded, want a parameter error", set)
		}
	}
}

// Two work-conserving rows behind the same overloaded backend serve the
// same sequence of service times (the draw is made at the backend, as
// the live testbed's queue makes it), so their goodput in a phase of 3×
// overload differs by their control only. With the draw made at the
// client, each row served a different subset of a lognormal σ 1.5
// service's draws: on seed 3 auto's goodput after the halving was 0.885×
// static-concurrency's with the limit of both fixed at the 4 workers.
func TestAdaptiveRowsServeTheSameDraws(t *testing.T) {
	for _, seed := range []uint64{1, 3} {
		s := run(t, "adaptive", seed, "service=lognormal", "rows=static-concurrency,auto", "phases=b")
		a, c := s.Metric("goodput_rps_auto_b"), s.Metric("goodput_rps_static_concurrency_b")
		if r := a / c; !(math.Abs(r-1) <= 0.02) {
			t.Errorf("seed %d: auto's goodput %v is %.3f× static-concurrency's %v, want within 2 %%", seed, a, r, c)
		}
	}
}

// Phase e runs two backends of half the workers each behind the
// least-in-flight pool, the second becoming 3× slower: HAProxy's 4 slots
// (2 per backend) serve what the two deliver together, 2/10 ms + 2/30
// ms = 267 req/s in exponential service, not the 400 of one backend, and
// not the 133 of the slow one alone.
func TestAdaptivePhaseESlowBackend(t *testing.T) {
	s := run(t, "adaptive", 1, "rows=static-concurrency", "phases=e")
	if g := s.Metric("goodput_rps_static_concurrency_e"); !(g >= 0.9*800.0/3 && g <= 1.05*800.0/3) {
		t.Errorf("static-concurrency's goodput in phase e = %v req/s, want about 267", g)
	}
}

// BenchmarkKihlDistribution runs the 1000 s kihl-distribution scenario
// (three variants: the good setting, Ti = 0.1 s and M/D/1) without
// writing files.
func BenchmarkKihlDistribution(b *testing.B) {
	for b.Loop() {
		runResult(b, "kihl-distribution", 1)
	}
}

// BenchmarkKihlDistributionWrite is the whole `sluice-lab sim
// kihl-distribution`: the run and its folder (CSV and three PNGs).
func BenchmarkKihlDistributionWrite(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := runResult(b, "kihl-distribution", 1).Write(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// Tenants: with fair queueing each light tenant keeps its whole demand
// (0.95–1.01 × its max-min share of the measured offered rates, which is
// that demand) with p99 within the SLO; the heavy tenant gets at least
// half of what is left (in fact more than all of it: the service's 400
// req/s is a mean, and exponential draws serve 405–410), and FIFO gives
// the light tenants a third of their demand.
func TestTenants(t *testing.T) {
	forSeeds(t, func(t *testing.T, seed uint64) {
		s := run(t, "tenants", seed)
		for _, n := range []string{"a", "b", "c"} {
			share := s.Metric("fair_share_rps_fair_" + n)
			within(t, s, "goodput_rps_fair_"+n, 0.95*share, 1.01*share)
			within(t, s, "p99_ms_fair_"+n, 0, 250)
			within(t, s, "goodput_rps_fifo_"+n, 0, 0.5*share)
		}
		within(t, s, "goodput_rps_fair_heavy", 0.5*s.Metric("fair_share_rps_fair_heavy"), 400)
	})
}

// Costly: with one API 10× costlier, fair queueing by service time keeps
// the light API's whole demand (its max-min share of the leaf's CPU) and
// gives the costly one the rest, wasting no work, where FIFO and fair
// queueing per request leave the light API an eighth and a quarter of
// it. At 50×, cancellation at the deadline is what keeps every answer in
// time and halves the wasted work, and the slot share among tenants at
// the hops (tenants.slot_share) is what keeps the light API's share: the
// costly calls can no longer hold every slot of the entry hop. Bounding
// the leaf's limit near its cores (auto.max_limit, the row
// service_time_share_cores) cuts the wasted work at 50× to a fraction of
// the slot share's alone; with exponential CPU times it is not within
// 2 % on every seed yet (lab/NOTEBOOK.md). One seed, a 10 s interval and
// only the rows checked keep the test short.
func TestCostly(t *testing.T) {
	s := run(t, "costly", 1, "factors=10", "warm=5s", "length=10s", "rows=fifo,requests,service_time,service_time_hog")
	for _, row := range []string{"service_time", "service_time_hog"} {
		k := row + "_x10"
		within(t, s, "goodput_cpu_"+k+"_light", 0.95*s.Metric("fair_share_cpu_"+k+"_light"), 1.01*s.Metric("fair_share_cpu_"+k+"_light"))
		within(t, s, "goodput_cpu_"+k+"_costly", 0.8*s.Metric("fair_share_cpu_"+k+"_costly"), 4)
		within(t, s, "wasted_fraction_"+k, 0, 0.02)
		within(t, s, "late_"+k, 0, 0)
	}
	for _, row := range []string{"fifo", "requests"} {
		k := row + "_x10"
		within(t, s, "goodput_cpu_"+k+"_light", 0, 0.3*s.Metric("fair_share_cpu_"+k+"_light"))
	}
	s = run(t, "costly", 1, "factors=50", "warm=5s", "length=10s", "rows=service_time,service_time_nocancel,service_time_share,service_time_share_cores")
	within(t, s, "late_service_time_x50", 0, 0)
	within(t, s, "late_service_time_nocancel_x50", 1, 1e9)
	within(t, s, "wasted_fraction_service_time_x50", 0, 0.6*s.Metric("wasted_fraction_service_time_nocancel_x50"))
	k := "service_time_share_x50"
	within(t, s, "goodput_cpu_"+k+"_light", 0.95*s.Metric("fair_share_cpu_"+k+"_light"), 1.01*s.Metric("fair_share_cpu_"+k+"_light"))
	within(t, s, "goodput_cpu_"+k+"_costly", 0.5*s.Metric("fair_share_cpu_"+k+"_costly"), 4)
	within(t, s, "late_"+k, 0, 0)
	// The leaf's limit bounded near its cores: a processor-sharing CPU no
	// longer stretches the costly calls past their deadline, and the
	// wasted work falls to a fraction of the slot share's alone.
	c := "service_time_share_cores_x50"
	within(t, s, "wasted_fraction_"+c, 0, 0.4*s.Metric("wasted_fraction_"+k))
	within(t, s, "goodput_cpu_"+c+"_costly", 0.8*s.Metric("fair_share_cpu_"+c+"_costly"), 4)
	within(t, s, "late_"+c, 0, 0)
}
