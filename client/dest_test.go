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

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func testConfig(mod func(*Config)) *Config {
	c := DefaultConfig()
	if mod != nil {
		mod(&c)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return &c
}

// exchange sends one unsafe call without a deadline to d at now and
// ends it with status, whatever Begin decided; it returns Begin's
// verdict.
func exchange(d *Dest, now time.Time, status int, rng *rand.Rand) Verdict {
	var c Call
	v := c.Begin(d, now, false, time.Time{}, rng)
	c.Done(now, Result{Status: status}, rng)
	return v
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The SRE formula, p = max(0, (requests − K·accepts)/(requests + 1)),
// step by step, and its window: counts older than Window leave it.
func TestThrottleProbability(t *testing.T) {
	exact := func(c *Config) { c.Throttle.MinRequests = 1 }
	d := NewDest(testConfig(exact)) // K 2, window 10 s
	rng := rand.New(rand.NewPCG(1, 2))
	if p := d.ThrottleProbability(t0); p != 0 {
		t.Fatalf("fresh: %v", p)
	}
	// 10 attempts, 4 accepted: (10 − 8)/11.
	for i := range 10 {
		st := 503
		if i < 4 {
			st = 200
		}
		if v := exchange(d, ms(i), st, rng); v != Send {
			t.Fatalf("attempt %d: %v", i, v)
		}
	}
	if p := d.ThrottleProbability(ms(10)); !near(p, 2.0/11) {
		t.Fatalf("p = %v, want 2/11", p)
	}
	// Fewer than MinRequests (20 by default): nothing refused yet.
	dm := NewDest(testConfig(nil))
	for i := range 19 {
		exchange(dm, ms(i), 503, rng)
	}
	if p := dm.ThrottleProbability(ms(19)); p != 0 {
		t.Fatalf("19 requests: p = %v", p)
	}
	exchange(dm, ms(19), 503, rng)
	if p := dm.ThrottleProbability(ms(20)); !near(p, 20.0/21) {
		t.Fatalf("20 refused requests: p = %v, want 20/21", p)
	}
	// Half accepted: p = 0.
	d2 := NewDest(testConfig(exact))
	for i := range 10 {
		st := 503
		if i%2 == 0 {
			st = 200
		}
		exchange(d2, ms(i), st, rng)
	}
	if p := d2.ThrottleProbability(ms(10)); p != 0 {
		t.Fatalf("half accepted: p = %v, want 0", p)
	}
	// A transport failure and a 500 are accepted (not overload); 429 is not.
	d3 := NewDest(testConfig(exact))
	for _, st := range []int{0, 500, 429} {
		exchange(d3, t0, st, rng)
	}
	if p := d3.ThrottleProbability(t0); !near(p, (3-2*2)/4.0) && p != 0 {
		t.Fatalf("p = %v", p)
	}
	if req, acc := d3.throttle.sums(t0); req != 3 || acc != 2 {
		t.Fatalf("requests %v accepts %v, want 3 and 2", req, acc)
	}
	// The window: after 10 s the first dest's counts are gone.
	if p := d.ThrottleProbability(ms(10 + 10000)); p != 0 {
		t.Fatalf("after the window: p = %v", p)
	}
	// Off: always 0.
	off := false
	d4 := NewDest(testConfig(func(c *Config) { c.Throttle.Enabled = &off }))
	for range 10 {
		exchange(d4, t0, 503, rng)
	}
	if p := d4.ThrottleProbability(t0); p != 0 {
		t.Fatalf("off: p = %v", p)
	}
}

// Under a destination that refuses everything, the throttle refuses
// locally most attempts; the refused ones count as requests (the SRE
// book's "requests" include them), so p climbs towards 1; once the
// destination accepts again, p falls back to 0 within the window.
func TestThrottleEngagesAndRecovers(t *testing.T) {
	d := NewDest(testConfig(nil))
	rng := rand.New(rand.NewPCG(3, 4))
	sent, throttled := 0, 0
	now := t0
	for i := range 2000 { // 200 req/s for 10 s, all refused
		now = t0.Add(time.Duration(i) * 5 * time.Millisecond)
		var c Call
		if c.Begin(d, now, false, time.Time{}, rng) == Throttled {
			throttled++
			continue
		}
		sent++
		c.Done(now, Result{Status: 503}, rng)
	}
	if float64(throttled)/2000 < 0.9 {
		t.Fatalf("throttled %d of 2000 against a refusing destination", throttled)
	}
	// Recovery: the destination accepts everything again. What the
	// throttle lets through is accepted, so over each window the refusal
	// rate goes from p to about 2p − 1 (K = 2): it halves the traffic it
	// refuses every window, a slow start back to full traffic.
	recovered := time.Duration(0)
	last := d.ThrottleProbability(now)
	start := now
	for i := 0; i < 16000 && recovered == 0; i++ { // up to 80 s
		now = now.Add(5 * time.Millisecond)
		var c Call
		if c.Begin(d, now, false, time.Time{}, rng) == Send {
			c.Done(now, Result{Status: 200}, rng)
		}
		if i%2000 == 1999 { // every window
			p := d.ThrottleProbability(now)
			if p > last+0.02 {
				t.Fatalf("p rose from %v to %v while the destination accepted everything", last, p)
			}
			last = p
			if p == 0 {
				recovered = now.Sub(start)
			}
		}
	}
	t.Logf("throttle back to 0 %v after a 10 s total refusal", recovered)
	if recovered == 0 || recovered > 70*time.Second {
		t.Fatalf("not recovered within 70 s (p = %v)", last)
	}
	if c := d.Counts(); c.Throttled < uint64(throttled) || c.Attempts == 0 {
		t.Fatalf("counts %+v", c)
	}
}

// The retry budget: at most min·window + ratio·calls retries in the
// window, whatever the destination does.
func TestRetryBudget(t *testing.T) {
	off := false
	cfg := testConfig(func(c *Config) {
		c.Throttle.Enabled = &off
		c.Retry.BudgetMinPerSecond = 1 // floor 10 retries per 10 s
		c.Retry.MaxAttempts = 10
	})
	d := NewDest(cfg)
	rng := rand.New(rand.NewPCG(5, 6))
	calls, retries, exhausted := 0, 0, 0
	for i := range 1000 { // 100 calls/s for 10 s, every attempt fails
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		var c Call
		c.Begin(d, now, true, time.Time{}, rng)
		calls++
		for {
			stop, _ := c.Done(now, Result{Status: 503}, rng)
			if stop == StopBudget {
				exhausted++
			}
			if stop != StopRetry {
				break
			}
			retries++
		}
	}
	if max := 10 + 0.1*float64(calls); float64(retries) > max || float64(retries) < max-2 {
		t.Fatalf("%d retries for %d calls, want ≤ %v and close to it", retries, calls, max)
	}
	if exhausted == 0 || d.Counts().BudgetExhausted != uint64(exhausted) || d.Counts().Retries != uint64(retries) {
		t.Fatalf("exhausted %d, counts %+v", exhausted, d.Counts())
	}
}

// Call.Done's decisions, one reason each.
func TestCallStops(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	off := false
	cfg := testConfig(func(c *Config) { c.Throttle.Enabled = &off })
	cases := []struct {
		name     string
		safe     bool
		deadline time.Time
		r        Result
		want     Stop
	}{
		{"success", true, time.Time{}, Result{Status: 200}, StopDone},
		{"500 is final", true, time.Time{}, Result{Status: 500}, StopDone},
		{"404 is final", true, time.Time{}, Result{Status: 404}, StopDone},
		{"503 retried", true, time.Time{}, Result{Status: 503}, StopRetry},
		{"502 retried", true, time.Time{}, Result{Status: 502}, StopRetry},
		{"504 retried", true, time.Time{}, Result{Status: 504}, StopRetry},
		{"429 retried", true, time.Time{}, Result{Status: 429}, StopRetry},
		{"transport failure retried", true, time.Time{}, Result{}, StopRetry},
		{"caller gave up: not retried", true, time.Time{}, Result{Outcome: sluice.Ignore}, StopDone},
		{"caller gave up on a 503: not retried", true, time.Time{}, Result{Outcome: sluice.Ignore, Status: 503}, StopDone},
		{"unsafe", false, time.Time{}, Result{Status: 503}, StopUnsafe},
		{"Retry-After too long", true, time.Time{}, Result{Status: 503, RetryAfter: 6 * time.Second, HasRetryAfter: true}, StopRetryAfter},
		{"Retry-After past the deadline", true, ms(1000), Result{Status: 503, RetryAfter: time.Second, HasRetryAfter: true}, StopDeadline},
		{"Retry-After within the deadline", true, ms(1500), Result{Status: 503, RetryAfter: time.Second, HasRetryAfter: true}, StopRetry},
	}
	for _, c := range cases {
		d := NewDest(cfg)
		var call Call
		if v := call.Begin(d, t0, c.safe, c.deadline, rng); v != Send {
			t.Fatalf("%s: begin %v", c.name, v)
		}
		stop, wait := call.Done(t0, c.r, rng)
		if stop != c.want {
			t.Errorf("%s: %v, want %v", c.name, stop, c.want)
		}
		if c.r.HasRetryAfter && stop == StopRetry && wait < c.r.RetryAfter {
			t.Errorf("%s: wait %v < Retry-After %v", c.name, wait, c.r.RetryAfter)
		}
	}
	// Attempts: three at most by default.
	d := NewDest(cfg)
	var call Call
	call.Begin(d, t0, true, time.Time{}, rng)
	var stops []Stop
	for range 4 {
		s, _ := call.Done(t0, Result{Status: 503}, rng)
		stops = append(stops, s)
		if s != StopRetry {
			break
		}
	}
	if len(stops) != 3 || stops[2] != StopAttempts || call.Attempts() != 3 {
		t.Errorf("stops %v after %d attempts", stops, call.Attempts())
	}
	// Begin: a deadline closer than MinRemaining is Late; the throttle's
	// refusal is Throttled.
	if v := call.Begin(NewDest(cfg), t0, true, t0.Add(999*time.Microsecond), rng); v != Late {
		t.Errorf("0.999 ms left: %v", v)
	}
	if v := call.Begin(NewDest(cfg), t0, true, t0.Add(time.Millisecond), rng); v != Send {
		t.Errorf("1 ms left: %v", v)
	}
}

// Full jitter: the wait is uniform below min(max, base·2^(n−1)).
func TestBackoff(t *testing.T) {
	base, top := 25*time.Millisecond, 250*time.Millisecond
	for _, c := range []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{1, 0, 0}, {1, 0.5, 12500 * time.Microsecond}, {2, 0.5, 25 * time.Millisecond}, {3, 0.999999, 99999900},
		{4, 1, 200 * time.Millisecond}, {5, 1, top}, {50, 0.5, top / 2}, {63, 1, top},
	} {
		if got := Backoff(base, top, c.n, c.u); got != c.want {
			t.Errorf("Backoff(n=%d, u=%v) = %v, want %v", c.n, c.u, got, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		mod  func(*Config)
		path string
	}{
		{func(c *Config) { c.Throttle.K = 0.5 }, "throttle.k"},
		{func(c *Config) { c.Throttle.Window = -1 }, "throttle.window"},
		{func(c *Config) { c.Retry.MaxAttempts = 11 }, "retry.max_attempts"},
		{func(c *Config) { c.Retry.BudgetRatio = 2 }, "retry.budget_ratio"},
		{func(c *Config) { c.Retry.BudgetMinPerSecond = -1 }, "retry.budget_min_per_second"},
		{func(c *Config) { c.Retry.MaxBackoff = time.Millisecond }, "retry.max_backoff"},
		{func(c *Config) { c.Retry.PerTryTimeout = -1 }, "retry.per_try_timeout"},
		{func(c *Config) { c.MinRemaining = -1 }, "min_remaining"},
		{func(c *Config) { c.TimeoutHeader = "a b" }, "timeout_header"},
	} {
		cfg := DefaultConfig()
		c.mod(&cfg)
		cfg.SetDefaults()
		err := cfg.Validate()
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Path != c.path {
			t.Errorf("%s: %v", c.path, err)
		}
	}
	if cfg := DefaultConfig(); cfg.Validate() != nil || !*cfg.Throttle.Enabled || cfg.Retry.MaxAttempts != 3 {
		t.Errorf("defaults %+v", cfg)
	}
}

// The throttle forgetting a destination's refusals once it accepts
// again (forget: accepts).
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
