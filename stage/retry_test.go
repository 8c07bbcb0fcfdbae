// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/gate"
)

type ignoreWaiter struct{}

func (ignoreWaiter) Granted(Ticket) {}
func (ignoreWaiter) Dropped(error)  {}

// RetryAfter comes from the stage's state, per gate and controller, in
// virtual time.
func TestStageRetryAfter(t *testing.T) {
	t0 := time.Unix(10_000, 0)

	t.Run("static-rate: time to the next token", func(t *testing.T) {
		cfg := control.DefaultStaticRateConfig()
		cfg.Rate = 2 // T = 500 ms
		s := newStage(t, Options{Name: "api", Controller: &cfg, Burst: 1}, t0)
		if got := s.RetryAfter(t0, 0); got != 0 {
			t.Errorf("token in the bucket: RetryAfter = %v, want 0", got)
		}
		if _, o := s.Arrive(t0, 0, nil); o != gate.Admitted {
			t.Fatalf("first request: %v", o)
		}
		if _, o := s.Arrive(t0.Add(100*time.Millisecond), 0, nil); o != gate.Rejected {
			t.Fatalf("second request: %v", o)
		}
		if got := s.RetryAfter(t0.Add(100*time.Millisecond), 0); got != 400*time.Millisecond {
			t.Errorf("RetryAfter = %v, want 400ms (next token at +500ms)", got)
		}
	})

	t.Run("static-concurrency: drain time of the queue ahead", func(t *testing.T) {
		cfg := control.DefaultStaticConcurrencyConfig()
		cfg.Limit = 2
		s := newStage(t, Options{Name: "api", Controller: &cfg, MaxQueue: 10, QueueTimeout: time.Minute}, t0)
		// Two requests served in 400 ms each measure the service time.
		for range 2 {
			tk, o := s.Arrive(t0, 0, nil)
			if o != gate.Admitted {
				t.Fatalf("arrival: %v", o)
			}
			tk.Finish(t0.Add(400*time.Millisecond), Outcome{OK: true})
		}
		s.Step(t0.Add(time.Second))
		now := t0.Add(1100 * time.Millisecond)
		for range 2 {
			if _, o := s.Arrive(now, 0, nil); o != gate.Admitted {
				t.Fatalf("arrival: %v", o)
			}
		}
		for range 3 {
			if _, o := s.Arrive(now, 0, &Wait{Notify: ignoreWaiter{}}); o != gate.Queued {
				t.Fatalf("arrival: %v, want queued", o)
			}
		}
		rs := s.RetryState(now, 0)
		if rs.Queue != 3 || rs.Limit != 2 || rs.ServiceMean != 400*time.Millisecond {
			t.Fatalf("RetryState = %+v", rs)
		}
		// (3 + 1) · 400 ms / 2
		if got := s.RetryAfter(now, 0); got != 800*time.Millisecond {
			t.Errorf("RetryAfter = %v, want 800ms", got)
		}
	})

	for _, tc := range []struct {
		name string
		cfg  control.Config
	}{
		{"yaksha", func() control.Config {
			c := control.DefaultYakshaConfig()
			c.Tref, c.Period = 100*time.Millisecond, 2*time.Second
			return &c
		}()},
		{"kihl", func() control.Config {
			c := control.DefaultKihlConfig()
			c.Period = 2 * time.Second
			return &c
		}()},
		{"seda", func() control.Config {
			c := control.DefaultSEDAConfig()
			c.Target, c.Timeout = 100*time.Millisecond, 2*time.Second
			return &c
		}()},
	} {
		t.Run(tc.name+": time to the next adjustment", func(t *testing.T) {
			s := newStage(t, Options{Name: "api", Controller: tc.cfg}, t0)
			if _, ok := s.Controller().Unwrap().(sluice.RetryAdvisor); !ok {
				t.Fatalf("%T is not a RetryAdvisor", s.Controller().Unwrap())
			}
			if got := s.RetryAfter(t0.Add(500*time.Millisecond), 0); got != 1500*time.Millisecond {
				t.Errorf("RetryAfter = %v, want 1.5s", got)
			}
			s.Step(t0.Add(2 * time.Second))
			if got := s.RetryAfter(t0.Add(2500*time.Millisecond), 0); got != 1500*time.Millisecond {
				t.Errorf("after a step: RetryAfter = %v, want 1.5s", got)
			}
		})
	}
}
