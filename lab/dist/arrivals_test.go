// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func mustSchedule(t testing.TB, s string) Schedule {
	t.Helper()
	sch, err := ParseSchedule(s)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// count returns the number of arrivals in each [edges[i], edges[i+1]).
func count(a Arrivals, r *rand.Rand, edges []time.Duration) []int {
	n := make([]int, len(edges)-1)
	end := edges[len(edges)-1]
	for t := a.Next(r, 0); t < end; t = a.Next(r, t) {
		for i := range n {
			if t >= edges[i] && t < edges[i+1] {
				n[i]++
			}
		}
	}
	return n
}

func TestPoissonFollowsRateSteps(t *testing.T) {
	sch := mustSchedule(t, "0s:300,500s:850,700s:0,800s:50")
	edges := []time.Duration{0, 500 * time.Second, 700 * time.Second, 800 * time.Second, 2800 * time.Second}
	rates := []float64{300, 850, 0, 50}
	got := count(Poisson{Rate: sch}, rand.New(rand.NewPCG(1, 2)), edges)
	for i, n := range got {
		dur := (edges[i+1] - edges[i]).Seconds()
		want := rates[i] * dur
		if want == 0 {
			if n != 0 {
				t.Errorf("segment %d (rate 0): %d arrivals", i, n)
			}
			continue
		}
		if math.Abs(float64(n)-want)/want > 0.03 {
			t.Errorf("segment %d: %d arrivals over %vs, want about %v", i, n, dur, want)
		}
	}
}

func TestPoissonGapsAreExponential(t *testing.T) {
	p := Poisson{Rate: mustSchedule(t, "100")}
	r := rand.New(rand.NewPCG(5, 5))
	var prev time.Duration
	var sum, sum2 float64
	const n = 100_000
	for range n {
		next := p.Next(r, prev)
		g := (next - prev).Seconds()
		sum += g
		sum2 += g * g
		prev = next
	}
	mean := sum / n
	cv := math.Sqrt(sum2/n-mean*mean) / mean
	if math.Abs(mean-0.01) > 0.0002 || math.Abs(cv-1) > 0.02 {
		t.Errorf("gap mean %v (want 0.01), coefficient of variation %v (want 1)", mean, cv)
	}
}

func TestConstantSpacing(t *testing.T) {
	c := Constant{Rate: mustSchedule(t, "0s:10,1s:0,2s:100")}
	var got []time.Duration
	for next := c.Next(nil, 0); next < 2030*time.Millisecond; next = c.Next(nil, next) {
		got = append(got, next)
	}
	// 10/s: 0.1 s … 1.0 s (ten arrivals, the tenth exactly at the step);
	// then nothing until 2 s; then every 10 ms.
	want := []time.Duration{}
	for i := 1; i <= 10; i++ {
		want = append(want, time.Duration(i)*100*time.Millisecond)
	}
	want = append(want, 2010*time.Millisecond, 2020*time.Millisecond)
	if len(got) != len(want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("arrival %d at %v, want %v", i, got[i], want[i])
		}
	}
}

func TestConstantStraddlesStep(t *testing.T) {
	// Rate 4/s until 1 s, then 1/s: from 0.9 s, 0.1 s at 4/s uses 0.4 of
	// the gap; the remaining 0.6 at 1/s takes 0.6 s → 1.6 s.
	c := Constant{Rate: mustSchedule(t, "0s:4,1s:1")}
	if got := c.Next(nil, 900*time.Millisecond); got != 1600*time.Millisecond {
		t.Errorf("Next(0.9s) = %v, want 1.6s", got)
	}
}

func TestNeverAfterZeroTail(t *testing.T) {
	sch := mustSchedule(t, "0s:100,1s:0")
	r := rand.New(rand.NewPCG(1, 1))
	for _, a := range []Arrivals{Poisson{Rate: sch}, Constant{Rate: sch}, Poisson{}, Constant{}} {
		n := 0
		next := a.Next(r, 0)
		for ; next != Never && n < 1000; next = a.Next(r, next) {
			if next > time.Second { // Constant's tenth arrival is exactly at 1 s
				t.Fatalf("%T: arrival at %v after the rate fell to 0", a, next)
			}
			n++
		}
		if next != Never {
			t.Errorf("%T: no Never after %d arrivals", a, n)
		}
	}
}

