// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestParseTimeout(t *testing.T) {
	for _, c := range []struct {
		in string
		d  time.Duration
		ok bool
	}{
		{"250m", 250 * time.Millisecond, true},
		{"2S", 2 * time.Second, true},
		{"1H", time.Hour, true},
		{"3M", 3 * time.Minute, true},
		{"7u", 7 * time.Microsecond, true},
		{"99999999n", 99999999, true},
		{"0n", 0, true},
		{"0S", 0, true},
		{"-5S", -5 * time.Second, true},
		{"00012m", 12 * time.Millisecond, true},
		// Huge values saturate (the hop clamps them to its bounds).
		{"99999999999999999999999H", math.MaxInt64, true},
		{"9223372036854775807n", math.MaxInt64, true},
		{"9223372036854775808n", math.MaxInt64, true},
		{"3000000H", math.MaxInt64, true},
		{"-99999999999999999999S", -math.MaxInt64, true},
		// Malformed.
		{"", 0, false},
		{"S", 0, false},
		{"-", 0, false},
		{"-S", 0, false},
		{"5", 0, false},
		{"5s", 0, false},
		{"5ms", 0, false},
		{"1.5S", 0, false},
		{" 5S", 0, false},
		{"5S ", 0, false},
		{"+5S", 0, false},
		{"--5S", 0, false},
		{"5 S", 0, false},
		{"0x10S", 0, false},
		{"٣S", 0, false},
	} {
		d, ok := sluice.ParseTimeout(c.in)
		if d != c.d || ok != c.ok {
			t.Errorf("ParseTimeout(%q) = %v, %v; want %v, %v", c.in, d, ok, c.d, c.ok)
		}
	}
}

func TestFormatTimeout(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0n"},
		{-time.Second, "0n"},
		{1, "1n"},
		{99999999, "99999999n"},
		{100 * time.Millisecond, "100000u"},
		{250 * time.Millisecond, "250000u"},
		{150 * time.Second, "150000m"},
		{100*time.Second - 1, "99999999u"}, {100000*time.Second - 1, "99999999m"},
		{30 * time.Hour, "108000S"},
		{math.MaxInt64, "2562047H"},
	} {
		if got := sluice.FormatTimeout(c.d); got != c.want {
			t.Errorf("FormatTimeout(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// FuzzParseTimeout: no input panics; whatever parses is what
// FormatTimeout writes for it (rounded down to 8 digits), and whatever
// FormatTimeout writes parses back to at most the duration it was given.
func FuzzParseTimeout(f *testing.F) {
	for _, s := range []string{"250m", "2S", "-5S", "99999999H", "0n", "1", "S", "", "9223372036854775808n", "1.5S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := sluice.ParseTimeout(s)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseTimeout(%q) = %v with ok false", s, d)
			}
			return
		}
		body := strings.TrimPrefix(s, "-")
		if len(body) < 2 || strings.Trim(body[:len(body)-1], "0123456789") != "" {
			t.Fatalf("ParseTimeout(%q) accepted a malformed value", s)
		}
		if strings.HasPrefix(s, "-") != (d < 0) && d != 0 {
			t.Fatalf("ParseTimeout(%q) = %v: wrong sign", s, d)
		}
		if d <= 0 {
			return
		}
		enc := sluice.FormatTimeout(d)
		if len(enc) > 9 {
			t.Fatalf("FormatTimeout(%v) = %q: more than 8 digits", d, enc)
		}
		back, ok := sluice.ParseTimeout(enc)
		if !ok || back > d || float64(d-back) > float64(d)*1e-5+1 {
			t.Fatalf("FormatTimeout(%v) = %q parses back as %v, %v", d, enc, back, ok)
		}
	})
}

