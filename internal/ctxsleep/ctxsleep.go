// SPDX-License-Identifier: Apache-2.0

// Package ctxsleep waits for a duration or a context, whichever ends
// first: the back-off wait of the client side (package client, its gRPC
// interceptors in grpcsluice, and the lab's retry policies).
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
