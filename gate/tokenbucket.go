package gate

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// TokenBucket is an adjustable token bucket: a bucket of capacity Burst
// tokens refilled continuously at Rate tokens per second; each admission
// takes one token, and a request that finds less than one token is refused.
// Over any interval of length T it admits at most Burst + Rate·T requests.
//
// It is a thin wrapper of golang.org/x/time/rate.Limiter that adds
// validation, an explicit +Inf "admit everything" mode, and lock-free reads
// of the current setting. Time is always an argument (AllowAt(now)), so the
// same bucket runs in the simulator's virtual time and in the live proxy.
//
// A rate of 0 admits the tokens left in the bucket and then nothing more. A
// rate of +Inf admits every request; when the rate later returns to a finite
// value the bucket restarts full (Burst tokens at that instant).
//
// The zero value is a bucket with rate 0 and no tokens: it refuses every
// request. Use NewTokenBucket. A TokenBucket is safe for concurrent use by
// multiple goroutines.
//
// Cost: an admission takes the rate.Limiter's mutex. A refusal usually does
// not: when a refusal finds the bucket empty, the bucket records the instant
// the next token is due, and later refusals before that instant are decided
// with one atomic load. This is what keeps the gate cheap under overload,
// where almost every request is refused. For calls with non-decreasing now
// (the simulator) the decisions are exactly those of rate.Limiter alone: the
// recorded instant is conservative and every setter clears it. With rate
// +Inf no lock is taken at all.
type TokenBucket struct {
	mu       sync.Mutex // serialises setters and the refusal slow path
	inf      atomic.Bool
	lim      atomic.Pointer[rate.Limiter] // the bucket while the rate is finite
	rateBits atomic.Uint64                // math.Float64bits of the rate
	burst    atomic.Int64

	// emptyUntil is the instant, in nanoseconds after *base, before which
	// the bucket holds less than one token (noEmptyUntil: unknown). It is
	// written only under mu. base is the first instant seen by the refusal
	// slow path; measuring from it keeps a time.Now reading's monotonic
	// clock, as rate.Limiter does.
	emptyUntil atomic.Int64
	base       atomic.Pointer[time.Time]

	// The fields above are read on every call; the limiter, allocated
	// right after the bucket, has a mutex every admission writes. Padding
	// keeps them off the limiter's cache line (false sharing cost ~30 ns
	// per admission with two cores admitting).
	_ [128]byte
}

const noEmptyUntil = math.MinInt64

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
	b.emptyUntil.Store(noEmptyUntil)
	b.rateBits.Store(math.Float64bits(r))
	b.burst.Store(int64(burst))
	if math.IsInf(r, 1) {
		b.inf.Store(true)
	} else {
		b.lim.Store(rate.NewLimiter(rate.Limit(r), burst))
	}
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

// AllowAt reports whether one request arriving at now is admitted, and if so
// takes a token. A now earlier than a previous call refills nothing.
func (b *TokenBucket) AllowAt(now time.Time) bool {
	if b.inf.Load() {
		return true
	}
	if base := b.base.Load(); base != nil && int64(now.Sub(*base)) < b.emptyUntil.Load() {
		return false
	}
	l := b.lim.Load()
	if l == nil {
		return false
	}
	if l.AllowN(now, 1) {
		return true
	}
	b.noteEmpty(now)
	return false
}

// noteEmpty records when the next token is due after a refusal at now.
// Under mu no setter runs, so the limiter's rate is b.Rate(); admissions by
// other goroutines only delay the true instant, so the recorded one is
// never late.
func (b *TokenBucket) noteEmpty(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lim.Load()
	if b.inf.Load() || l == nil {
		return
	}
	base := b.base.Load()
	if base == nil {
		t := now
		base = &t
		b.base.Store(base)
	}
	r := b.Rate()
	deficit := 1 - l.TokensAt(now)
	if deficit <= 0 {
		return // a token arrived meanwhile
	}
	if r == 0 {
		b.emptyUntil.Store(math.MaxInt64)
		return
	}
	// One nanosecond of margin against rounding differences with
	// rate.Limiter's own arithmetic keeps the instant conservative.
	wait := math.Floor(deficit/r*1e9) - 1
	d := int64(now.Sub(*base))
	if wait < 0 || wait > float64(math.MaxInt64-d) || d == math.MaxInt64 || d == math.MinInt64 {
		return
	}
	b.emptyUntil.Store(d + int64(wait))
}

// Allow is AllowAt(time.Now()), for live callers.
func (b *TokenBucket) Allow() bool { return b.AllowAt(time.Now()) }

// SetRateAt changes the refill rate from now on: tokens accrued before now
// are credited at the old rate. r must be finite and ≥ 0, or +Inf; on error
// the setting is unchanged.
func (b *TokenBucket) SetRateAt(now time.Time, r float64) error {
	if err := checkRate("rate", r); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.emptyUntil.Store(noEmptyUntil)
	switch {
	case math.IsInf(r, 1):
		b.inf.Store(true)
	case b.inf.Load() || b.lim.Load() == nil:
		// Leaving +Inf (or the zero value): start a fresh, full bucket.
		// x/time/rate cannot leave Inf cleanly by itself: advancing an Inf
		// limit over zero elapsed time yields 0·Inf = NaN tokens.
		b.lim.Store(rate.NewLimiter(rate.Limit(r), int(b.burst.Load())))
		b.inf.Store(false)
	default:
		b.lim.Load().SetLimitAt(now, rate.Limit(r))
	}
	b.rateBits.Store(math.Float64bits(r))
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
	defer b.emptyUntil.Store(noEmptyUntil)
	b.burst.Store(int64(burst))
	if l := b.lim.Load(); l != nil && !b.inf.Load() {
		l.SetBurstAt(now, burst)
	}
	return nil
}

// Rate returns the refill rate in tokens per second (+Inf: admit all).
func (b *TokenBucket) Rate() float64 { return math.Float64frombits(b.rateBits.Load()) }

// Burst returns the bucket capacity in tokens.
func (b *TokenBucket) Burst() int { return int(b.burst.Load()) }

// TokensAt returns the number of tokens the bucket holds at now, in
// [0, Burst] (up to floating-point rounding), or +Inf when the rate is +Inf.
// It does not take a token.
func (b *TokenBucket) TokensAt(now time.Time) float64 {
	if b.inf.Load() {
		return math.Inf(1)
	}
	l := b.lim.Load()
	if l == nil {
		return 0
	}
	return l.TokensAt(now)
}
