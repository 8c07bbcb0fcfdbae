// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// seq returns lo..hi milliseconds, shuffled with a fixed seed so that the
// window never sees them in sorted order.
func seqMS(lo, hi int) []time.Duration {
	var s []time.Duration
	for i := lo; i <= hi; i++ {
		s = append(s, ms(i))
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

func TestWindowStats(t *testing.T) {
	var thousand []time.Duration
	for i := 1000; i >= 1; i-- {
		thousand = append(thousand, time.Duration(i)*time.Microsecond)
	}
	tests := []struct {
		name    string
		size    int
		samples []time.Duration
		want    WindowStats
	}{
		{"empty", 10, nil, WindowStats{}},
		{"one sample", 10, []time.Duration{ms(7)},
			WindowStats{Count: 1, Mean: ms(7), P50: ms(7), P90: ms(7), P99: ms(7), Min: ms(7), Max: ms(7)}},
		// 100 samples: p90 is the 90th smallest, p99 the 99th.
		{"1..100 ms", 100, seqMS(1, 100),
			WindowStats{Count: 100, Mean: 50500 * time.Microsecond, P50: ms(50), P90: ms(90), P99: ms(99), Min: ms(1), Max: ms(100)}},
		// 10 samples: p50 = 5th, p90 = 9th, p99 = ceil(9.9) = 10th.
		{"1..10 ms", 100, seqMS(1, 10),
			WindowStats{Count: 10, Mean: 5500 * time.Microsecond, P50: ms(5), P90: ms(9), P99: ms(10), Min: ms(1), Max: ms(10)}},
		// A window of 5 that received 1..8 ms holds 4..8 ms:
		// p50 = ceil(2.5) = 3rd = 6 ms, p90 = ceil(4.5) = 5th = 8 ms.
		{"window 5 after 8 samples", 5, []time.Duration{ms(1), ms(2), ms(3), ms(4), ms(5), ms(6), ms(7), ms(8)},
			WindowStats{Count: 5, Mean: ms(6), P50: ms(6), P90: ms(8), P99: ms(8), Min: ms(4), Max: ms(8)}},
		// Three laps of a window of 4: only 9..12 ms remain.
		{"three laps", 4, []time.Duration{ms(1), ms(2), ms(3), ms(4), ms(5), ms(6), ms(7), ms(8), ms(12), ms(9), ms(11), ms(10)},
			WindowStats{Count: 4, Mean: 10500 * time.Microsecond, P50: ms(10), P90: ms(12), P99: ms(12), Min: ms(9), Max: ms(12)}},
		// 3 samples: p50 = ceil(1.5) = 2nd, p90 = ceil(2.7) = 3rd.
		{"three samples", 10, []time.Duration{ms(30), ms(10), ms(20)},
			WindowStats{Count: 3, Mean: ms(20), P50: ms(20), P90: ms(30), P99: ms(30), Min: ms(10), Max: ms(30)}},
		// Ties: sorted 1,2,3,3; p50 = 2nd, p90 = ceil(3.6) = 4th.
		{"duplicates", 10, []time.Duration{ms(3), ms(1), ms(3), ms(2)},
			WindowStats{Count: 4, Mean: 2250 * time.Microsecond, P50: ms(2), P90: ms(3), P99: ms(3), Min: ms(1), Max: ms(3)}},
		{"negative recorded as zero", 10, []time.Duration{-ms(5), ms(10)},
			WindowStats{Count: 2, Mean: ms(5), P50: 0, P90: ms(10), P99: ms(10), Min: 0, Max: ms(10)}},
		{"1..1000 µs", 1000, thousand,
			WindowStats{Count: 1000, Mean: 500500 * time.Nanosecond, P50: 500 * time.Microsecond, P90: 900 * time.Microsecond, P99: 990 * time.Microsecond, Min: time.Microsecond, Max: time.Millisecond}},
		// Mean rounds to the nearest nanosecond: (1+2)/2 = 1.5 ns → 2 ns.
		{"mean rounding", 10, []time.Duration{1, 2},
			WindowStats{Count: 2, Mean: 2, P50: 1, P90: 2, P99: 2, Min: 1, Max: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWindow(tc.size)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.samples {
				w.Record(s)
			}
			// Every sample counts as recorded, overwritten or not.
			tc.want.Recorded = int64(len(tc.samples))
			if got := w.Recorded(); got != tc.want.Recorded {
				t.Errorf("Recorded() = %d, want %d", got, tc.want.Recorded)
			}
			if got := w.Len(); got != tc.want.Count {
				t.Errorf("Len() = %d, want %d", got, tc.want.Count)
			}
			if got := w.Stats(false); got != tc.want {
				t.Errorf("Stats(false) =\n %+v, want\n %+v", got, tc.want)
			}
			// Stats(false) does not consume the samples.
			if got := w.Stats(true); got != tc.want {
				t.Errorf("second Stats(true) =\n %+v, want\n %+v", got, tc.want)
			}
			if got := w.Stats(false); got != (WindowStats{}) {
				t.Errorf("Stats after reset = %+v, want zero", got)
			}
			if w.Len() != 0 || w.Recorded() != 0 {
				t.Errorf("after reset Len() = %d, Recorded() = %d; want 0, 0", w.Len(), w.Recorded())
			}
		})
	}
}

// refRank is the nearest-rank definition written differently from
// Rank, in integers: the smallest k with k/count ≥ num/den.
func refRank(num, den, count int) int {
	for k := 1; ; k++ {
		if k*den >= num*count {
			return k
		}
	}
}

// TestWindowMatchesReference drives windows of many sizes with random
// samples and resets and compares every Stats with a plain slice model.
func TestWindowMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, size := range []int{1, 2, 3, 5, 7, 10, 64, 100, 101} {
		w, err := NewWindow(size)
		if err != nil {
			t.Fatal(err)
		}
		var model []time.Duration // samples since the last reset
		for step := 0; step < 2000; step++ {
			switch op := r.IntN(20); {
			case op < 17:
				d := time.Duration(r.IntN(50)) * time.Millisecond
				w.Record(d)
				model = append(model, d)
			default:
				reset := op == 19
				held := model[max(0, len(model)-size):]
				got := w.Stats(reset)
				want := WindowStats{Count: len(held), Recorded: int64(len(model))}
				if len(held) > 0 {
					s := slices.Sorted(slices.Values(held))
					var sum time.Duration
					for _, v := range s {
						sum += v
					}
					c := len(s)
					want.Mean = (sum + time.Duration(c)/2) / time.Duration(c)
					want.P50 = s[refRank(1, 2, c)-1]
					want.P90 = s[refRank(9, 10, c)-1]
					want.P99 = s[refRank(99, 100, c)-1]
					want.Min, want.Max = s[0], s[c-1]
				}
				if got != want {
					t.Fatalf("size %d step %d: Stats(%v) = %+v, want %+v", size, step, reset, got, want)
				}
				if reset {
					model = model[:0]
				}
			}
			if got, want := w.Len(), min(len(model), size); got != want {
				t.Fatalf("size %d step %d: Len() = %d, want %d", size, step, got, want)
			}
		}
	}
}

func TestNearestRank(t *testing.T) {
	for count := 1; count <= 3000; count++ {
		for _, q := range [][2]int{{1, 2}, {9, 10}, {99, 100}, {3, 10}, {7, 10}} {
			if got, want := Rank(float64(q[0])/float64(q[1]), count), refRank(q[0], q[1], count); got != want {
				t.Fatalf("Rank(%d/%d, %d) = %d, want %d", q[0], q[1], count, got, want)
			}
		}
	}
}

func TestNewWindowErrors(t *testing.T) {
	for _, n := range []int{0, -1, MaxWindowSize + 1} {
		_, err := NewWindow(n)
		if err == nil {
			t.Fatalf("NewWindow(%d) succeeded", n)
		}
		if !strings.Contains(err.Error(), "window size") {
			t.Errorf("NewWindow(%d) error %q does not name the window size", n, err)
		}
	}
	w, err := NewWindow(3)
	if err != nil || w.Size() != 3 {
		t.Fatalf("NewWindow(3) = %v, %v", w, err)
	}
}

func TestWindowNoAllocs(t *testing.T) {
	w, err := NewWindow(100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range seqMS(1, 150) {
		w.Record(d)
	}
	if a := testing.AllocsPerRun(100, func() { w.Record(ms(3)) }); a != 0 {
		t.Errorf("Record allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { w.Stats(false) }); a != 0 {
		t.Errorf("Stats allocates %v times per call", a)
	}
}

// TestWindowConcurrent records from several goroutines while another
// collects with reset; with a window larger than the total no sample may
// be lost or counted twice.
func TestWindowConcurrent(t *testing.T) {
	const writers, per = 4, 5000
	w, err := NewWindow(writers * per)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range per {
				w.Record(time.Duration(g*per + i))
			}
		})
	}
	done := make(chan struct{})
	var collected int
	var recorded int64
	go func() {
		defer close(done)
		for range 200 {
			st := w.Stats(true)
			collected += st.Count
			recorded += st.Recorded
		}
	}()
	wg.Wait()
	<-done
	st := w.Stats(true)
	collected += st.Count
	recorded += st.Recorded
	if collected != writers*per || recorded != writers*per {
		t.Errorf("collected %d samples (%d recorded), want %d", collected, recorded, writers*per)
	}
}

