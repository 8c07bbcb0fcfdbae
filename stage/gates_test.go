// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

// t0 is where the tests' clocks start.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestGatesRateFollowsDecisions(t *testing.T) {
	cfg := control.DefaultSEDAConfig()
	cfg.Target, cfg.InitialRate = time.Second, 10
	c, _ := control.NewSEDA(cfg)
	g, err := NewGates(c.Current(), 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Burst 1 at 10/s: one admission, then none until 100 ms later.
	if !g.AdmitAt(t0, 0) || g.AdmitAt(t0, 0) || !g.AdmitAt(t0.Add(100*time.Millisecond), 0) {
		t.Fatal("bucket at 10/s")
	}
	// p90 over target: 10/1.2 = 8.333/s; next token after 120 ms.
	d := c.Update(t0.Add(time.Second), sluice.Measurements{Samples: 100, P90RT: 2})
	if err := g.Apply(t0.Add(time.Second), d); err != nil {
		t.Fatal(err)
	}
	if got := g.Rates()[0]; got != d.New {
		t.Fatalf("rate %v, want %v", got, d.New)
	}
	now := t0.Add(2 * time.Second)
	g.AdmitAt(now, 0)
	if g.AdmitAt(now.Add(110*time.Millisecond), 0) || !g.AdmitAt(now.Add(121*time.Millisecond), 0) {
		t.Fatal("new rate not in force")
	}
}

func TestGatesClassesDropNoneQuality(t *testing.T) {
	cfg := control.DefaultSEDAConfig()
	cfg.Target, cfg.Classes, cfg.InitialRate = time.Second, 2, 100
	c, _ := control.NewSEDA(cfg)
	if _, err := NewGates(c.Current(), 3, 5, nil); err == nil {
		t.Fatal("class count mismatch accepted")
	}
	g, err := NewGates(c.Current(), 2, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := c.Update(t0, sluice.Measurements{Class: 0, Samples: 100, P90RT: 2})
	_ = g.Apply(t0, d)
	if r := g.Rates(); r[0] != 100 || r[1] != 10 {
		t.Fatalf("class rates %v", r)
	}

	ycfg := control.DefaultYakshaConfig()
	ycfg.Tref, ycfg.Lambda0, ycfg.SelfTuning = 150*time.Millisecond, 50, false
	y, _ := control.NewYaksha(ycfg)
	g, _ = NewGates(y.Current(), 1, 5, rand.New(rand.NewPCG(1, 1)))
	_ = g.Apply(t0, sluice.Decision{Kind: sluice.KindDropProbability, New: 1})
	if g.AdmitAt(t0, 0) {
		t.Fatal("drop probability 1 admitted")
	}
	if err := g.Apply(t0, sluice.Decision{Kind: sluice.KindRate, New: 1}); err == nil {
		t.Fatal("kind mismatch accepted")
	}

	none, _ := (&control.NoneConfig{Period: time.Second}).New()
	g, _ = NewGates(none.Current(), 1, 5, nil)
	for i := 0; i < 1000; i++ {
		if !g.AdmitAt(t0, 0) {
			t.Fatal("none rejected")
		}
	}

	dcfg := control.DefaultSEDAConfig()
	dcfg.Target, dcfg.Degrade.Enabled = time.Second, true
	dc, _ := dcfg.New()
	g, _ = NewGates(dc.Current(), 1, 5, nil)
	if !g.Off() || g.Quality() != 1 || !g.Degrading() {
		t.Fatal("degrader starts with gate off at quality 1")
	}
	d = dc.Update(t0, sluice.Measurements{Samples: 100, P90RT: 2})
	_ = g.Apply(t0, d)
	if q := g.Quality(); q >= 1 || q != d.Quality {
		t.Fatalf("quality %v", q)
	}
}
