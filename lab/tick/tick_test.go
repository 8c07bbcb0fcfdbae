// SPDX-License-Identifier: Apache-2.0

package tick

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// f runs once a period, the first time one period in, and not after
// stop closes; Every returns then.
func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop := make(chan struct{})
		var n atomic.Int32
		var at []time.Duration
		start := time.Now()
		done := make(chan struct{})
		go func() {
			Every(stop, time.Second, func() {
				n.Add(1)
				at = append(at, time.Since(start))
			})
			close(done)
		}()
		time.Sleep(3500 * time.Millisecond)
		close(stop)
		<-done
		time.Sleep(5 * time.Second)
		if n.Load() != 3 || at[0] != time.Second || at[2] != 3*time.Second {
			t.Fatalf("%d calls at %v", n.Load(), at)
		}
	})
}