func BenchmarkRecordWindow(b *testing.B) { benchWindow(b, false) }

func BenchmarkRecordWindowParallel(b *testing.B) { benchWindow(b, true) }

func benchWindow(b *testing.B, parallel bool) {
	w, err := NewWindow(100)
	if err != nil {
		b.Fatal(err)
	}
	benchRecord(b, parallel, w.Record)
}

// benchRecord calls record once per op with a service time rising by 1µs,
// from one goroutine or from every core (each with its own sequence).
func benchRecord(b *testing.B, parallel bool, record func(time.Duration)) {
	b.ReportAllocs()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			var d time.Duration
			for pb.Next() {
				d += time.Microsecond
				record(d)
			}
		})
		return
	}
	var d time.Duration
	for b.Loop() {
		d += time.Microsecond
		record(d)
	}
}

func BenchmarkWindowStats100(b *testing.B) {
	w, err := NewWindow(100)
	if err != nil {
		b.Fatal(err)
	}
	samples := seqMS(1, 100)
	b.ReportAllocs()
	for b.Loop() {
		for _, d := range samples {
			w.Record(d)
		}
		w.Stats(true)
	}
}

// TestRankAndPercentile checks the one nearest-rank rule: k = ⌈p·n⌉ with
// exact products kept exact, and Percentile over floats agreeing with a
// Window's statistics over the same samples.
func TestRankAndPercentile(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		n, k int
	}{
		{0.9, 10, 9}, {0.9, 1, 1}, {0.9, 11, 10}, {0.5, 2, 1}, {0.5, 3, 2},
		{0.99, 100, 99}, {0.99, 101, 100}, {0.9, 1 << 24, 15099495}, {0.7, 10, 7}, {0.3, 10, 3},
		{1, 7, 7}, {1e-9, 5, 1},
	} {
		if k := Rank(tc.p, tc.n); k != tc.k {
			t.Errorf("Rank(%v, %d) = %d, want %d", tc.p, tc.n, k, tc.k)
		}
	}
	w, err := NewWindow(64)
	if err != nil {
		t.Fatal(err)
	}
	var xs []float64
	for i := range 37 {
		d := time.Duration((i*7919)%101+1) * time.Millisecond
		w.Record(d)
		xs = append(xs, float64(d))
	}
	st := w.Stats(false)
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, st.P50}, {0.9, st.P90}, {0.99, st.P99}} {
		if got := Percentile(append(xs, math.NaN()), c.p); got != float64(c.want) {
			t.Errorf("Percentile(%v) = %v, window says %v", c.p, got, c.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 0.9)) || !math.IsNaN(Percentile(xs, 0)) || !math.IsNaN(Percentile(xs, 1.5)) {
		t.Error("Percentile of nothing, or p outside (0, 1], must be NaN")
	}
}
