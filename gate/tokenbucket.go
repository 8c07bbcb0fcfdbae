// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// TokenBucket is an adjustable token bucket: a bucket of capacity Burst
// tokens refilled continuously at Rate tokens per second; each admission
// takes one token, and a request that finds less than one token is refused.
// Over any interval of length T it admits at most Burst + Rate·T requests.
//
// It is the generic cell rate algorithm (GCRA, the virtual-scheduling form
// of a token bucket): with T = 1/Rate the time one token takes and
// τ = (Burst − 1)·T, the bucket keeps one number, the theoretical arrival
// time tat, and admits a request at now iff now ≥ tat − τ, then sets
// tat ← max(tat, now) + T. The tokens held at now are
// Burst − (max(tat, now) − now)/T. Time is always an argument (AllowAt(now)),
// so the same bucket runs in the simulator's virtual time and in the live
// proxy; times are float64 nanoseconds since the first instant the bucket
// saw, which keeps a monotonic clock reading's precision to well under a
// nanosecond for months.
//
// A rate of 0 admits the tokens left in the bucket and then nothing more. A
// rate of +Inf admits every request; when the rate later returns to a finite
// value the bucket restarts full (Burst tokens at that instant).
//
// The zero value is a bucket with rate 0 and no tokens: it refuses every
// request. Use NewTokenBucket. A TokenBucket is safe for concurrent use by
// multiple goroutines.
//
// Cost: a decision is atomic loads of the settings, of tat and of the
// latest instant decided, and a compare-and-swap of that instant when it
// moves forward; an admission adds one compare-and-swap of tat. No lock
// is taken on the request path (setters take one among themselves; an admission
// racing a setter is decided by either setting). It replaces the
// golang.org/x/time/rate.Limiter this bucket used to wrap, whose mutex and
// float arithmetic cost 90–150 ns per admission; decisions are those of the
// same token bucket (the tests compare it with rate.Limiter).
type TokenBucket struct {
	mu   sync.Mutex // serialises setters
	inf  atomic.Bool
	set  atomic.Pointer[bucketSetting] // nil: the zero value (refuse all)
	tat  atomic.Uint64                 // math.Float64bits of tat, ns since base
	base atomic.Pointer[time.Time]     // the first instant seen
	// floor is the latest setter's instant (Float64bits, ns since base):
	// an admission stamped earlier (a request that read the clock just
	// before a setter ran) is decided as of the setter's instant, with the
	// tokens the bucket had then and no refill among such admissions
	// (rate.Limiter would refill between them, moving its clock back).
	floor atomic.Uint64
	// last is the latest instant an admission was decided at (Float64bits,
	// ns since base): time never runs backwards for the bucket. A request
	// whose clock reading is older (it read the clock, then was
	// preempted while others went through) is decided at last, as
	// rate.Limiter does; decided at its own stale instant it would find
	// the bucket emptier by (last − t)·rate tokens, and at a high rate a
	// few microseconds of preemption refused it.
	last atomic.Uint64

	// The fields above are read on every call and tat is written on
	// every admission; padding keeps the next object off their cache line.
	_ [64]byte
}

// bucketSetting is a bucket's rate and burst with the derived T and τ in
// nanoseconds. It is immutable once published.
type bucketSetting struct {
	rate   float64
	burst  int
	t, tau float64
}

// zeroRateT stands for T = +Inf (rate 0): large enough that no refill is
// ever seen, finite so that τ and tat stay finite.
const zeroRateT = 1e30

func newSetting(r float64, burst int) *bucketSetting {
	t := zeroRateT
	if r > 0 && !math.IsInf(r, 1) {
		t = 1e9 / r
	}
	return &bucketSetting{rate: r, burst: burst, t: t, tau: float64(burst-1) * t}
}

