// SPDX-License-Identifier: Apache-2.0

package control

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestSetTarget(t *testing.T) {
	s, _ := NewSEDA(sedaCfg(time.Second, 100))
	if err := s.SetTarget(0); FieldOf(err) != "target" {
		t.Fatalf("zero target: %v", err)
	}
	// p90 1.5 s is over a 1 s target but under a 4 s target (err −0.625 → increase).
	_ = s.SetTarget(4 * time.Second)
	d := s.Update(at(1), p90(0, 1.5))
	if d.New <= 100 || s.Target() != 4*time.Second {
		t.Fatalf("new target not used: %s", d.Reason)
	}

	cfg := DefaultYakshaConfig()
	cfg.Tref, cfg.Lambda0, cfg.SelfTuning, cfg.Smoothing = 150*time.Millisecond, 50, false, 0
	y, _ := NewYaksha(cfg)
	// Tref 300 ms: Kg = 50·0.09 = 4.5, Kp = 0.157134840, Ki = 0.1·(Kp + 0.222222222) = 0.037935706,
	// A = Kp + Ki/2 = 0.176102693; T = 0.6: pd = A·0.3 = 0.052830808.
	if err := y.SetTarget(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d = y.Update(at(1), sluice.Measurements{Samples: 10, MeanRT: 0.6, Completed: 10})
	near(t, "pd", d.New, 0.052830808)
}
