// SPDX-License-Identifier: Apache-2.0

package client

import "time"

// windowBuckets is the number of buckets a window is cut into: counts
// leave the window a twentieth of it at a time.
const windowBuckets = 20

// window counts events of two kinds over the last span, in buckets of
// span/windowBuckets: a count enters the bucket of its time and leaves
// the window when that bucket is older than span. Time is an argument; a
// time earlier than the latest seen counts in the current bucket. The
// zero value is not usable; call init. Not safe for concurrent use.
type window struct {
	bucket  time.Duration
	base    time.Time // the first instant seen
	started bool
	cur     int64 // index of the current bucket since base
	a, b    [windowBuckets]float64
	sumA    float64
	sumB    float64
}

func (w *window) init(span time.Duration) {
	*w = window{bucket: max(span/windowBuckets, 1)}
}

// advance moves the window to now, dropping the buckets that left it.
func (w *window) advance(now time.Time) {
	if !w.started {
		w.base, w.started = now, true
		return
	}
	i := int64(now.Sub(w.base) / w.bucket)
	if i <= w.cur {
		return
	}
	n := min(i-w.cur, windowBuckets)
	for k := int64(1); k <= n; k++ {
		j := (w.cur + k) % windowBuckets
		w.sumA -= w.a[j]
		w.sumB -= w.b[j]
		w.a[j], w.b[j] = 0, 0
	}
	w.cur = i
	if w.sumA < 0.5 && w.sumB < 0.5 { // only rounding left: start clean
		w.sumA, w.sumB = 0, 0
	}
}

// add counts a and b events at now.
func (w *window) add(now time.Time, a, b float64) {
	w.advance(now)
	j := w.cur % windowBuckets
	w.a[j] += a
	w.b[j] += b
	w.sumA += a
	w.sumB += b
}

// sums returns the counts of the window at now.
func (w *window) sums(now time.Time) (a, b float64) {
	w.advance(now)
	return w.sumA, w.sumB
}