// NewTokenBucket returns a full bucket (burst tokens) refilled at r tokens
// per second. r must be finite and ≥ 0, or +Inf to admit everything; burst
// must be ≥ 1. The error names the bad parameter and its value.
func NewTokenBucket(r float64, burst int) (*TokenBucket, error) {
	if err := checkRate("rate", r); err != nil {
		return nil, err
	}
	if err := checkBurst(burst); err != nil {
		return nil, err
	}
	b := &TokenBucket{}
	b.tat.Store(math.Float64bits(math.Inf(-1))) // full
	b.floor.Store(math.Float64bits(math.Inf(-1)))
	b.last.Store(math.Float64bits(math.Inf(-1)))
	b.set.Store(newSetting(r, burst))
	b.inf.Store(math.IsInf(r, 1))
	return b, nil
}

func checkRate(name string, r float64) error {
	if math.IsNaN(r) || r < 0 {
		return fmt.Errorf("gate: %s = %v: must be finite and >= 0 (tokens per second), or +Inf", name, r)
	}
	return nil
}

func checkBurst(burst int) error {
	if burst < 1 {
		return fmt.Errorf("gate: burst = %d: must be >= 1", burst)
	}
	return nil
}

// ns returns now in nanoseconds since the bucket's base instant, which
// the first call sets.
func (b *TokenBucket) ns(now time.Time) float64 {
	base := b.base.Load()
	if base == nil {
		t := now
		if !b.base.CompareAndSwap(nil, &t) {
			base = b.base.Load()
		} else {
			base = &t
		}
	}
	return float64(now.Sub(*base))
}

// AllowAt reports whether one request arriving at now is admitted, and if so
// takes a token. A now earlier than a previous call refills nothing.
func (b *TokenBucket) AllowAt(now time.Time) bool { return b.allowAt(now, 0) }

// AllowAheadAt is AllowAt for a request that may run up to ahead earlier
// than the bucket allows: it is admitted iff now ≥ tat − τ − ahead, so it
// may take a token the bucket will only hold ahead from now, leaving the
// bucket in debt by up to ahead·Rate tokens; later requests repay it, and
// the bucket still admits at most Burst + Rate·(T + ahead) requests over
// any interval T. A stage gives higher request classes a longer ahead
// than lower ones, so that when the bucket runs dry the lower classes are
// refused first and the higher ones keep their requests (stage.Gates;
// docs/hops.md). ahead ≤ 0 is AllowAt.
func (b *TokenBucket) AllowAheadAt(now time.Time, ahead time.Duration) bool {
	return b.allowAt(now, math.Max(float64(ahead), 0))
}

// allowAt decides one request with an extra tolerance of ahead ns.
func (b *TokenBucket) allowAt(now time.Time, ahead float64) bool {
	if b.inf.Load() {
		return true
	}
	set := b.set.Load()
	if set == nil {
		return false
	}
	t := math.Max(b.ns(now), math.Float64frombits(b.floor.Load()))
	for {
		// tat first, then last: an admission moves last forward before
		// its CAS of tat, so a tat that includes it comes with a last at
		// least its instant (see last).
		old := b.tat.Load()
		l := b.last.Load()
		if lf := math.Float64frombits(l); t < lf {
			t = lf
		} else if t > lf && !b.last.CompareAndSwap(l, math.Float64bits(t)) {
			continue // another call moved last: read both again
		}
		tat := math.Float64frombits(old)
		if t < tat-set.tau-ahead {
			return false
		}
		if b.tat.CompareAndSwap(old, math.Float64bits(math.Max(tat, t)+set.t)) {
			return true
		}
	}
}

// WaitAt returns how long after now a request with tolerance ahead (see
// AllowAheadAt; 0 for AllowAt) would be admitted if nothing else took a
// token first: max(0, tat − τ − ahead − now), 0 for an infinite rate and
// math.MaxInt64 for a zero rate. It takes no token.
func (b *TokenBucket) WaitAt(now time.Time, ahead time.Duration) time.Duration {
	if b.inf.Load() {
		return 0
	}
	set := b.set.Load()
	if set == nil || set.rate == 0 {
		return time.Duration(math.MaxInt64)
	}
	t := math.Max(b.ns(now), math.Float64frombits(b.floor.Load()))
	w := math.Float64frombits(b.tat.Load()) - set.tau - math.Max(float64(ahead), 0) - t
	if w <= 0 {
		return 0
	}
	return time.Duration(math.Min(w, math.MaxInt64))
}

