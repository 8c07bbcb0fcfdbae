// SPDX-License-Identifier: Apache-2.0

// Package tick runs a function at a fixed period until told to stop: the
// loop the lab's samplers, progress lines and the peers' control periods
// share.
package tick

import "time"

// Every calls f every period until stop is closed (or receives), the
// first call one period after Every is called, and then returns. A call
// in progress when stop closes finishes first; ticks that pass while f
// runs are dropped, as time.Ticker drops them. Every blocks: run it on a
// goroutine of its own.
func Every(stop <-chan struct{}, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			f()
		}
	}
}
