// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"sync/atomic"
	"time"
)

// costKey is the context key of a request's cost report.
type costKey struct{}

// costCtx carries the cell a handler reports its request's cost into:
// one allocation, made only for a request whose stage shares by
// reported cost.
type costCtx = valueCtx[costKey, atomic.Int64]

// WithCostReport returns a copy of ctx that takes a cost report
// (ReportCost) for its request, and the function that reads the last
// report (0: none). The policy package gives it to the handler of every
// request of a stage whose tenants share by reported cost
// (tenants.cost: reported).
func WithCostReport(ctx context.Context) (context.Context, func() time.Duration) {
	c := &costCtx{Context: ctx}
	return c, func() time.Duration { return time.Duration(c.v.Load()) }
}

// ReportCost tells sluice what the request of ctx cost the service, for
// the fair queueing of a stage whose tenants share by reported cost
// (tenants.cost: reported): the CPU time the handler measured for it,
// or any cost expressed as time (rows scanned at so much each). A
// request of such a stage that reports nothing is charged its service
// time. cost must be > 0; the last report wins. It reports whether ctx's
// request takes a report (false: the stage shares otherwise, or ctx is
// not a handler's context, and the report is dropped). It is safe for
// concurrent use and does not allocate.
//
// Go gives no CPU clock per request: a goroutine runs on several threads
// and a thread serves several goroutines, so sluice does not measure CPU
// time itself. A handler that does its work on one locked OS thread
// (runtime.LockOSThread) can read that thread's clock
// (CLOCK_THREAD_CPUTIME_ID) before and after, and report the difference.
func ReportCost(ctx context.Context, cost time.Duration) bool {
	c, ok := ctx.Value(costKey{}).(*costCtx)
	if !ok || cost <= 0 {
		return false
	}
	c.v.Store(int64(cost))
	return true
}
