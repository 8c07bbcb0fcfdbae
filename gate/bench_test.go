// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The Admission benchmarks measure the per-request cost of each gate on the
// hot path. Budget: ≤ 100 ns/op and 0 allocs/op under b.RunParallel.

// BenchmarkAdmissionTokenBucket is the token bucket under overload, the
// regime where its per-request cost matters: 1000 admissions per second
// offered millions of requests per second, so nearly every call is a
// refusal. Each op reads the clock, as the proxy does.
func BenchmarkAdmissionTokenBucket(b *testing.B) { benchTokenBucket(b, 1000, 100, true) }

// BenchmarkAdmissionTokenBucketAdmitAll is the worst case: a rate that
// never binds, so every call is an admission through rate.Limiter's mutex.
func BenchmarkAdmissionTokenBucketAdmitAll(b *testing.B) { benchTokenBucket(b, 1e12, 1000, true) }

func BenchmarkAdmissionTokenBucketSerial(b *testing.B) { benchTokenBucket(b, 1000, 100, false) }

func BenchmarkAdmissionTokenBucketAdmitAllSerial(b *testing.B) {
	benchTokenBucket(b, 1e12, 1000, false)
}

// benchTokenBucket measures AllowAt(time.Now()) on a bucket of rate and
// burst, from every core (parallel) or from one goroutine.
func benchTokenBucket(b *testing.B, rate float64, burst int, parallel bool) {
	tb := newBucket(b, rate, burst)
	b.ReportAllocs()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tb.AllowAt(time.Now())
			}
		})
		return
	}
	for b.Loop() {
		tb.AllowAt(time.Now())
	}
}

// BenchmarkClockNow is the floor of the token-bucket figures: the cost of
// the time.Now call each of them makes per op.
func BenchmarkClockNow(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = time.Now()
		}
	})
}

func BenchmarkAdmissionDropper(b *testing.B) { benchDropper(b, true) }

func BenchmarkAdmissionDropperSerial(b *testing.B) { benchDropper(b, false) }

// benchDropper measures Admit at a drop probability of 0.3, from every
// core (parallel) or from one goroutine.
func benchDropper(b *testing.B, parallel bool) {
	d := NewDropper(nil)
	if err := d.SetProbability(0.3); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				d.Admit()
			}
		})
		return
	}
	for b.Loop() {
		d.Admit()
	}
}

func BenchmarkAdmissionConcurrency(b *testing.B) {
	l := benchLimiter(b, 1<<20)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !l.TryAcquire() {
				b.Error("TryAcquire failed with free slots")
				return
			}
			l.Release()
		}
	})
}

func BenchmarkAdmissionConcurrencyAcquire(b *testing.B) {
	l := benchLimiter(b, 1<<20)
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.Acquire(ctx, 0); err != nil {
				b.Error(err)
				return
			}
			l.Release()
		}
	})
}

func BenchmarkAdmissionConcurrencySerial(b *testing.B) {
	l := benchLimiter(b, 8)
	for b.Loop() {
		l.TryAcquire()
		l.Release()
	}
}

// benchLimiter returns a concurrency limiter of limit requests in flight
// (and a queue of 100) for a benchmark that reports its allocations.
func benchLimiter(b *testing.B, limit int) *Limiter {
	l, err := NewLimiter(limit, 100, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	return l
}

func BenchmarkSlotsArriveRelease(b *testing.B) {
	// Steady state of a saturated Slots: one arrival queues, one release
	// admits it. No allocation once the ring has grown.
	s, err := NewSlots[int](4, 64)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	for i := range 4 {
		s.Arrive(t0, i, time.Time{})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s.Arrive(t0, i, t0.Add(time.Hour))
		s.Release(t0)
	}
}

// BenchmarkSlotsHeldQueue is the slot share's worst case (SetHold): a
// queue of waiters that are all held (a costly tenant at its share) and
// a free slot kept for the others; an arrival that is not held checks
// every waiter before it takes the slot (onlyHeld), and its release
// checks them again for one to grant (minTagFree). Both are linear in
// the queue, as fair queueing's grant (minTag) already is. Reported per
// arrival and release, with n waiters.
func BenchmarkSlotsHeldQueue(b *testing.B) {
	for _, n := range []int{16, 128, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := NewSlots[int](2, n+1)
			if err != nil {
				b.Fatal(err)
			}
			s.SetFair(true)
			held := map[bool]bool{true: true}
			s.SetHold(func(w int) bool { return held[w < 0] })
			t0 := time.Unix(0, 0)
			if !s.TryAdmit() {
				b.Fatal("first slot refused")
			}
			for i := range n {
				if o, _, _ := s.ArriveTagged(t0, -1-i, 0, float64(i), time.Time{}); o != Queued {
					b.Fatalf("held waiter %d: %v", i, o)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if o, _, _ := s.ArriveTagged(t0, 1, 0, 0, time.Time{}); o != Admitted {
					b.Fatalf("arrival behind held waiters: %v", o)
				}
				if _, ok := s.Release(t0); ok {
					b.Fatal("a held waiter was granted")
				}
			}
		})
	}
}
