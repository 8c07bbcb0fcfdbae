// SPDX-License-Identifier: Apache-2.0

package ctxsleep

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		if !Sleep(ctx, time.Second) || time.Since(start) != time.Second {
			t.Errorf("a live context: want the whole second, got %v", time.Since(start))
		}
		if !Sleep(ctx, 0) || !Sleep(ctx, -time.Second) {
			t.Error("d ≤ 0 with a live context: want true at once")
		}
		time.AfterFunc(100*time.Millisecond, cancel)
		start = time.Now()
		if Sleep(ctx, time.Hour) || time.Since(start) != 100*time.Millisecond {
			t.Errorf("canceled after 100ms: want false after 100ms, got %v", time.Since(start))
		}
		if Sleep(ctx, 0) {
			t.Error("d = 0 with an ended context: want false")
		}
	})
}
