// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/ctxsleep"
)

// RunOutQueueSampler is the outgoing-queue sensor's sampling loop: it calls
// q.Sample every q.Config().SampleInterval() with the tick's time until ctx
// is done, then returns context.Cause(ctx). Sampling errors are recorded in
// the period (OutQueueReading.Failed, and Collect's error when no sample
// succeeded), not returned. Run it in its own goroutine; it is the only
// part of the sensor that uses timers.
func RunOutQueueSampler(ctx context.Context, q *OutQueue) error {
	ctxsleep.Every(ctx, q.cfg.SampleInterval(), func(now time.Time) { _ = q.Sample(now) })
	return context.Cause(ctx)
}
