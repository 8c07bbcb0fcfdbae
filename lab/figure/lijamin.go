// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"math"
	"strings"

	"github.com/sluicehq/sluice/lab/report"
)

// The Li & Jamin figure (lijamin-epochs) reproduces Tables II–IV and
// Figs. 2–3 of "Using measurement-based admission control to provide
// bandwidth shares" (docs/algorithms.md §3): four clients with shares of
// B delayed by the proxy's client shares through the 18 activity epochs of
// Table III. This file is the part both drivers share: the table, the
// clients and their allocations, the shares' analysis over epochs 17–18,
// and the paper's expectations.

// LiJaminTable3 is Table III: which of clients A–D are active in each of
// the 18 epochs.
var LiJaminTable3 = [18][4]bool{
	{true, true, true, true},    // 1
	{true, true, true, true},    // 2
	{false, true, true, true},   // 3
	{true, false, true, true},   // 4
	{false, false, true, true},  // 5
	{true, true, false, true},   // 6
	{false, true, false, true},  // 7
	{true, false, false, true},  // 8
	{false, false, false, true}, // 9
	{true, true, true, false},   // 10
	{false, true, true, false},  // 11
	{true, false, true, false},  // 12
	{false, false, true, false}, // 13
	{true, true, false, false},  // 14
	{false, true, false, false}, // 15
	{true, false, false, false}, // 16
	{true, true, true, true},    // 17
	{true, true, true, true},    // 18
}

// LiJaminClients are the clients' names, A–D.
var LiJaminClients = []string{"a", "b", "c", "d"}

// LiJaminShares are the clients' allocations in percent of B (Table II).
var LiJaminShares = []float64{10, 20, 30, 40}

// LiJaminShareMetrics sets Table IV's metrics from the bytes each client
// received over epochs 17–18, against its allocation (percent of B): its
// share share_X_percent of the total, allocation_error =
// √Σ(allocation/Σallocations − share)², shares_ordered (1 when the shares
// are ordered like the allocations) and share_error_points_max (the
// largest distance of a share from its allocation, in points).
func LiJaminShareMetrics(s *report.Summary, bytes []float64, alloc []float64) {
	total, sumAlloc := 0.0, 0.0
	for i := range bytes {
		total += bytes[i]
		sumAlloc += alloc[i]
	}
	sq, worst, ordered := 0.0, 0.0, 1.0
	for i, n := range LiJaminClients[:len(bytes)] {
		actual := ratio(bytes[i], total)
		target := alloc[i] / sumAlloc
		sq += (target - actual) * (target - actual)
		s.Set("share_"+n+"_percent", 100*actual)
		worst = math.Max(worst, math.Abs(100*actual-alloc[i]))
		if i > 0 && !(ratio(bytes[i-1], total) < actual) {
			ordered = 0
		}
	}
	s.Set("allocation_error", math.Sqrt(sq))
	s.Set("shares_ordered", ordered)
	s.Set("share_error_points_max", worst)
}

// LiJaminChecks are the expectations of Tables II–IV.
func LiJaminChecks(s *report.Summary) []Check {
	return []Check{
		AtMost(s, "The shares over epochs 17–18 match the allocations within the paper's own allocation error: √Σ(target − actual)² ≤ 0.0190 (paper Table IV)",
			"allocation_error", 0.0190),
		Within(s, "The shares are ordered like the allocations, A < B < C < D (paper Table IV)", "shares_ordered", 1, 1),
		AtMost(s, "Every client is within 2 percentage points of its allocation over epochs 17–18 (the proxy's documented accuracy, docs/config.md)",
			"share_error_points_max", 2),
		Within(s, "With all four clients busy the total stays close to B: within ±10 % over epochs 17–18 (paper: total close to B)",
			"total_bw_ratio_17_18", 0.9, 1.1),
		Within(s, "Idle clients' bandwidth goes to the active ones: every epoch with two or more active clients (all asking more than B together) delivers between 0.65 B and 1.1 B (simulator's band)",
			"total_bw_ratio_epoch_min", 0.65, 1.1),
		AtMost(s, "… and no such epoch delivers more than 1.1 B", "total_bw_ratio_epoch_max", 1.1),
	}
}

// LiJaminActive returns the active clients of a row of Table III as
// letters ("ABD"), "-" for none.
func LiJaminActive(a [4]bool) string {
	var b strings.Builder
	for i, on := range a {
		if on {
			b.WriteString(strings.ToUpper(LiJaminClients[i]))
		}
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}