func TestArrivalsDeterministic(t *testing.T) {
	sch := mustSchedule(t, "0s:300,1s:850")
	m1, _ := NewMMPP(MMPPConfig{Rates: [2]float64{10, 500}, Sojourn: [2]time.Duration{time.Second, 100 * time.Millisecond}})
	m2, _ := NewMMPP(MMPPConfig{Rates: [2]float64{10, 500}, Sojourn: [2]time.Duration{time.Second, 100 * time.Millisecond}})
	for _, pair := range [][2]Arrivals{{Poisson{Rate: sch}, Poisson{Rate: sch}}, {m1, m2}} {
		seq := func(a Arrivals, seed uint64) []time.Duration {
			r := rand.New(rand.NewPCG(seed, 1))
			var out []time.Duration
			var t time.Duration
			for range 200 {
				t = a.Next(r, t)
				out = append(out, t)
			}
			return out
		}
		a, b := seq(pair[0], 42), seq(pair[1], 42)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%T: same seed diverges at %d: %v vs %v", pair[0], i, a[i], b[i])
			}
		}
		if m, ok := pair[0].(*MMPP); ok {
			m.Reset()
		}
		if c := seq(pair[0], 43); c[len(c)-1] == a[len(a)-1] {
			t.Errorf("%T: different seeds gave the same sequence", pair[0])
		}
	}
}

func TestMMPP(t *testing.T) {
	cfg := MMPPConfig{Rates: [2]float64{20, 400}, Sojourn: [2]time.Duration{4 * time.Second, time.Second}}
	m, err := NewMMPP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := (20*4 + 400*1) / 5.0
	if m.MeanRate() != want {
		t.Errorf("MeanRate() = %v, want %v", m.MeanRate(), want)
	}
	r := rand.New(rand.NewPCG(11, 12))
	const horizon = 5000 * time.Second
	perSecond := make([]float64, int(horizon/time.Second))
	n := 0
	for tt := m.Next(r, 0); tt < horizon; tt = m.Next(r, tt) {
		perSecond[tt/time.Second]++
		n++
	}
	rate := float64(n) / horizon.Seconds()
	if math.Abs(rate-want)/want > 0.05 {
		t.Errorf("long-run rate %v, want about %v", rate, want)
	}
	// Burstiness: the variance of per-second counts far exceeds the mean
	// (a Poisson process has index of dispersion 1).
	var s, s2 float64
	for _, c := range perSecond {
		s += c
		s2 += c * c
	}
	mean := s / float64(len(perSecond))
	if iod := (s2/float64(len(perSecond)) - mean*mean) / mean; iod < 10 {
		t.Errorf("index of dispersion %v, want ≫ 1 for a bursty MMPP", iod)
	}

	// One zero rate: no arrivals while in that phase, still progresses.
	z, err := NewMMPP(MMPPConfig{Rates: [2]float64{0, 100}, Sojourn: [2]time.Duration{time.Second, time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	for tt := z.Next(r, 0); tt < 1000*time.Second; tt = z.Next(r, tt) {
		n++
	}
	if math.Abs(float64(n)-50000)/50000 > 0.1 {
		t.Errorf("on-off MMPP: %d arrivals in 1000 s, want about 50000", n)
	}
}

func TestMMPPValidate(t *testing.T) {
	cases := []struct {
		cfg  MMPPConfig
		want string
	}{
		{MMPPConfig{Rates: [2]float64{-1, 1}, Sojourn: [2]time.Duration{1, 1}}, "Rates[0] = -1"},
		{MMPPConfig{Rates: [2]float64{1, math.NaN()}, Sojourn: [2]time.Duration{1, 1}}, "Rates[1] = NaN"},
		{MMPPConfig{Rates: [2]float64{0, 0}, Sojourn: [2]time.Duration{1, 1}}, "at least one rate"},
		{MMPPConfig{Rates: [2]float64{1, 1}, Sojourn: [2]time.Duration{1, 0}}, "Sojourn[1] = 0s"},
	}
	for _, tc := range cases {
		if _, err := NewMMPP(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewMMPP(%+v) error %v, want it to contain %q", tc.cfg, err, tc.want)
		}
	}
}
