// SPDX-License-Identifier: Apache-2.0

package auto

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The burst allowance: a queue that stands in an overload's first
// BurstWindow gets half the room the tail leaves, then the standing wait;
// a queue that stands below the drain rate does not spend it; a calm
// shorter than BurstWindow does not bring it back, a longer one does;
// BurstWindow 0, the default, trims a standing queue at once.
func TestAutoBurstWindow(t *testing.T) {
	// Mean 10 ms, p99 30 ms, SLO 250 ms: the allowance is (250 − 30)/2 =
	// 110 ms, the standing wait max(10 ms, 25 ms) = 25 ms; with TailPool
	// the same (the pool's p99 is the steps' 30 ms).
	calm := sluice.Measurements{Elapsed: 100 * time.Millisecond, Arrivals: 10, Completed: 10, ServiceSamples: 10,
		ServiceMean: 0.010, ServiceP99: 0.030, InFlight: 1, MaxInFlight: 2}
	crowd := calm
	crowd.Arrivals = 500 // 5000 req/s, above the drain rate 16/0.010
	stands := calm
	stands.QueueWaitMin = 0.005 // the queue did not empty, at 100 req/s
	type step struct {
		at   time.Duration // since t0
		m    sluice.Measurements
		wait time.Duration
		left float64 // burst_left_s
	}
	for _, c := range []struct {
		name   string
		window time.Duration
		pool   int
		steps  []step
	}{
		{"1s", time.Second, 0, []step{
			{100 * time.Millisecond, calm, 217 * time.Millisecond, 1}, // a burst's wait, not standing
			{150 * time.Millisecond, stands, 110 * time.Millisecond, 1},
			{200 * time.Millisecond, crowd, 110 * time.Millisecond, 1},
			{900 * time.Millisecond, crowd, 110 * time.Millisecond, 0.3},
			{1200 * time.Millisecond, crowd, 25 * time.Millisecond, 0},
			// 500 ms calm, shorter than the window: no new allowance.
			{1300 * time.Millisecond, calm, 217 * time.Millisecond, 0},
			{1800 * time.Millisecond, crowd, 25 * time.Millisecond, 0},
			// 1 s calm: the allowance is back.
			{1900 * time.Millisecond, calm, 217 * time.Millisecond, 0},
			{2900 * time.Millisecond, calm, 217 * time.Millisecond, 1},
			{3000 * time.Millisecond, crowd, 110 * time.Millisecond, 1},
		}},
		{"1s with tail_pool", time.Second, 2000, []step{
			{100 * time.Millisecond, calm, 217 * time.Millisecond, 1},
			{200 * time.Millisecond, crowd, 110 * time.Millisecond, 1},
			{1200 * time.Millisecond, crowd, 25 * time.Millisecond, 0},
		}},
		{"off (the default)", DefaultConfig().BurstWindow, 0, []step{
			{100 * time.Millisecond, calm, 217 * time.Millisecond, 0},
			{200 * time.Millisecond, crowd, 25 * time.Millisecond, 0},
		}},
	} {
		a := newAuto(t, func(cfg *Config) { cfg.BurstWindow, cfg.TailPool = c.window, c.pool })
		for _, s := range c.steps {
			// Hold the running means at the step's values.
			a.est.rMean, a.est.rP99 = s.m.ServiceMean, s.m.ServiceP99
			a.est.ring = tailRing{}
			d := a.Update(t0.Add(s.at), s.m)
			if d.MaxWait != s.wait {
				t.Errorf("%s, %v: wait %v, want %v (%s)", c.name, s.at, d.MaxWait, s.wait, d.Reason)
			}
			left, ok := a.Estimates()["burst_left_s"]
			if c.window > 0 && (!ok || left < s.left-1e-9 || left > s.left+1e-9) {
				t.Errorf("%s, %v: burst_left_s %v (present %v), want %v", c.name, s.at, left, ok, s.left)
			}
			if c.window == 0 && ok {
				t.Errorf("%s: burst_left_s shown with the allowance off", c.name)
			}
		}
	}
}
