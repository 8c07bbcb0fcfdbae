// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// newBucket returns NewTokenBucket(r, burst), failing tb if it refuses
// them.
func newBucket(tb testing.TB, r float64, burst int) *TokenBucket {
	tb.Helper()
	b, err := NewTokenBucket(r, burst)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// bucketStep is one scripted call on a TokenBucket at t0 + at.
type bucketStep struct {
	at    int     // milliseconds after t0
	op    string  // "allow", "rate", "burst"
	arg   float64 // new rate or burst
	n     int     // for "allow": number of calls
	admit int     // for "allow": how many of the n must be admitted
}

func TestTokenBucketScripts(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []bucketStep
	}{
		{"burst 5 at 10/s: 5 at t0, one more after 100ms", 10, 5, []bucketStep{
			{at: 0, op: "allow", n: 8, admit: 5},
			{at: 99, op: "allow", n: 1, admit: 0}, // 0.99 tokens
			{at: 100, op: "allow", n: 3, admit: 1},
			{at: 350, op: "allow", n: 5, admit: 2}, // 2.5 tokens
			{at: 850, op: "allow", n: 9, admit: 5}, // 0.5 + 5 capped at 5
		}},
		{"rate raised mid-stream", 10, 1, []bucketStep{
			{at: 0, op: "allow", n: 2, admit: 1},
			{at: 50, op: "rate", arg: 20},          // 0.5 tokens accrued at 10/s
			{at: 70, op: "allow", n: 1, admit: 0},  // 0.5 + 0.02 s·20 = 0.9
			{at: 80, op: "allow", n: 2, admit: 1},  // 0.5 + 0.6 ≥ 1
			{at: 130, op: "allow", n: 1, admit: 1}, // 0.1 + 1.0
		}},
		{"rate lowered mid-stream", 10, 1, []bucketStep{
			{at: 0, op: "allow", n: 1, admit: 1},
			{at: 50, op: "rate", arg: 1},           // 0.5 tokens accrued at 10/s
			{at: 100, op: "allow", n: 1, admit: 0}, // 0.5 + 0.05
			{at: 549, op: "allow", n: 1, admit: 0}, // 0.5 + 0.499
			{at: 550, op: "allow", n: 2, admit: 1},
		}},
		{"rate 0 admits the bucket, then nothing", 0, 3, []bucketStep{
			{at: 0, op: "allow", n: 5, admit: 3},
			{at: 3_600_000, op: "allow", n: 2, admit: 0},
			{at: 3_600_000, op: "rate", arg: 1000},
			{at: 3_600_001, op: "allow", n: 2, admit: 1},
		}},
		{"+Inf admits everything", inf, 1, []bucketStep{
			{at: 0, op: "allow", n: 10000, admit: 10000},
			{at: 0, op: "rate", arg: 10}, // leaves +Inf at the same instant: full bucket
			{at: 0, op: "allow", n: 3, admit: 1},
			{at: 100, op: "allow", n: 2, admit: 1},
			{at: 100, op: "rate", arg: inf},
			{at: 100, op: "allow", n: 500, admit: 500},
			{at: 200, op: "burst", arg: 4},
			{at: 200, op: "rate", arg: 10},
			{at: 200, op: "allow", n: 6, admit: 4},
		}},
		{"burst lowered discards tokens", 10, 10, []bucketStep{
			{at: 0, op: "burst", arg: 2},
			{at: 0, op: "allow", n: 5, admit: 2},
			{at: 1000, op: "allow", n: 5, admit: 2}, // 10 accrued, capped at 2
			{at: 1000, op: "burst", arg: 5},
			{at: 1100, op: "allow", n: 5, admit: 1}, // raising adds no tokens
		}},
		{"time going backwards refills nothing", 10, 1, []bucketStep{
			{at: 1000, op: "allow", n: 1, admit: 1},
			{at: 500, op: "allow", n: 1, admit: 0},
			{at: 1050, op: "allow", n: 1, admit: 0},
			{at: 1100, op: "allow", n: 1, admit: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBucket(t, tt.rate, tt.burst)
			for i, s := range tt.steps {
				now := ms(s.at)
				switch s.op {
				case "allow":
					got := 0
					for range s.n {
						if b.AllowAt(now) {
							got++
						}
					}
					if got != s.admit {
						t.Fatalf("step %d at %dms: admitted %d of %d, want %d", i, s.at, got, s.n, s.admit)
					}
				case "rate":
					if err := b.SetRateAt(now, s.arg); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if b.Rate() != s.arg {
						t.Fatalf("step %d: Rate() = %v, want %v", i, b.Rate(), s.arg)
					}
				case "burst":
					if err := b.SetBurstAt(now, int(s.arg)); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if b.Burst() != int(s.arg) {
						t.Fatalf("step %d: Burst() = %d, want %v", i, b.Burst(), s.arg)
					}
				default:
					t.Fatalf("bad op %q", s.op)
				}
			}
		})
	}
}

func TestTokenBucketTokensAt(t *testing.T) {
	b := newBucket(t, 10, 5)
	for range 5 {
		b.AllowAt(t0)
	}
	for _, c := range []struct {
		at   int
		want float64
	}{{0, 0}, {250, 2.5}, {1000, 5}, {9000, 5}} {
		if got := b.TokensAt(ms(c.at)); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("TokensAt(+%dms) = %v, want %v", c.at, got, c.want)
		}
	}
	if err := b.SetRateAt(t0, math.Inf(1)); err != nil {
		t.Fatal(err)
	}
	if got := b.TokensAt(t0); !math.IsInf(got, 1) {
		t.Errorf("TokensAt with rate +Inf = %v, want +Inf", got)
	}
	var zero TokenBucket
	if zero.AllowAt(t0) || zero.TokensAt(t0) != 0 || zero.Rate() != 0 || zero.Burst() != 0 {
		t.Errorf("zero TokenBucket: want refusal, 0 tokens, rate 0, burst 0")
	}
}

