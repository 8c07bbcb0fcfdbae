// SPDX-License-Identifier: Apache-2.0

package control

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// paperSEDA is Welsh & Culler's law written out from the paper's text
// (§3.2, §3.3; docs/algorithms.md §5), apart from the controller, to hold
// SEDA with every refinement off to it step by step: smoothing, the AIMD
// law, lower classes cut first, lc counted and never reset, and a flag
// that lasts the flagged class's next run, whatever that run does.
type paperSEDA struct {
	cfg   SEDAConfig
	rate  []float64
	cur   []float64
	have  []bool
	flag  []bool
	lc    []int
	lower int // the lowest class
}

func newPaperSEDA(cfg SEDAConfig) *paperSEDA {
	n := cfg.classCount()
	p := &paperSEDA{cfg: cfg, rate: make([]float64, n), cur: make([]float64, n), have: make([]bool, n),
		flag: make([]bool, n), lc: make([]int, n), lower: n - 1}
	for i := range p.rate {
		p.rate[i] = cfg.InitialRate
	}
	return p
}

// run is one run of class c with p90 sample samp (seconds).
func (p *paperSEDA) run(c int, samp float64) {
	cfg := p.cfg
	bound := func(r float64) float64 { return math.Min(math.Max(r, cfg.RateMin), cfg.RateMax) }
	if p.have[c] {
		p.cur[c] = cfg.Alpha*p.cur[c] + (1-cfg.Alpha)*samp
	} else {
		p.cur[c], p.have[c] = samp, true
	}
	t := cfg.targetOf(c)
	err := (p.cur[c] - t) / t
	flagged := p.flag[c]
	p.flag[c] = false // this is the flagged class's next iteration
	if err > cfg.ErrD {
		allMin := true
		for l := c + 1; l <= p.lower; l++ {
			p.flag[l] = true
			allMin = allMin && p.rate[l] <= cfg.RateMin
		}
		switch {
		case c == p.lower:
			p.rate[c] = bound(p.rate[c] / cfg.AdjD)
		case !allMin:
			for l := c + 1; l <= p.lower; l++ {
				p.rate[l] = bound(p.rate[l] / cfg.AdjLoD)
			}
		default:
			p.lc[c]++
			if p.lc[c] >= cfg.LCThresh {
				p.rate[c] = bound(p.rate[c] / cfg.AdjD)
			}
		}
		return
	}
	if err < cfg.ErrI && !flagged {
		p.rate[c] = bound(p.rate[c] + (-(err - cfg.CI) * cfg.AdjI))
	}
}

// With every refinement off (PaperSEDAConfig), SEDA is the paper's law:
// random runs of one to three classes, with measurements that would
// trigger every refinement (admitted rates far below the rate, falling
// p90s soon after a cut, drained backlogs), give the same rates as
// paperSEDA at every step, bit for bit.
func TestSEDAOffIsThePaper(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5eda))
		cfg := PaperSEDAConfig()
		cfg.Target = time.Second
		cfg.Classes = 1 + r.IntN(3)
		cfg.LCThresh = 1 + r.IntN(4)
		cfg.InitialRate = []float64{5000, 100, 1, 0.06}[r.IntN(4)]
		if r.IntN(3) == 0 {
			cfg.Alpha = 0
		}
		s := build(t, cfg, nil, NewSEDA)
		p := newPaperSEDA(cfg)
		now := at(1)
		for i := range 300 {
			el := time.Duration(1+r.IntN(2000)) * time.Millisecond
			now = now.Add(el)
			m := sluice.Measurements{Class: r.IntN(cfg.Classes), Elapsed: el, Samples: float64(1 + r.IntN(150)),
				P90RT: 3 * r.Float64(), Admitted: float64(r.IntN(300)), Completed: 10}
			if r.IntN(4) == 0 {
				m.P90RT = 0.3 * r.Float64() // well under target: increases
			}
			d := s.Update(now, m)
			p.run(m.Class, m.P90RT)
			rates := s.Rates()
			for c := range rates {
				if rates[c] != p.rate[c] {
					t.Fatalf("seed %d step %d class %d: rate %v, the paper's %v (%s)", seed, i, c, rates[c], p.rate[c], d.Reason)
				}
			}
		}
	}
}

