// SPDX-License-Identifier: Apache-2.0

package client

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// never is a random source whose Float64 is just below 1: the throttle
// refuses nothing locally unless p rounds to 1, so a trace's counts are
// exactly the attempts it makes.
type never struct{}

func (never) Uint64() uint64 { return math.MaxUint64 }

// The accept run on a hand-worked trace (K 2, MinRequests 1, ForgetRun
// 10). A crowd: 300 attempts, one in three accepted, the last refused:
// p = (300 − 2·100)/301. Then the destination accepts every attempt. The
// book's window holds the crowd's excess of 100 requests, and each
// accept pays back K − 1 = 1 of it: p = (100 − j)/(301 + j) after j
// accepts, zero only after 100 of them. With the accept run the 10th
// accept makes the window the run's, 10 requests and 10 accepts: p = 0.
// A new storm is counted from there.
func TestThrottleForgetAfterCrowd(t *testing.T) {
	for _, forget := range []string{ForgetAccepts, ForgetWindow} {
		d := NewDest(testConfig(func(c *Config) { c.Throttle.MinRequests, c.Throttle.Forget = 1, forget }))
		rng := rand.New(never{})
		now := t0
		step := func(accepted bool) {
			now = now.Add(time.Millisecond)
			if !d.admit(now, rng) {
				t.Fatalf("%s: refused locally at p = %v", forget, d.ThrottleProbability(now))
			}
			d.answered(now, accepted, true)
		}
		for i := range 300 {
			step(i%3 == 0 && i != 299)
		}
		if p := d.ThrottleProbability(now); !near(p, 100.0/301) {
			t.Fatalf("%s: after the crowd p = %v, want 100/301", forget, p)
		}
		for j := 1; j <= 10; j++ {
			step(true)
			want := (100 - float64(j)) / (301 + float64(j))
			if forget == ForgetAccepts && j == 10 {
				want = 0
			}
			if p := d.ThrottleProbability(now); !near(p, want) {
				t.Fatalf("%s: after %d accepts p = %v, want %v", forget, j, p, want)
			}
		}
		if f := d.Counts().Forgets; (forget == ForgetAccepts) != (f == 1) {
			t.Fatalf("%s: %d forgets", forget, f)
		}
		if forget == ForgetWindow {
			continue
		}
		// A new storm after the forget: 60 attempts, one in three
		// accepted, counted on the run's 10 and 10: p = (70 − 2·30)/71.
		for i := range 60 {
			step(i%3 == 0)
		}
		if p := d.ThrottleProbability(now); !near(p, 10.0/71) {
			t.Fatalf("the storm after the forget: p = %v, want 10/71", p)
		}
	}
}

// afterCrowd returns a destination (MinRequests 1) after the crowd of
// TestThrottleForgetAfterCrowd: 300 attempts, one in three accepted, the
// last refused; with its random source (never refuses locally) and the
// time of the last attempt.
func afterCrowd() (*Dest, *rand.Rand, time.Time) {
	d := NewDest(testConfig(func(c *Config) { c.Throttle.MinRequests = 1 }))
	rng := rand.New(never{})
	now := t0
	for i := range 300 {
		now = now.Add(time.Millisecond)
		d.admit(now, rng)
		d.answered(now, i%3 == 0 && i != 299, true)
	}
	return d, rng, now
}

// Attempts in flight when the run begins: after the same crowd, 60
// attempts are sent before their answers come back, all accepted. At the
// 10th accept the run holds 60 requests and 10 accepts, p = 40/61, more
// than the window's (360 − 2·110)/361: no forget yet. At the j-th accept
// the run's p is (60 − 2j)/61, below the window's (160 − 2j)/361 from
// j = 20 on (20/61 against 120/361): the window is then the run's.
func TestThrottleForgetInFlight(t *testing.T) {
	d, rng, now := afterCrowd()
	for range 60 {
		now = now.Add(time.Millisecond)
		d.admit(now, rng)
	}
	for j := 1; j <= 60; j++ {
		d.answered(now, true, true)
		want := (160 - 2*float64(j)) / 361
		if j >= 20 {
			want = math.Max(0, (60-2*float64(j))/61)
		}
		if p := d.ThrottleProbability(now); !near(p, want) {
			t.Fatalf("accept %d: p = %v, want %v", j, p, want)
		}
	}
	if f := d.Counts().Forgets; f != 1 {
		t.Fatalf("%d forgets, want 1", f)
	}
}

// Only answers are evidence: after the same crowd, attempts that time
// out (Status 0) or whose caller gives up (Outcome sluice.Ignore) are counted as
// accepted, as the book counts them, but 30 of them in a row make no
// run; 10 accepted answers after them do.
func TestThrottleForgetNeedsAnswers(t *testing.T) {
	d, rng, now := afterCrowd()
	for i := range 30 {
		now = now.Add(time.Millisecond)
		var c Call
		if v := c.Begin(d, now, false, time.Time{}, rng); v != Send {
			t.Fatalf("timeout %d: %v", i, v)
		}
		if i%2 == 0 {
			c.Done(now, Result{}, rng)
		} else {
			c.Done(now, Result{Outcome: sluice.Ignore}, rng)
		}
	}
	if p, f := d.ThrottleProbability(now), d.Counts().Forgets; f != 0 || !near(p, (330-2*130)/331.0) {
		t.Fatalf("after 30 timeouts: p = %v, %d forgets; want (330 − 260)/331 and none", p, f)
	}
	for range 10 {
		now = now.Add(time.Millisecond)
		exchange(d, now, 200, rng)
	}
	if p, f := d.ThrottleProbability(now), d.Counts().Forgets; f != 1 || p != 0 {
		t.Fatalf("after 10 answers: p = %v, %d forgets; want 0 and 1", p, f)
	}
}

