// SPDX-License-Identifier: Apache-2.0

package ctxsleep

import (
	"context"
	"slices"
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

// In virtual time: the calls come at d, 2d, 3d with the tick's time, none
// at once, and none after ctx ends; Every returns when it ends.
func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(3500*time.Millisecond, cancel)
		var got []time.Duration
		Every(ctx, time.Second, func(now time.Time) { got = append(got, now.Sub(start)) })
		if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("calls at %v, want %v", got, want)
		}
		if since := time.Since(start); since != 3500*time.Millisecond {
			t.Errorf("returned after %v, want when ctx ended (3.5s)", since)
		}
	})
}