func TestTokenBucketInvalid(t *testing.T) {
	tests := []struct {
		name      string
		rate      float64
		burst     int
		wantField string
		wantValue string
	}{
		{"negative rate", -1, 5, "rate", "-1"},
		{"NaN rate", math.NaN(), 5, "rate", "NaN"},
		{"-Inf rate", math.Inf(-1), 5, "rate", "-Inf"},
		{"zero burst", 10, 0, "burst", "0"},
		{"negative burst", 10, -3, "burst", "-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewTokenBucket(tt.rate, tt.burst); err == nil {
				t.Fatalf("NewTokenBucket(%v, %d): no error", tt.rate, tt.burst)
			} else {
				checkErr(t, err, tt.wantField, tt.wantValue)
			}
			b := newBucket(t, 7, 3)
			var err error
			if tt.wantField == "rate" {
				err = b.SetRateAt(t0, tt.rate)
			} else {
				err = b.SetBurstAt(t0, tt.burst)
			}
			if err == nil {
				t.Fatal("setter: no error")
			}
			checkErr(t, err, tt.wantField, tt.wantValue)
			if b.Rate() != 7 || b.Burst() != 3 {
				t.Errorf("after a rejected setter: rate %v burst %d, want 7 and 3", b.Rate(), b.Burst())
			}
		})
	}
}

func checkErr(t *testing.T, err error, field, value string) {
	t.Helper()
	msg := err.Error()
	if !strings.Contains(msg, field) || !strings.Contains(msg, value) {
		t.Errorf("error %q should name %q and value %q", msg, field, value)
	}
}

// TestTokenBucketMatchesRateLimiter checks that the lock-free refusal path
// never changes a decision: a TokenBucket and a bare rate.Limiter driven by
// the same random script with non-decreasing times decide identically.
func TestTokenBucketMatchesRateLimiter(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 42))
		r0 := float64(1 + rng.IntN(200))
		b := newBucket(t, r0, 1+rng.IntN(5))
		ref := rate.NewLimiter(rate.Limit(r0), b.Burst())
		now := t0
		for i := range 20000 {
			now = now.Add(time.Duration(rng.IntN(3_000_000))) // 0 to 3 ms
			switch rng.IntN(400) {
			case 0:
				r := float64(rng.IntN(300)) // 0 included
				if err := b.SetRateAt(now, r); err != nil {
					t.Fatal(err)
				}
				ref.SetLimitAt(now, rate.Limit(r))
			case 1:
				n := 1 + rng.IntN(6)
				if err := b.SetBurstAt(now, n); err != nil {
					t.Fatal(err)
				}
				ref.SetBurstAt(now, n)
			}
			if got, want := b.AllowAt(now), ref.AllowN(now, 1); got != want {
				t.Fatalf("seed %d step %d at %v: AllowAt = %v, rate.Limiter says %v (rate %v burst %d)",
					seed, i, now.Sub(t0), got, want, b.Rate(), b.Burst())
			}
		}
	}
}

