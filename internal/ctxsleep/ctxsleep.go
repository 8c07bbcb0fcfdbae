// SPDX-License-Identifier: Apache-2.0

// Package ctxsleep waits on the wall clock for as long as a context
// lives. Sleep waits once, for a duration: the back-off of the client side
// (package client, its gRPC interceptors in grpcsluice, the lab's retry
// policies) and a share's delay. Every calls a function every period: the
// loop of the live drivers (a stage's runner, the outgoing-queue sampler),
// whose functions the simulator calls at its own clock instead.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends, and reports whether the wait ran out
// (true) rather than ctx ending (false). d ≤ 0 does not wait: it reports
// whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Every calls f with each tick's time, every period d of the wall clock,
// until ctx ends; it then returns at once, without a last call. The first
// call comes after d, not at once. d must be positive (time.NewTicker
// panics otherwise). f runs on the caller's goroutine, one call at a time;
// ticks that come while f runs are dropped, as time.Ticker drops them.
func Every(ctx context.Context, d time.Duration, f func(now time.Time)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}
