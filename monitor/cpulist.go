// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxCPU is the largest CPU number ParseCPUList accepts (the kernel's
// NR_CPUS limit is 8192 today).
const MaxCPU = 1<<16 - 1

// ParseCPUList parses a Linux CPU list such as "0,2-3" or "0-7,16-23\n",
// the format of cpuset.cpus.effective, /sys/devices/system/cpu/online and
// taskset -c. It returns the CPUs in ascending order without duplicates.
//
// Tokens are separated by commas; each is a CPU number or an inclusive
// range lo-hi with lo ≤ hi; spaces around tokens and the whole list are
// ignored. The empty list, empty tokens, numbers above MaxCPU and the
// kernel's stride syntax (0-7:2) are errors that name the bad token.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("monitor: empty CPU list")
	}
	// Collect ranges first and expand them once merged, so that a list
	// repeating a large range cannot make the result grow beyond MaxCPU+1.
	var ranges [][2]int
	for tok := range strings.SplitSeq(s, ",") {
		t := strings.TrimSpace(tok)
		lo, hi, isRange := strings.Cut(t, "-")
		a, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("monitor: CPU list %q: bad token %q: %w", s, t, err)
		}
		b := a
		if isRange {
			if b, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("monitor: CPU list %q: bad token %q: %w", s, t, err)
			}
			if b < a {
				return nil, fmt.Errorf("monitor: CPU list %q: bad token %q: range end %d below start %d", s, t, b, a)
			}
		}
		ranges = append(ranges, [2]int{a, b})
	}
	slices.SortFunc(ranges, func(x, y [2]int) int { return x[0] - y[0] })
	var cpus []int
	next := 0 // smallest CPU not yet in cpus
	for _, r := range ranges {
		for c := max(r[0], next); c <= r[1]; c++ {
			cpus = append(cpus, c)
		}
		next = max(next, r[1]+1)
	}
	return cpus, nil
}

// parseCPU parses one decimal CPU number in [0, MaxCPU].
func parseCPU(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing CPU number")
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a CPU number", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxCPU {
		return 0, fmt.Errorf("CPU number %s above the maximum %d", s, MaxCPU)
	}
	return n, nil
}

// formatCPUList writes cpus (ascending, no duplicates) in the compact
// kernel form, such as "0,2-3".
func formatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