func TestTokenBucketConcurrent(t *testing.T) {
	// All goroutines ask at the same instant: exactly burst are admitted.
	b := newBucket(t, 1, 50)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for g := range 8 {
		wg.Go(func() {
			n := 0
			for i := range 100 {
				if g == 0 && i == 50 {
					_ = b.SetBurstAt(t0, 50) // a setter racing the readers
				}
				if b.AllowAt(t0) {
					n++
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if admitted != 50 {
		t.Fatalf("admitted %d, want exactly 50", admitted)
	}
}

// A setter stamped later than an admission (a runner's tick read the clock
// after the request did) does not make the bucket look empty: admissions
// stamped earlier are decided with the tokens the bucket had at the
// setter's instant (5 here), without refill among themselves. And a rate
// set again unchanged (a static rate, every period) changes nothing.
func TestTokenBucketSetterAheadOfAdmissions(t *testing.T) {
	b := newBucket(t, 100000, 5)
	set := ms(3_600_000) // an hour ahead
	if err := b.SetRateAt(set, 1000); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for i := range 8 {
		if b.AllowAt(ms(i)) { // earlier than the setter
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d stamped before the setter, want the 5 tokens it had", admitted)
	}
	b2 := newBucket(t, 100000, 5)
	if err := b2.SetRateAt(set, 100000); err != nil { // unchanged
		t.Fatal(err)
	}
	admitted = 0
	for i := range 30 {
		if b2.AllowAt(ms(i)) {
			admitted++
		}
	}
	if admitted != 30 {
		t.Fatalf("an unchanged rate re-applied ahead of time: admitted %d of 30 at 1 ms apart (100000/s)", admitted)
	}
}

func TestTokenBucketStaleClockReadingDecidedAtLatest(t *testing.T) {
	// A request that read the clock, was preempted while later ones went
	// through, and then asks, is decided at the latest instant seen, not at
	// its own older one: the same decisions as a bucket given the running
	// maximum of the times. Decided at its stale instant it would find
	// (latest − t)·rate fewer tokens and be refused at high rates.
	b := newBucket(t, 1000, 5)
	for range 5 {
		b.AllowAt(t0) // empty the bucket
	}
	if !b.AllowAt(t0.Add(5 * time.Millisecond)) { // refilled to 5, 4 left
		t.Fatal("refill: refused")
	}
	stale := t0.Add(1 * time.Millisecond) // 0 tokens at its own instant
	for i := range 4 {
		if !b.AllowAt(stale) {
			t.Fatalf("stale reading %d of 4: refused, want decided at the latest instant (4 tokens)", i+1)
		}
	}
	if b.AllowAt(stale) {
		t.Fatal("fifth stale reading admitted: the bucket had only 4 tokens")
	}

	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		r := float64(100 + rng.IntN(100_000))
		burst := 1 + rng.IntN(8)
		got := newBucket(t, r, burst)
		want := newBucket(t, r, burst)
		got.AllowAt(t0) // the same first instant: the same float base
		want.AllowAt(t0)
		latest := t0
		for i := range 20000 {
			now := latest.Add(time.Duration(rng.IntN(200_000) - 100_000)) // ±100 µs around the latest
			if now.After(latest) {
				latest = now
			}
			if g, w := got.AllowAt(now), want.AllowAt(latest); g != w {
				t.Fatalf("seed %d step %d: AllowAt(%v, latest %v) = %v, at the latest = %v", seed, i, now.Sub(t0), latest.Sub(t0), g, w)
			}
		}
	}
}

// WaitAt is the time to the next admission: 0 while the bucket holds a
// token, then the refill time of the missing token, less a class's ahead.
func TestTokenBucketWaitAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBucket(t, 4, 2) // T = 250 ms, τ = 250 ms
	if w := b.WaitAt(t0, 0); w != 0 {
		t.Errorf("full bucket: WaitAt = %v, want 0", w)
	}
	for range 2 {
		if !b.AllowAt(t0) {
			t.Fatal("burst refused")
		}
	}
	if b.AllowAt(t0) {
		t.Fatal("empty bucket admitted")
	}
	// tat = t0 + 500 ms; a token at tat − τ = t0 + 250 ms.
	if w := b.WaitAt(t0, 0); w != 250*time.Millisecond {
		t.Errorf("empty bucket: WaitAt = %v, want 250ms", w)
	}
	if w := b.WaitAt(t0.Add(100*time.Millisecond), 0); w != 150*time.Millisecond {
		t.Errorf("100 ms later: WaitAt = %v, want 150ms", w)
	}
	if w := b.WaitAt(t0, 100*time.Millisecond); w != 150*time.Millisecond {
		t.Errorf("ahead 100 ms: WaitAt = %v, want 150ms", w)
	}
	if !b.AllowAt(t0.Add(250 * time.Millisecond)) {
		t.Error("refused at the time WaitAt gave")
	}
	if err := b.SetRateAt(t0, 0); err != nil {
		t.Fatal(err)
	}
	if w := b.WaitAt(t0, 0); w != time.Duration(math.MaxInt64) {
		t.Errorf("rate 0: WaitAt = %v, want forever", w)
	}
	inf := newBucket(t, math.Inf(1), 1)
	if w := inf.WaitAt(t0, 0); w != 0 {
		t.Errorf("rate +Inf: WaitAt = %v", w)
	}
}
