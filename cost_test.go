// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"testing"
	"time"
)

func TestReportCost(t *testing.T) {
	if ReportCost(context.Background(), time.Millisecond) {
		t.Error("a context without a cost report took one")
	}
	ctx, read := WithCostReport(WithHop(context.Background(), Hop{Tenant: "a"}))
	if got := read(); got != 0 {
		t.Errorf("nothing reported: %v", got)
	}
	if ReportCost(ctx, 0) || ReportCost(ctx, -time.Second) {
		t.Error("a cost ≤ 0 was taken")
	}
	if !ReportCost(context.WithValue(ctx, otherKey{}, 1), 3*time.Millisecond) || !ReportCost(ctx, 7*time.Millisecond) {
		t.Fatal("a report was refused")
	}
	if got := read(); got != 7*time.Millisecond {
		t.Errorf("read %v, want the last report, 7ms", got)
	}
	if HopFrom(ctx).Tenant != "a" {
		t.Error("the report's context hides the hop")
	}
	if n := testing.AllocsPerRun(100, func() { ReportCost(ctx, time.Millisecond) }); n != 0 {
		t.Errorf("ReportCost allocates %v times", n)
	}
}

// otherKey is a context key of another package, for a context that wraps
// the one carrying the cost report.
type otherKey struct{}
