package stage

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
)

// autoStage is a stage under auto with a limit far above what the
// benchmark holds, so every Enter finds a free slot.
func autoStage(b *testing.B, limit float64) *Stage {
	b.Helper()
	cfg := control.DefaultAutoConfig()
	cfg.InitialLimit, cfg.MaxLimit = limit, limit
	s, err := New(Options{Name: "b", Controller: &cfg}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkAdmissionAuto is auto's admission decision and the end of the
// request (Enter + Finish) on a free slot: the per-request cost of the
// default mode.
func BenchmarkAdmissionAuto(b *testing.B) {
	s := autoStage(b, 1e4)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, err := s.Enter(ctx, 0)
			if err == nil {
				tk.Done(true)
			}
		}
	})
}

// BenchmarkAdmissionAutoSerial is the same on one goroutine.
func BenchmarkAdmissionAutoSerial(b *testing.B) {
	s := autoStage(b, 1e4)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tk, err := s.Enter(ctx, 0)
		if err == nil {
			tk.Done(true)
		}
	}
}

// BenchmarkRejectionAuto is auto's rejection of a request that finds no
// slot and no room to wait (its predicted wait is over the SLO budget).
func BenchmarkRejectionAuto(b *testing.B) {
	s := autoStage(b, 1)
	ctx := context.Background()
	held, err := s.Enter(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer held.Done(true)
	s.conc.mu.Lock()
	s.conc.drain = 1e-6 // any wait is predicted beyond the budget
	s.conc.mu.Unlock()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Enter(ctx, 0); err == nil {
				b.Fatal("admitted")
			}
		}
	})
}

// BenchmarkAdmissionAutoQueued is the wait path: a limit of 1 shared by
// every goroutine, so most requests queue for their slot and are handed
// it by the one before (pooled waiters: no allocation).
func BenchmarkAdmissionAutoQueued(b *testing.B) {
	s := autoStage(b, 1)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, err := s.Enter(ctx, 0)
			if err == nil {
				tk.Done(true)
			}
		}
	})
}
