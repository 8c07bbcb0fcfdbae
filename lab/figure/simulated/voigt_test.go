// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

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
