// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

func newLimiter(t *testing.T, limit, maxQueue int, timeout time.Duration) *Limiter {
	t.Helper()
	l, err := NewLimiter(limit, maxQueue, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// heldLimiter returns a Limiter of one slot, already held, and a queue
// of maxQueue with the given timeout: every Acquire waits or is refused.
func heldLimiter(t *testing.T, maxQueue int, timeout time.Duration) *Limiter {
	t.Helper()
	l := newLimiter(t, 1, maxQueue, timeout)
	if !l.TryAcquire() {
		t.Fatal("the one slot of a new limiter is not free")
	}
	return l
}

// acquireAsync calls l.Acquire(ctx, 0) on a new goroutine and returns the
// channel its result arrives on.
func acquireAsync(ctx context.Context, l *Limiter) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- l.Acquire(ctx, 0) }()
	return errc
}

func checkCounts(t *testing.T, l *Limiter, inFlight, queue int) {
	t.Helper()
	if l.InFlight() != inFlight || l.QueueLen() != queue {
		t.Fatalf("InFlight %d QueueLen %d, want %d and %d", l.InFlight(), l.QueueLen(), inFlight, queue)
	}
}

func TestLimiterInvalid(t *testing.T) {
	for _, c := range []struct {
		limit, maxQueue int
		timeout         time.Duration
		field, value    string
	}{
		{0, 1, time.Second, "limit", "0"},
		{1, -1, time.Second, "maxQueue", "-1"},
		{1, 5, 0, "queueTimeout", "0s"},
		{1, 0, -time.Second, "queueTimeout", "-1s"},
	} {
		_, err := NewLimiter(c.limit, c.maxQueue, c.timeout)
		if err == nil {
			t.Errorf("NewLimiter(%d, %d, %v): no error", c.limit, c.maxQueue, c.timeout)
			continue
		}
		checkErr(t, err, c.field, c.value)
	}
	if _, err := NewLimiter(1, 0, 0); err != nil {
		t.Errorf("maxQueue 0 needs no timeout: %v", err)
	}
	l := newLimiter(t, 1, 1, time.Second)
	if err := l.Acquire(context.Background(), -time.Millisecond); err == nil {
		t.Error("Acquire with a negative timeout: no error")
	} else {
		checkErr(t, err, "timeout", "-1ms")
	}
	if err := l.SetLimit(0); err == nil || l.Limit() != 1 {
		t.Errorf("SetLimit(0) = %v, limit now %d; want an error and limit 1", err, l.Limit())
	}
	checkCounts(t, l, 0, 0)
}

func TestLimiterFastPath(t *testing.T) {
	l := newLimiter(t, 2, 0, 0)
	if !l.TryAcquire() || l.Acquire(context.Background(), 0) != nil {
		t.Fatal("two free slots not taken")
	}
	if l.TryAcquire() {
		t.Fatal("TryAcquire beyond the limit")
	}
	err := l.Acquire(context.Background(), 0)
	if !errors.Is(err, ErrQueueFull) || !errors.Is(err, sluice.ErrRejected) {
		t.Fatalf("Acquire with maxQueue 0 = %v, want ErrQueueFull wrapping sluice.ErrRejected", err)
	}
	checkCounts(t, l, 2, 0)
	l.Release()
	l.Release()
	l.Release() // nothing held: no-op
	checkCounts(t, l, 0, 0)

	allocs := testing.AllocsPerRun(1000, func() {
		if l.TryAcquire() {
			l.Release()
		}
		if l.Acquire(context.Background(), 0) == nil {
			l.Release()
		}
	})
	if allocs != 0 {
		t.Errorf("fast path allocates %v per op, want 0", allocs)
	}
}