// Allow is AllowAt(time.Now()), for live callers.
func (b *TokenBucket) Allow() bool { return b.AllowAt(time.Now()) }

// tokens returns the tokens the bucket holds at t (ns) under set, in
// [0, burst].
func (b *TokenBucket) tokens(set *bucketSetting, t float64) float64 {
	tat := math.Float64frombits(b.tat.Load())
	return clampF(float64(set.burst)-(math.Max(tat, t)-t)/set.t, 0, float64(set.burst))
}

// reset sets the bucket to hold tokens at t (ns) under set; b.mu is held.
func (b *TokenBucket) reset(set *bucketSetting, t, tokens float64) {
	b.set.Store(set)
	b.tat.Store(math.Float64bits(t + (float64(set.burst)-tokens)*set.t))
	if t > math.Float64frombits(b.floor.Load()) {
		b.floor.Store(math.Float64bits(t))
	}
}

func clampF(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

// SetRateAt changes the refill rate from now on: tokens accrued before now
// are credited at the old rate. r must be finite and ≥ 0, or +Inf; on error
// the setting is unchanged.
func (b *TokenBucket) SetRateAt(now time.Time, r float64) error {
	if err := checkRate("rate", r); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.set.Load()
	if cur != nil && cur.rate == r {
		return nil // unchanged: the bucket keeps its state (a static rate re-applied every period)
	}
	t := b.ns(now)
	burst := 1
	tokens := 0.0
	switch {
	case cur == nil:
	case b.inf.Load():
		// Leaving +Inf restarts a full bucket.
		burst, tokens = cur.burst, float64(cur.burst)
	default:
		burst, tokens = cur.burst, b.tokens(cur, t)
	}
	if math.IsInf(r, 1) {
		b.set.Store(newSetting(r, burst))
		b.inf.Store(true)
		return nil
	}
	b.reset(newSetting(r, burst), t, tokens)
	b.inf.Store(false)
	return nil
}

// SetBurstAt changes the bucket capacity from now on. burst must be ≥ 1; on
// error the setting is unchanged. Tokens above a lowered capacity are
// discarded.
func (b *TokenBucket) SetBurstAt(now time.Time, burst int) error {
	if err := checkBurst(burst); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.set.Load()
	if cur == nil {
		b.reset(newSetting(0, burst), b.ns(now), 0)
		return nil
	}
	if cur.burst == burst {
		return nil
	}
	if b.inf.Load() {
		b.set.Store(newSetting(cur.rate, burst))
		return nil
	}
	t := b.ns(now)
	b.reset(newSetting(cur.rate, burst), t, math.Min(b.tokens(cur, t), float64(burst)))
	return nil
}

// Rate returns the refill rate in tokens per second (+Inf: admit all).
func (b *TokenBucket) Rate() float64 {
	if set := b.set.Load(); set != nil {
		return set.rate
	}
	return 0
}

// Burst returns the bucket capacity in tokens.
func (b *TokenBucket) Burst() int {
	if set := b.set.Load(); set != nil {
		return set.burst
	}
	return 0
}

// TokensAt returns the number of tokens the bucket holds at now, in
// [0, Burst] (up to floating-point rounding), or +Inf when the rate is +Inf.
// It does not take a token.
func (b *TokenBucket) TokensAt(now time.Time) float64 {
	if b.inf.Load() {
		return math.Inf(1)
	}
	set := b.set.Load()
	if set == nil {
		return 0
	}
	return b.tokens(set, b.ns(now))
}
