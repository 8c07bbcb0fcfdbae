// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"math"
	"testing"
)

func TestClassBuckets(t *testing.T) {
	c, err := NewClassBuckets([]float64{10, 5}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 2 {
		t.Fatalf("Len() = %d, want 2", c.Len())
	}
	steps := []struct {
		at, class, n, admit int
	}{
		{0, 0, 3, 2},    // class 0: burst 2
		{0, 1, 1, 1},    // class 1 has its own bucket
		{0, 7, 2, 1},    // out of range high → class 1 (1 token left)
		{0, -1, 1, 0},   // out of range low → class 1 (empty)
		{100, 0, 2, 1},  // 10/s: one token per 100 ms
		{100, 1, 1, 0},  // 5/s: 0.5 tokens
		{200, 99, 2, 1}, // class 1 got 1.0 token at 200 ms
	}
	for i, s := range steps {
		got := 0
		for range s.n {
			if c.AllowAt(ms(s.at), s.class) {
				got++
			}
		}
		if got != s.admit {
			t.Fatalf("step %d (class %d at %dms): admitted %d of %d, want %d", i, s.class, s.at, got, s.n, s.admit)
		}
	}

	// Rates mid-stream: class 1 raised to +Inf, class 0 stopped.
	if err := c.SetRatesAt(ms(200), []float64{0, math.Inf(1)}); err != nil {
		t.Fatal(err)
	}
	// Class 0 accrued one token between 100 and 200 ms, then nothing more.
	if !c.AllowAt(ms(10_000), 0) || c.AllowAt(ms(20_000), 0) {
		t.Error("class 0 at rate 0: want its one remaining token, then refusals")
	}
	for range 1000 {
		if !c.AllowAt(ms(10_000), 5) {
			t.Fatal("lowest class at +Inf refused")
		}
	}
	rates := c.Rates()
	if rates[0] != 0 || !math.IsInf(rates[1], 1) {
		t.Fatalf("Rates() = %v, want [0 +Inf]", rates)
	}
	rates[0] = 42
	if c.Rates()[0] != 0 {
		t.Error("Rates() does not return a copy")
	}
	if c.Bucket(-3) != c.Bucket(1) || c.Bucket(0).Burst() != 2 {
		t.Error("Bucket: out-of-range class should map to the lowest class")
	}
}

func TestClassBucketsInvalid(t *testing.T) {
	tests := []struct {
		name         string
		rates        []float64
		burst        int
		field, value string
	}{
		{"no classes", nil, 5, "rates", "none"},
		{"bad burst", []float64{1}, 0, "burst", "0"},
		{"negative rate", []float64{1, -2}, 5, "rates[1]", "-2"},
		{"NaN rate", []float64{math.NaN()}, 5, "rates[0]", "NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewClassBuckets(tt.rates, tt.burst)
			if err == nil {
				t.Fatal("no error")
			}
			checkErr(t, err, tt.field, tt.value)
		})
	}

	c, err := NewClassBuckets([]float64{3, 2, 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		rates        []float64
		field, value string
	}{
		{[]float64{1, 2}, "rates", "2 entries"},
		{[]float64{4, 5, -6}, "rates[2]", "-6"},
	} {
		err := c.SetRatesAt(t0, bad.rates)
		if err == nil {
			t.Fatalf("SetRatesAt(%v): no error", bad.rates)
		}
		checkErr(t, err, bad.field, bad.value)
		if r := c.Rates(); r[0] != 3 || r[1] != 2 || r[2] != 1 {
			t.Fatalf("a rejected SetRatesAt changed the rates to %v", r)
		}
	}

	var zero ClassBuckets
	if zero.AllowAt(t0, 0) || zero.Len() != 0 || zero.Bucket(0) != nil {
		t.Error("zero ClassBuckets must refuse and have no buckets")
	}
}
