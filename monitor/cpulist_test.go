// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"slices"
	"strconv"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"0,2-3", []int{0, 2, 3}},
		{"0-3\n", []int{0, 1, 2, 3}},
		{" 1 , 3-4 ", []int{1, 3, 4}},
		{"3,1,2-3", []int{1, 2, 3}},
		{"5-5", []int{5}},
		{"4-6,0-5", []int{0, 1, 2, 3, 4, 5, 6}},
		{"0-1,0-1,1", []int{0, 1}},
		{"65535", []int{65535}},
		{"007", []int{7}},
	}
	for _, tc := range tests {
		got, err := ParseCPUList(tc.in)
		if err != nil {
			t.Errorf("ParseCPUList(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseCPUListErrors(t *testing.T) {
	// The whole input is the bad token.
	for _, in := range []string{"a", "3-1", "1-", "-1", "0-7:2", "65536", "0-99999999999999999999", "+1", "1 2", "1-2-3"} {
		_, err := ParseCPUList(in)
		wantErr(t, "ParseCPUList("+in+")", err, "bad token "+strconv.Quote(in))
	}
	// An empty token, between two commas or after the last.
	for _, in := range []string{"0,,1", "0,"} {
		_, err := ParseCPUList(in)
		wantErr(t, "ParseCPUList("+in+")", err, `bad token ""`)
	}
	_, err := ParseCPUList(" \n")
	wantErr(t, "blank list", err, "empty CPU list")
}

func TestFormatCPUList(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "0,2-3": "0,2-3", "0-3,5,7-8": "0-3,5,7-8", "1,3,5": "1,3,5"} {
		cpus, err := ParseCPUList(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := formatCPUList(cpus); got != want {
			t.Errorf("formatCPUList(%v) = %q, want %q", cpus, got, want)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0", "0,2-3", "0-3\n", " 1 , 3-4 ", "3-1", "", "0-7:2", "65535", "0-65535", "a,b", "1--2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			if cpus != nil {
				t.Fatalf("ParseCPUList(%q) returned %v with error %v", s, cpus, err)
			}
			return
		}
		if len(cpus) == 0 || len(cpus) > MaxCPU+1 {
			t.Fatalf("ParseCPUList(%q) returned %d CPUs", s, len(cpus))
		}
		for i, c := range cpus {
			if c < 0 || c > MaxCPU || (i > 0 && c <= cpus[i-1]) {
				t.Fatalf("ParseCPUList(%q) = %v: not ascending within [0, %d]", s, cpus, MaxCPU)
			}
		}
		// The compact form parses back to the same CPUs.
		again, err := ParseCPUList(formatCPUList(cpus))
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("round trip of %q via %q = %v, %v; want %v", s, formatCPUList(cpus), again, err, cpus)
		}
	})
}