func TestLimiterQueueTimeout(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // passed to Acquire
		want    time.Duration // virtual time waited
	}{
		{"default timeout", 0, 100 * time.Millisecond},
		{"per-call timeout", 30 * time.Millisecond, 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := heldLimiter(t, 4, 100*time.Millisecond)
				start := time.Now()
				err := l.Acquire(context.Background(), tt.timeout)
				if !errors.Is(err, ErrQueueTimeout) || !errors.Is(err, sluice.ErrRejected) {
					t.Fatalf("Acquire = %v, want ErrQueueTimeout wrapping sluice.ErrRejected", err)
				}
				if waited := time.Since(start); waited != tt.want {
					t.Errorf("waited %v, want %v", waited, tt.want)
				}
				checkCounts(t, l, 1, 0)
				l.Release()
				checkCounts(t, l, 0, 0)
			})
		})
	}
}

func TestLimiterQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := heldLimiter(t, 2, time.Second)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if err := l.Acquire(context.Background(), 0); err != nil {
					t.Errorf("queued Acquire: %v", err)
					return
				}
				l.Release()
			})
		}
		synctest.Wait()
		checkCounts(t, l, 1, 2)
		if l.TryAcquire() {
			t.Fatal("TryAcquire barged past waiters")
		}
		if err := l.Acquire(context.Background(), 0); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("Acquire on a full queue = %v, want ErrQueueFull", err)
		}
		l.Release()
		wg.Wait()
		checkCounts(t, l, 0, 0)
	})
}

func TestLimiterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := heldLimiter(t, 4, time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		errc := acquireAsync(ctx, l)
		synctest.Wait()
		checkCounts(t, l, 1, 1)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire after cancel = %v, want context.Canceled", err)
		}
		checkCounts(t, l, 1, 0)

		// An already-ended context is not queued.
		if err := l.Acquire(ctx, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with an ended context = %v, want context.Canceled", err)
		}
		// A context deadline before the queue timeout wins.
		dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer dcancel()
		if err := l.Acquire(dctx, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire = %v, want context.DeadlineExceeded", err)
		}
		l.Release()
		checkCounts(t, l, 0, 0)
	})
}

func TestLimiterFIFOWakeOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 6
		l := heldLimiter(t, n, time.Hour)
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if err := l.Acquire(context.Background(), 0); err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				l.Release()
			})
			synctest.Wait() // waiter i is queued before waiter i+1 starts
		}
		checkCounts(t, l, 1, n)
		l.Release()
		wg.Wait()
		for i, got := range order {
			if got != i {
				t.Fatalf("wake order %v, want 0..%d", order, n-1)
			}
		}
		checkCounts(t, l, 0, 0)
	})
}

func TestLimiterSetLimitWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := heldLimiter(t, 10, time.Hour)
		got := make(chan int, 4)
		for i := range 4 {
			go func() {
				if l.Acquire(context.Background(), 0) == nil {
					got <- i
				}
			}()
			synctest.Wait()
		}
		if err := l.SetLimit(3); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// Both wake at once, so their sends may come in either order.
		if a, b := <-got, <-got; min(a, b) != 0 || max(a, b) != 1 || len(got) != 0 {
			t.Errorf("raising the limit to 3 woke %d, %d (+%d more); want 0 and 1", a, b, len(got))
		}
		checkCounts(t, l, 3, 2)
		if err := l.SetLimit(1); err != nil {
			t.Fatal(err)
		}
		l.Release()
		l.Release()
		synctest.Wait()
		checkCounts(t, l, 1, 2) // 3 → 1 held, no waiter woken: limit is 1
		l.Release()
		synctest.Wait()
		if w := <-got; w != 2 {
			t.Fatalf("woke %d, want 2", w)
		}
		l.Release()
		synctest.Wait()
		<-got
		l.Release()
		checkCounts(t, l, 0, 0)
	})
}