// PaperSEDAConfig is DefaultSEDAConfig with every refinement off.
func TestPaperSEDAConfig(t *testing.T) {
	p, d := PaperSEDAConfig(), DefaultSEDAConfig()
	if p.TrackDemand || p.DecreaseHoldoff || p.RecoverToServed || p.RecoverFactor != 0 || p.DrainedReset ||
		p.LCReset || p.KeepFlagOverTarget {
		t.Fatalf("PaperSEDAConfig has a refinement on: %+v", p)
	}
	if !d.TrackDemand || !d.DecreaseHoldoff || !d.RecoverToServed || d.RecoverFactor != 0 || d.DrainedReset ||
		!d.LCReset || !d.KeepFlagOverTarget {
		t.Fatalf("DefaultSEDAConfig's refinements changed: %+v", d)
	}
	d.TrackDemand, d.DecreaseHoldoff, d.RecoverToServed, d.LCReset, d.KeepFlagOverTarget = false, false, false, false, false
	if d.Target, p.Target = time.Second, time.Second; d.Validate() != nil || p.Validate() != nil {
		t.Fatal("invalid")
	}
	if _, err := NewSEDA(p); err != nil {
		t.Fatal(err)
	}
}

// lc_reset (default): lc counts the over-target runs of one overload; off,
// the paper's counter keeps counting across overloads. Two classes, lc_thresh
// 3, α 0 (cur = samp), initial 0.5 req/s, target 1 s:
// 1: high over (p90 2 s) → low 0.5/10 = 0.05 = rate_min;
// 2, 3: high over, low at rate_min → lc 1, 2: high kept at 0.5;
// 4: high within band (p90 0.8 s, err −0.2) → lc reset (on) or kept at 2 (off);
// 5: high over → on: lc 1, kept; off: lc 3 ≥ 3 → 0.5/1.2 = 0.416666667.
func TestSEDALCReset(t *testing.T) {
	for _, on := range []bool{true, false} {
		cfg := sedaCfg(time.Second, 0.5)
		cfg.Classes, cfg.LCThresh, cfg.Alpha, cfg.LCReset = 2, 3, 0, on
		s := build(t, cfg, nil, NewSEDA)
		p := newPaperSEDA(cfg)
		want5 := 0.5
		if !on {
			want5 = 0.5 / 1.2
		}
		for i, x := range []struct{ p90, high, low float64 }{{2, 0.5, 0.05}, {2, 0.5, 0.05}, {2, 0.5, 0.05}, {0.8, 0.5, 0.05}, {2, want5, 0.05}} {
			d := s.Update(at(i+1), p90(0, x.p90))
			p.run(0, x.p90)
			near(t, d.Reason, d.ClassRates[0], x.high)
			near(t, d.Reason, d.ClassRates[1], x.low)
			if !on && (d.ClassRates[0] != p.rate[0] || d.ClassRates[1] != p.rate[1]) {
				t.Fatalf("lc_reset off, run %d: %v, the paper's %v", i+1, d.ClassRates, p.rate)
			}
		}
	}
}

// keep_flag_over_target (default): a flag from a higher class's overload
// holds back the flagged class's next run that could increase; off, the
// paper's flag lasts its very next run. Two classes, α 0, initial 100,
// target 1 s:
// 1: high over (p90 2 s) → low 100/10 = 10, flagged;
// 2: low over (p90 2 s) → its own cut, 10/1.2 = 8.333333333 (on: still flagged);
// 3: low far under (p90 0.1 s, err −0.9) → on: no increase; off:
// +(0.9 − 0.1)·2 = +1.6 → 9.933333333.
func TestSEDAKeepFlagOverTarget(t *testing.T) {
	for _, on := range []bool{true, false} {
		cfg := sedaCfg(time.Second, 100)
		cfg.Classes, cfg.Alpha, cfg.KeepFlagOverTarget = 2, 0, on
		s := build(t, cfg, nil, NewSEDA)
		p := newPaperSEDA(cfg)
		want3 := 10 / 1.2
		if !on {
			want3 += 1.6
		}
		for i, x := range []struct {
			class     int
			p90, want float64
		}{{0, 2, 100}, {1, 2, 10 / 1.2}, {1, 0.1, want3}} {
			d := s.Update(at(i+1), p90(x.class, x.p90))
			p.run(x.class, x.p90)
			near(t, d.Reason, d.New, x.want)
			if !on && d.New != p.rate[x.class] {
				t.Fatalf("keep_flag_over_target off, run %d: %v, the paper's %v", i+1, d.New, p.rate[x.class])
			}
		}
	}
}