func TestPriorityClass(t *testing.T) {
	classes := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("c%d", i)
		}
		return out
	}
	for _, c := range []struct {
		n    int
		want [4]int // CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE
	}{
		{1, [4]int{0, 0, 0, 0}},
		{2, [4]int{0, 0, 1, 1}},
		{3, [4]int{0, 1, 1, 2}},
		{4, [4]int{0, 1, 2, 3}},
		{5, [4]int{0, 1, 3, 4}},
		{7, [4]int{0, 2, 4, 6}},
	} {
		for r, p := range []string{sluice.CriticalPlus, sluice.Critical, sluice.SheddablePlus, sluice.Sheddable} {
			got, ok := sluice.PriorityClass(p, classes(c.n))
			if !ok || got != c.want[r] {
				t.Errorf("%d classes: %s = %d, %v; want %d", c.n, p, got, ok, c.want[r])
			}
		}
	}
	order := []string{"gold", "CRITICAL", "bronze"}
	for _, c := range []struct {
		p    string
		want int
		ok   bool
	}{
		{"gold", 0, true}, {"bronze", 2, true}, {"Gold", 0, false}, {"silver", 0, false}, {"", 0, false},
		{"CRITICAL", 1, true},      // the class name wins over the criticality of that spelling
		{"critical_plus", 0, true}, // criticalities in any case
		{"sheddable", 2, true},
		{"SHEDDABLE-PLUS", 0, false},
	} {
		got, ok := sluice.PriorityClass(c.p, order)
		if got != c.want || ok != c.ok {
			t.Errorf("PriorityClass(%q) = %d, %v; want %d, %v", c.p, got, ok, c.want, c.ok)
		}
	}
	if _, ok := sluice.PriorityClass(sluice.Critical, nil); ok {
		t.Error("no classes: a criticality mapped")
	}
}

func TestValidHopValues(t *testing.T) {
	for _, c := range []struct {
		p  string
		ok bool
	}{{"gold", true}, {"CRITICAL_PLUS", true}, {"a.b-c_d9", true}, {"", false}, {"a b", false}, {"gold,bronze", false},
		{"é", false}, {strings.Repeat("x", sluice.MaxPriorityBytes), true}, {strings.Repeat("x", sluice.MaxPriorityBytes+1), false}} {
		if got := sluice.ValidPriority(c.p); got != c.ok {
			t.Errorf("ValidPriority(%q) = %v", c.p, got)
		}
	}
	for _, c := range []struct {
		t  string
		ok bool
	}{{"acme", true}, {"tenant-7", true}, {"a.b~c!", true}, {"", false}, {"a b", false}, {"a,b", false}, {"a\x00", false},
		{"\"x\"", false}, {strings.Repeat("t", sluice.MaxTenantBytes), true}, {strings.Repeat("t", sluice.MaxTenantBytes+1), false}} {
		if got := sluice.ValidTenant(c.t); got != c.ok {
			t.Errorf("ValidTenant(%q) = %v", c.t, got)
		}
	}
}

// FuzzHopValues: no value panics the validators or the class mapping, and
// a priority that maps names a class or a criticality.
func FuzzHopValues(f *testing.F) {
	for _, s := range []string{"gold", "CRITICAL", "sheddable_plus", "", "a b", "\xff", strings.Repeat("z", 200)} {
		f.Add(s)
	}
	order := []string{"gold", "silver", "bronze"}
	f.Fuzz(func(t *testing.T, s string) {
		_ = sluice.ValidTenant(s)
		valid := sluice.ValidPriority(s)
		c, ok := sluice.PriorityClass(s, order)
		if ok && (c < 0 || c >= len(order) || !valid) {
			t.Fatalf("PriorityClass(%q) = %d, %v (valid %v)", s, c, ok, valid)
		}
	})
}

func TestHopContext(t *testing.T) {
	ctx := context.Background()
	if h := sluice.HopFrom(ctx); h != (sluice.Hop{}) {
		t.Fatalf("empty context carries %+v", h)
	}
	ctx = sluice.WithHop(ctx, sluice.Hop{Priority: "gold", Tenant: "acme"})
	ctx = sluice.WithQuality(ctx, 0.5) // another value on top
	if h := sluice.HopFrom(ctx); h.Priority != "gold" || h.Tenant != "acme" {
		t.Fatalf("HopFrom = %+v", h)
	}
	if q := sluice.QualityFrom(ctx); q != 0.5 {
		t.Fatalf("QualityFrom = %v under a hop", q)
	}
	if n := testing.AllocsPerRun(100, func() { _ = sluice.HopFrom(ctx) }); n != 0 {
		t.Fatalf("HopFrom allocates %v times", n)
	}
}

func ExampleWithHop() {
	ctx := sluice.WithHop(context.Background(), sluice.Hop{Priority: sluice.Critical, Tenant: "acme"})
	ctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	// sluice's client side (package client) stamps these on every call
	// made with ctx: X-Sluice-Priority, X-Sluice-Tenant and the time left
	// in X-Sluice-Timeout.
	h := sluice.HopFrom(ctx)
	fmt.Println(h.Priority, h.Tenant, sluice.FormatTimeout(250*time.Millisecond))
	// Output: CRITICAL acme 250000u
}