// TestLimiterGrantRacesGiveUp makes the slot grant and the cancellation
// meet: with the limiter's lock held, the waiter's context is cancelled and
// its slot granted, in both orders. The waiter is woken by whichever comes
// first; when that is the cancellation, it finds on relocking that it holds
// a slot and must pass it on (here to a second waiter) instead of leaking it.
func TestLimiterGrantRacesGiveUp(t *testing.T) {
	tests := []struct {
		name        string
		cancelFirst bool
		wantErr     error
	}{
		{"cancel then grant", true, context.Canceled},
		{"grant then cancel", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := heldLimiter(t, 2, time.Hour)
				ctx, cancel := context.WithCancel(context.Background())
				errc := acquireAsync(ctx, l)
				synctest.Wait()
				second := acquireAsync(context.Background(), l)
				synctest.Wait()
				checkCounts(t, l, 1, 2)

				l.mu.Lock()
				if tt.cancelFirst {
					cancel()
					l.releaseLocked() // grants the first waiter, which is giving up
				} else {
					l.releaseLocked()
					cancel()
				}
				l.mu.Unlock()

				if err := <-errc; !errors.Is(err, tt.wantErr) {
					t.Fatalf("first Acquire = %v, want %v", err, tt.wantErr)
				}
				if tt.wantErr == nil {
					l.Release()
				}
				if err := <-second; err != nil {
					t.Fatalf("second Acquire = %v, want the passed-on slot", err)
				}
				checkCounts(t, l, 1, 0)
				l.Release()
				checkCounts(t, l, 0, 0)
			})
		})
	}
}

// TestLimiterManyCancels runs many acquires with random timeouts, cancels
// and holding times; afterwards nothing is in flight or queued, and
// synctest.Test itself fails if any goroutine is left blocked.
func TestLimiterManyCancels(t *testing.T) {
	// The outcomes seen over all seeds: each kind must occur in some run.
	// (Per seed is too strict: a timeout and a cancel due at the same
	// instant resolve in either order, so one seed may see no timeout.)
	var totalMu sync.Mutex
	total := map[string]int{}
	for seed := range uint64(5) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			l := newLimiter(t, 4, 40, 50*time.Millisecond)
			type plan struct {
				start, cancelAfter, hold, timeout time.Duration
			}
			plans := make([]plan, 300)
			for i := range plans {
				plans[i] = plan{
					start:       time.Duration(rng.IntN(200)) * time.Millisecond,
					cancelAfter: time.Duration(rng.IntN(80)) * time.Millisecond,
					hold:        time.Duration(1+rng.IntN(10)) * time.Millisecond,
					timeout:     time.Duration(rng.IntN(3)) * 40 * time.Millisecond, // 0 = default
				}
			}
			var mu sync.Mutex
			counts := map[string]int{}
			var wg sync.WaitGroup
			for _, p := range plans {
				wg.Go(func() {
					time.Sleep(p.start)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					stop := time.AfterFunc(p.cancelAfter, cancel)
					defer stop.Stop()
					err := l.Acquire(ctx, p.timeout)
					var kind string
					switch {
					case err == nil:
						kind = "ok"
						if n := l.InFlight(); n > 4 {
							t.Errorf("InFlight %d above limit 4", n)
						}
						time.Sleep(p.hold)
						l.Release()
					case errors.Is(err, ErrQueueTimeout):
						kind = "timeout"
					case errors.Is(err, ErrQueueFull):
						kind = "full"
					case errors.Is(err, context.Canceled):
						kind = "cancel"
					default:
						t.Errorf("Acquire = %v", err)
					}
					mu.Lock()
					counts[kind]++
					mu.Unlock()
				})
			}
			wg.Wait()
			checkCounts(t, l, 0, 0)
			totalMu.Lock()
			for k, n := range counts {
				total[k] += n
			}
			totalMu.Unlock()
		})
	}
	for _, k := range []string{"ok", "timeout", "cancel"} {
		if total[k] == 0 {
			t.Errorf("no %q outcome in any seed (%v); the test lost its coverage", k, total)
		}
	}
}