// A run never raises p. A destination that turns slow: after a healthy
// spell (1,000 attempts accepted) and one refusal, 190 attempts are in
// flight, unanswered, when 10 answers come back accepted. The run then
// counts 200 requests and 10 accepts, p = (200 − 20)/201 ≈ 0.9, where the
// window's p is 0: it stays the window's.
func TestThrottleForgetNeverRaises(t *testing.T) {
	d := NewDest(testConfig(func(c *Config) { c.Throttle.MinRequests = 1 }))
	rng := rand.New(never{})
	now := t0
	for range 1000 {
		now = now.Add(time.Millisecond)
		d.admit(now, rng)
		d.answered(now, true, true)
	}
	d.admit(now, rng)
	d.answered(now, false, true)
	for range 200 {
		now = now.Add(time.Millisecond)
		d.admit(now, rng)
	}
	for range 10 {
		d.answered(now, true, true)
	}
	if req, acc := d.run.sums(now); req != 200 || acc != 10 {
		t.Fatalf("the run holds %v requests and %v accepts, want 200 and 10", req, acc)
	}
	if p, f := d.ThrottleProbability(now), d.Counts().Forgets; p != 0 || f != 0 {
		t.Fatalf("p = %v after %d forgets, want 0 and none", p, f)
	}
}

// What the throttle is for, with the accept run: a destination that keeps
// refusing still sees its load cut to about K × what it accepts. The
// destination takes 200 req/s and refuses the rest of what is sent to it
// at random (each attempt accepted with probability 200/(rate sent over
// the last 100 ms)): at the throttle's equilibrium it accepts an attempt
// with probability 1/K, the case in which runs of accepts come by chance
// most often. Offered 1,000 req/s for 60 s: sent ≈ 2 × accepted, and
// about 1 − 2·200/1000 = 60 % refused locally, as with the book's window.
// A run of 2 (ForgetRun 2, a run an overloaded destination shows every
// few attempts) gives that up.
func TestThrottleForgetStillCuts(t *testing.T) {
	run := func(mod func(*Config)) (ratio, throttledShare float64, forgets uint64) {
		d := NewDest(testConfig(mod))
		rng := rand.New(rand.NewPCG(11, 12))
		var recent []time.Duration // sends of the last 100 ms
		var sent, accepted, offered, throttled float64
		for i := range 60000 { // 1,000 req/s for 60 s
			at := time.Duration(i) * time.Millisecond
			now := t0.Add(at)
			var c Call
			v := c.Begin(d, now, false, time.Time{}, rng)
			measured := at >= 10*time.Second
			if measured {
				offered++
			}
			if v == Throttled {
				if measured {
					throttled++
				}
				continue
			}
			for len(recent) > 0 && recent[0] <= at-100*time.Millisecond {
				recent = recent[1:]
			}
			recent = append(recent, at)
			ok := rng.Float64() < 200/(float64(len(recent))*10)
			st := 503
			if ok {
				st = 200
			}
			c.Done(now, Result{Status: st}, rng)
			if measured {
				sent++
				if ok {
					accepted++
				}
			}
		}
		return sent / accepted, throttled / offered, d.Counts().Forgets
	}
	book, bookShare, _ := run(func(c *Config) { c.Throttle.Forget = ForgetWindow })
	r, share, forgets := run(nil)
	t.Logf("sent/accepted: book %.3f, accept run %.3f (%d forgets in 60 s); refused locally: %.3f and %.3f", book, r, forgets, bookShare, share)
	for name, v := range map[string]float64{"book": book, "accept run": r} {
		if v < 1.8 || v > 2.2 {
			t.Errorf("%s: sent %.3f × accepted, want 2 ± 10 %%", name, v)
		}
	}
	if math.Abs(share-0.6) > 0.05 || math.Abs(bookShare-0.6) > 0.05 {
		t.Errorf("refused locally %.3f (book %.3f), want 0.6 ± 0.05", share, bookShare)
	}
	if loose, _, _ := run(func(c *Config) { c.Throttle.ForgetRun = 2 }); loose < 2.5 {
		t.Errorf("ForgetRun 2: sent %.3f × accepted; the test cannot tell a throttle that forgets too soon", loose)
	}
}

// ForgetRun's default carries 10 bits of evidence whatever K; forget
// takes two values.
func TestForgetConfig(t *testing.T) {
	for _, c := range []struct {
		k    float64
		want int
	}{{2, 10}, {3, 7}, {1.5, 18}, {4, 5}, {1, 0}} {
		cfg := Config{Throttle: ThrottleConfig{K: c.k}}
		cfg.SetDefaults()
		if cfg.Throttle.ForgetRun != c.want || cfg.Throttle.Forget != ForgetAccepts || cfg.Validate() != nil {
			t.Errorf("K %v: forget %q run %d (%v), want accepts %d", c.k, cfg.Throttle.Forget, cfg.Throttle.ForgetRun, cfg.Validate(), c.want)
		}
	}
	for _, c := range []struct {
		mod  func(*Config)
		path string
	}{
		{func(c *Config) { c.Throttle.Forget = "never" }, "throttle.forget"},
		{func(c *Config) { c.Throttle.ForgetRun = -1 }, "throttle.forget_run"},
	} {
		cfg := DefaultConfig()
		c.mod(&cfg)
		cfg.SetDefaults()
		var fe *sluice.FieldError
		if err := cfg.Validate(); !errors.As(err, &fe) || fe.Path != c.path {
			t.Errorf("%s: %v", c.path, err)
		}
	}
}
