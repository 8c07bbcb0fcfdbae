// SPDX-License-Identifier: Apache-2.0

// Package testclock holds the instant and the duration helper the lab's
// tests of controllers and queues write their scripted timelines with:
// calls and updates at T0.Add(Ms(n)), driven by hand, not by a clock.
package testclock

import "time"

// T0 is the instant every scripted timeline starts at: 1 January 2026,
// 00:00 UTC.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Ms returns n milliseconds as a duration; n may have a fraction (Ms(0.5)
// is 500µs).
func Ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
