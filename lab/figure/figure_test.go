// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/report"
)

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All() {
		if seen[s.Name] {
			t.Errorf("figure %s listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.Paper == "" || (!s.Has(Sim) && !s.Has(Live)) {
			t.Errorf("%s: no paper or no driver: %+v", s.Name, s)
		}
		for _, m := range []Mode{Sim, Live} {
			if d := s.Description(m); strings.Contains(d, "\n") || (d == "") == s.Has(m) {
				t.Errorf("%s: %s description %q", s.Name, m, d)
			}
		}
	}
	if _, err := Lookup("peers", Sim); err == nil || !strings.Contains(err.Error(), `unknown scenario "peers"`) {
		t.Errorf("peers has no simulated driver: Lookup = %v", err)
	}
	if s, err := Lookup("kihl-step", Live); err != nil || !strings.Contains(s.Paper, "Fig. 9") {
		t.Errorf("Lookup(kihl-step) = %+v, %v", s, err)
	}
	if got := Names(Sim); len(got) == 0 || slices.Contains(got, "peers") {
		t.Errorf("Names(Sim) = %v", got)
	}
}

func TestChecks(t *testing.T) {
	s := report.NewSummary("x", string(Live), 1)
	s.Set("a", 1)
	s.Set("b", 2)
	s.Set("nan", math.NaN())
	cases := []struct {
		name string
		c    Check
		pass bool
	}{
		{"atMost pass", AtMost(s, "", "a", 1), true},
		{"atMost fail", AtMost(s, "", "b", 1), false},
		{"atLeast pass", AtLeast(s, "", "b", 2), true},
		{"atLeast fail", AtLeast(s, "", "a", 2), false},
		{"within pass", Within(s, "", "a", 0.5, 1.5), true},
		{"within fail", Within(s, "", "b", 0.5, 1.5), false},
		{"below pass", Below(s, "", "a", "b", 1), true},
		{"below fail", Below(s, "", "b", "a", 1), false},
		{"below factor", Below(s, "", "b", "a", 3), true},
		{"NaN fails atMost", AtMost(s, "", "nan", 1), false},
		{"NaN fails atLeast", AtLeast(s, "", "nan", 1), false},
		{"missing fails", Within(s, "", "missing", 0, 1), false},
		{"NaN fails below", Below(s, "", "nan", "b", 1), false},
	}
	for _, c := range cases {
		if c.c.Pass != c.pass {
			t.Errorf("%s: pass = %v, want %v (%s)", c.name, c.c.Pass, c.pass, c.c.Measured)
		}
	}
	if m := AtMost(s, "", "nan", 1).Measured; !strings.Contains(m, "nan = n/a") {
		t.Errorf("NaN measured as %q", m)
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.5: "0.5", 0.123456: "0.123", 0.00123: "0.00123", 12.34: "12.3",
		10: "10", 100: "100", 1234.5: "1234", -2.5: "-2.5", math.NaN(): "n/a"} {
		if got := Num(v); got != want {
			t.Errorf("Num(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{0.5: "0_5x", 1: "1x", 3: "3x", 1.5: "1_5x", 10: "10x"} {
		if got := LoadTag(v); got != want {
			t.Errorf("LoadTag(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestParamKinds(t *testing.T) {
	ps := NewParams("test")
	var fl []float64
	var sch dist.Schedule
	var d dist.Dist
	var dur time.Duration
	ps.Floats(&fl, "loads", []float64{1, 2}, 0, 10, "loads")
	ps.Schedule(&sch, "users", "0s:3,10s:1000", "users")
	ps.DurationDist(&d, "wait", "det:5s", "wait")
	ps.Duration(&dur, "d", time.Second, 0, time.Minute, "d")
	if ps.Err() != nil {
		t.Fatal(ps.Err())
	}
	for _, tc := range []struct{ set, err string }{
		{"loads=0.5, 3", ""}, {"loads=1,x", "element 2"}, {"loads=11", "element 1 (11) must be within"},
		{"users=0s:1,5s:2", ""}, {"users=5s:1,1s:2", "parameter users="},
		{"wait=exp:5s", ""}, {"wait=weibull:1", "parameter wait="},
		{"d=1m", ""}, {"d=1e300", "parameter d="},
	} {
		err := ps.SetAll([]string{tc.set})
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("SetAll(%q) = %v, want error containing %q", tc.set, err, tc.err)
		}
	}
	if !slices.Equal(fl, []float64{0.5, 3}) || sch.At(6*time.Second) != 2 || d.Mean() != 5 || dur != time.Minute {
		t.Errorf("values not bound: %v %v %v %v", fl, sch.At(6*time.Second), d.Mean(), dur)
	}
	// Declaration mistakes surface as errors, not panics.
	ps.Duration(&dur, "d", time.Second, 0, time.Minute, "again")
	if ps.Err() == nil || !strings.Contains(ps.Err().Error(), `"d" declared twice`) {
		t.Errorf("duplicate declaration: Err() = %v", ps.Err())
	}
	bad := NewParams("test")
	bad.Schedule(&sch, "Users", "x", "doc")
	if bad.Err() == nil {
		t.Error("bad default and bad name were accepted")
	}
}

func TestKihlIdealWithin(t *testing.T) {
	// The paper's M/M/1: σ_ρ = √(0.8 · 22.5 ms / 1 s) = 0.134, share
	// erf(0.1 / (0.134·√2)) = 0.544.
	if got := KihlIdealWithin(0.8, 0.1, 1, 22500*time.Microsecond, time.Second); math.Abs(got-0.544) > 0.002 {
		t.Errorf("M/M/1 share = %v, want 0.544", got)
	}
	if got := KihlIdealWithin(0.8, 0.1, 0, 22500*time.Microsecond, time.Second); got != 1 {
		t.Errorf("M/D/1 share = %v, want 1", got)
	}
	// Longer periods average more requests: the share rises.
	if a, b := KihlIdealWithin(0.8, 0.1, 1, 22500*time.Microsecond, time.Second),
		KihlIdealWithin(0.8, 0.1, 1, 22500*time.Microsecond, 4*time.Second); b <= a {
		t.Errorf("h = 4 s share %v not above h = 1 s share %v", b, a)
	}
	if got := KihlWithinBound(1); got != 0.8 {
		t.Errorf("bound for an ideal share of 1 = %v, want the paper's 0.8", got)
	}
	if got := KihlWithinBound(0.544); math.Abs(got-0.4896) > 1e-9 {
		t.Errorf("bound for M/M/1 = %v, want 0.9 × 0.544", got)
	}
}

// TestSEDADegradationChecks: over the whole spike the answers within the
// target are compared, not the p90, which the onset sets in both variants
// (the paper's model at the live run's 240 paper-seconds and capacity at
// q_min, seed 1: these numbers); the p90 after the onset is held to
// 1.5 × target, and compared with degradation alone's by how far each
// misses the target.
func TestSEDADegradationChecks(t *testing.T) {
	s := report.NewSummary("seda-degradation", string(Sim), 1)
	for k, v := range map[string]float64{"target_ms": 5000, "p90_ms": 13761, "p90_ms_degrade_only": 14441, "p90_ms_none": 101585,
		"goodput_within_target_rps": 38.5, "goodput_within_target_rps_degrade_only": 0.21,
		"quality_mean_degrade_only": 0.139, "p90_ms_after_60s": 6574, "p90_ms_after_60s_degrade_only": 14362} {
		s.Set(k, v)
	}
	failed := func() (out []string) {
		for _, c := range SEDADegradationChecks(s, time.Minute) {
			if !c.Pass {
				out = append(out, c.Measured)
			}
		}
		return out
	}
	if f := failed(); len(f) != 0 {
		t.Errorf("the paper's model at the live run's spike and stage: failed checks %q", f)
	}
	s.Set("p90_ms", 15000) // the onset's p90, above degradation alone's: not a check
	if f := failed(); len(f) != 0 {
		t.Errorf("whole-spike p90 above degradation alone's: failed checks %q", f)
	}
	s.Set("goodput_within_target_rps_degrade_only", 20) // not under half
	if f := failed(); len(f) != 1 || !strings.Contains(f[0], "0.5 × goodput_within_target_rps") {
		t.Errorf("degradation alone answers half as many within the target: failed checks %q", f)
	}
	s.Set("goodput_within_target_rps_degrade_only", 0.21)
	s.Set("p90_ms_after_60s", 7600) // over 1.5 × target after the onset
	if f := failed(); len(f) != 1 || !strings.Contains(f[0], "p90_ms_after_60s = 7600 (must be ≤ 7500)") {
		t.Errorf("after the onset over 1.5 × target: failed checks %q", f)
	}

	// After the onset, each p90 compared by how far it misses the target
	// (5000 ms).
	for _, c := range []struct {
		name         string
		after, alone float64 // p90_ms_after_60s and its degrade_only
		fails        int
		contains     string
	}{
		// The simulator's default stage, seed 1 (2026-11-27): degradation
		// alone at 2.1 × target. The p90s' ratio is 0.54, over half, but
		// the admission variant misses the target by 700 ms against 5470.
		{"the simulator's default stage after the onset", 5700, 10470, 0, ""},
		// Within 1.5 × target but missing it by more than half as much as
		// degradation alone (2400 against 4000 ms): not much more effective.
		{"admission missing the target by 0.6 of degradation alone's miss", 7400, 9000, 1,
			"max(0, p90_ms_after_60s − 5000) < 0.5 × max(0, p90_ms_after_60s_degrade_only − 5000)"},
		// Under the target with admission: it misses by nothing, and
		// passes whenever degradation alone misses at all; when neither
		// misses, the claim does not hold.
		{"admission under the target, degradation alone over it", 4000, 5100, 0, ""},
		{"both under the target (want the comparison's)", 4000, 4900, 1, ""},
	} {
		s.Set("p90_ms_after_60s", c.after)
		s.Set("p90_ms_after_60s_degrade_only", c.alone)
		if f := failed(); len(f) != c.fails || c.contains != "" && !strings.Contains(f[0], c.contains) {
			t.Errorf("%s: failed checks %q", c.name, f)
		}
	}
}

// TestVoigtSweepPoissonCheck: Fig. 6's comparison keeps its ±10 % bound
// (the run of 2026-11-27 11:35, single runs of each arrival process,
// 561.1 against 631.7 req/s, still fails it) and names the live runs'
// spread when the driver measured it.
func TestVoigtSweepPoissonCheck(t *testing.T) {
	poisson := func(s *report.Summary) *Check {
		for _, c := range VoigtSweepChecks(s, "1000") {
			if strings.Contains(c.Claim, "Poisson") {
				return &c
			}
		}
		return nil
	}
	s := report.NewSummary("voigt-sweep", string(Live), 1)
	if poisson(s) != nil {
		t.Fatal("a Poisson check without a Poisson point")
	}
	s.Set("throughput_rps_at_1000", 561.1)
	s.Set("throughput_rps_at_1000_poisson", 631.7)
	if c := poisson(s); c == nil || c.Pass {
		t.Errorf("12.6 %% apart: %+v", c)
	}
	s.Set("throughput_rps_at_1000_poisson", 617)
	s.Set("throughput_rps_at_1000_run_spread", 0.11)
	if c := poisson(s); c == nil || !c.Pass || !strings.Contains(c.Measured, "differ by 0.11") {
		t.Errorf("10 %% apart, runs 11 %% apart: %+v", c)
	}
}
