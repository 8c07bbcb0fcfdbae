// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Segment is one piece of a Schedule: from Start (an offset from the start
// of the run) until the next segment's Start, the value is Rate.
type Segment struct {
	// Start is the offset at which the segment begins; ≥ 0.
	Start time.Duration
	// Rate is the value in force: requests per second for arrival
	// schedules, a number of users for user schedules; finite and ≥ 0.
	Rate float64
}

// Schedule is a piecewise-constant, non-negative function of the elapsed
// time of a run. Before the first segment's Start the value is 0; the last
// segment lasts forever. The zero value is 0 everywhere.
//
// A Schedule is immutable and safe for concurrent use.
type Schedule struct {
	segs []Segment
}

// NewSchedule returns a schedule made of the given segments, which must
// have strictly increasing, non-negative Start offsets and finite,
// non-negative rates.
func NewSchedule(segs ...Segment) (Schedule, error) {
	for i, sg := range segs {
		if sg.Start < 0 {
			return Schedule{}, fmt.Errorf("schedule segment %d: start %v is negative", i+1, sg.Start)
		}
		if !finite(sg.Rate) || sg.Rate < 0 {
			return Schedule{}, fmt.Errorf("schedule segment %d: rate %v must be a finite number ≥ 0", i+1, sg.Rate)
		}
		if i > 0 && sg.Start <= segs[i-1].Start {
			return Schedule{}, fmt.Errorf("schedule segment %d: start %v is not after the previous start %v", i+1, sg.Start, segs[i-1].Start)
		}
	}
	return Schedule{segs: append([]Segment(nil), segs...)}, nil
}

// ConstantSchedule returns the schedule that is rate at every offset; rate
// must be finite and ≥ 0.
func ConstantSchedule(rate float64) (Schedule, error) {
	return NewSchedule(Segment{Start: 0, Rate: rate})
}

// ParseSchedule parses "OFFSET:RATE,OFFSET:RATE,…", for example
// "0s:300,50s:850,70s:300": the rate is 300 from 0 s, 850 from 50 s and 300
// again from 70 s on. Offsets are Go durations or plain numbers of seconds,
// strictly increasing and ≥ 0; rates are plain numbers ≥ 0. A lone number
// such as "300" is a constant schedule. Errors name the offending entry.
func ParseSchedule(s string) (Schedule, error) {
	str := strings.TrimSpace(s)
	if str == "" {
		return Schedule{}, fmt.Errorf("schedule %q: empty: expected RATE or OFFSET:RATE,… such as 0s:300,50s:850", s)
	}
	if !strings.Contains(str, ":") && !strings.Contains(str, ",") {
		v, err := strconv.ParseFloat(str, 64)
		if err != nil || !finite(v) || v < 0 {
			return Schedule{}, fmt.Errorf("schedule %q: expected a rate ≥ 0 such as 300, or OFFSET:RATE,… such as 0s:300,50s:850", s)
		}
		return ConstantSchedule(v)
	}
	var segs []Segment
	for i, raw := range strings.Split(str, ",") {
		entry := strings.TrimSpace(raw)
		fail := func(format string, args ...any) error {
			return fmt.Errorf("schedule %q: entry %d %q: %s", s, i+1, entry, fmt.Sprintf(format, args...))
		}
		off, rate, ok := strings.Cut(entry, ":")
		if !ok {
			return Schedule{}, fail("expected OFFSET:RATE such as 50s:850")
		}
		off, rate = strings.TrimSpace(off), strings.TrimSpace(rate)
		sec, err := parseSeconds(off)
		if err != nil || !finite(sec) {
			return Schedule{}, fail("offset %q: expected a duration such as 50s", off)
		}
		if sec < 0 {
			return Schedule{}, fail("offset %q is negative", off)
		}
		if sec >= float64(math.MaxInt64)/1e9 {
			return Schedule{}, fail("offset %q is too large (max about 292 years)", off)
		}
		start := time.Duration(math.Round(sec * 1e9))
		v, err := strconv.ParseFloat(rate, 64)
		if err != nil || !finite(v) || v < 0 {
			return Schedule{}, fail("rate %q: expected a number ≥ 0", rate)
		}
		if n := len(segs); n > 0 && start <= segs[n-1].Start {
			return Schedule{}, fail("offset %v is not after the previous offset %v (entries must be sorted)", start, segs[n-1].Start)
		}
		segs = append(segs, Segment{Start: start, Rate: v})
	}
	return Schedule{segs: segs}, nil
}

// index returns the index of the segment in force at elapsed, or −1 before
// the first segment.
func (s Schedule) index(elapsed time.Duration) int {
	return sort.Search(len(s.segs), func(i int) bool { return s.segs[i].Start > elapsed }) - 1
}

// At returns the value in force at elapsed. A segment's value applies from
// its Start inclusive.
func (s Schedule) At(elapsed time.Duration) float64 {
	i := s.index(elapsed)
	if i < 0 {
		return 0
	}
	return s.segs[i].Rate
}

// NextChange returns the Start of the first segment that begins strictly
// after elapsed, and false when there is none.
func (s Schedule) NextChange(elapsed time.Duration) (time.Duration, bool) {
	i := s.index(elapsed) + 1
	if i >= len(s.segs) {
		return 0, false
	}
	return s.segs[i].Start, true
}

// Segments returns a copy of the segments.
func (s Schedule) Segments() []Segment { return append([]Segment(nil), s.segs...) }

// Max returns the largest value the schedule takes.
func (s Schedule) Max() float64 {
	m := 0.0
	for _, sg := range s.segs {
		m = math.Max(m, sg.Rate)
	}
	return m
}

// String returns the schedule in the syntax ParseSchedule reads.
func (s Schedule) String() string {
	if len(s.segs) == 0 {
		return "0"
	}
	parts := make([]string, len(s.segs))
	for i, sg := range s.segs {
		parts[i] = sg.Start.String() + ":" + num(sg.Rate)
	}
	return strings.Join(parts, ",")
}

// advance returns the offset T > t at which ∫ₜᵀ rate(s) ds reaches amount
// (≥ 0), or Never when the schedule's rate stays 0 before that. The result
// is rounded to the nanosecond and is at least t + 1ns.
func (s Schedule) advance(t time.Duration, amount float64) time.Duration {
	if t >= Never-1 {
		return Never
	}
	cur := t
	for {
		i := s.index(cur)
		rate := 0.0
		if i >= 0 {
			rate = s.segs[i].Rate
		}
		end, more := Never, false
		if i+1 < len(s.segs) {
			end, more = s.segs[i+1].Start, true
		}
		if rate > 0 {
			need := amount / rate // seconds
			avail := math.Inf(1)
			if more {
				avail = (end - cur).Seconds()
			}
			if need <= avail {
				return addSeconds(t, cur, need)
			}
			amount = math.Max(0, amount-avail*rate)
		} else if !more {
			return Never
		}
		cur = end
	}
}

// addSeconds returns cur + sec rounded to the nanosecond, saturating at
// Never, and at least t + 1ns.
func addSeconds(t, cur time.Duration, sec float64) time.Duration {
	ns := math.Round(sec * 1e9)
	if ns >= float64(Never-cur) {
		return Never
	}
	next := cur + time.Duration(ns)
	if next <= t {
		next = t + 1
	}
	return next
}
