package control

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The burst allowance: a queue that begins to stand gets half the room
// the tail leaves for BurstWindow, then the standing wait; a calm shorter
// than BurstWindow does not bring the allowance back, a longer one does;
// BurstWindow 0, the default, trims a standing queue at once.
func TestAutoBurstWindow(t *testing.T) {
	// Mean 10 ms, p99 30 ms, SLO 250 ms: the allowance is (250 − 30)/2 =
	// 110 ms, the standing wait max(10 ms, 25 ms) = 25 ms.
	calm := sluice.Measurements{Elapsed: 100 * time.Millisecond, Arrivals: 10, Completed: 10, ServiceSamples: 10,
		ServiceMean: 0.010, ServiceP99: 0.030, InFlight: 1, MaxInFlight: 2}
	crowd := calm
	crowd.Arrivals = 500 // 5000 req/s, above the drain rate 16/0.010
	type step struct {
		at   time.Duration // since t0
		m    sluice.Measurements
		wait time.Duration
		left float64 // burst_left_s
	}
	for _, c := range []struct {
		name   string
		window time.Duration
		steps  []step
	}{
		{"default 1s", time.Second, []step{
			{100 * time.Millisecond, calm, 217 * time.Millisecond, 0}, // a burst's wait, not standing
			{200 * time.Millisecond, crowd, 110 * time.Millisecond, 1},
			{900 * time.Millisecond, crowd, 110 * time.Millisecond, 0.3},
			{1200 * time.Millisecond, crowd, 25 * time.Millisecond, 0},
			// 500 ms calm, shorter than the window: no new allowance.
			{1300 * time.Millisecond, calm, 217 * time.Millisecond, 0},
			{1800 * time.Millisecond, crowd, 25 * time.Millisecond, 0},
			// 1 s calm: the allowance is back.
			{1900 * time.Millisecond, calm, 217 * time.Millisecond, 0},
			{2900 * time.Millisecond, calm, 217 * time.Millisecond, 0},
			{3000 * time.Millisecond, crowd, 110 * time.Millisecond, 1},
		}},
		{"off (the default)", DefaultAutoConfig().BurstWindow, []step{
			{100 * time.Millisecond, calm, 217 * time.Millisecond, 0},
			{200 * time.Millisecond, crowd, 25 * time.Millisecond, 0},
		}},
	} {
		a := newAuto(t, func(cfg *AutoConfig) { cfg.BurstWindow = c.window })
		for _, s := range c.steps {
			// Hold the running means at the step's values.
			a.rMean, a.rP99 = s.m.ServiceMean, s.m.ServiceP99
			a.tail = tailRing{}
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
