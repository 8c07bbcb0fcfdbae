// SPDX-License-Identifier: Apache-2.0

package live

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/monitor"
)

// keep selects records; nil keeps every record.
type keep func(r *record) bool

func (k keep) ok(r *record) bool { return k == nil || k(r) }

// inGroup keeps the records of one load spec.
func inGroup(g uint8) keep { return func(r *record) bool { return r.group == g } }

// msOf converts a duration to milliseconds.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// okLatencies returns the latencies in milliseconds of the OK responses
// completed in [from, to).
func okLatencies(recs []record, from, to time.Duration, k keep) []float64 {
	var out []float64
	for i := range recs {
		r := &recs[i]
		if r.out == outOK && r.done >= from && r.done < to && k.ok(r) {
			out = append(out, msOf(r.lat))
		}
	}
	return out
}

// counts are the outcomes of the requests sent (intended) in a window.
type counts struct {
	offered, ok, rejected, timeouts, errors int
}

// countSent counts the requests intended in [from, to) by outcome.
// Aborted requests (cut by the end of a run) are not offered.
func countSent(recs []record, from, to time.Duration, k keep) counts {
	var c counts
	for i := range recs {
		r := &recs[i]
		if r.intended < from || r.intended >= to || !k.ok(r) || r.out == outAborted {
			continue
		}
		c.offered++
		switch r.out {
		case outOK:
			c.ok++
		case outRejected:
			c.rejected++
		case outTimeout:
			c.timeouts++
		case outError:
			c.errors++
		}
	}
	return c
}

// rejectFraction is rejected/offered, NaN when nothing was offered.
func (c counts) rejectFraction() float64 { return ratio(float64(c.rejected), float64(c.offered)) }

// goodWithin counts the OK responses completed in [from, to) with a
// latency of at most limit.
func goodWithin(recs []record, from, to, limit time.Duration, k keep) int {
	n := 0
	for i := range recs {
		r := &recs[i]
		if r.out == outOK && r.done >= from && r.done < to && r.lat <= limit && k.ok(r) {
			n++
		}
	}
	return n
}

// ratio is a/b, NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// bin is one interval of a time series: requests offered (by intended
// time) and finished (by completion time) in [t, t+width).
type bin struct {
	t                                       float64 // start, seconds
	offered, ok, rejected, timeouts, errors int
	good                                    int     // OK within the phase's limit
	p50, p90, mean                          float64 // ms of OK responses, NaN if none
	latencies                               []float64
}

// binRecords cuts [0, end) into intervals of width and fills them. good
// counts OK responses with latency ≤ limit (0: none counted).
func binRecords(recs []record, width, end, limit time.Duration, k keep) []bin {
	n := int(math.Ceil(float64(end) / float64(width)))
	bins := make([]bin, n)
	for i := range bins {
		bins[i].t = (time.Duration(i) * width).Seconds()
	}
	idx := func(d time.Duration) int {
		if d < 0 {
			return -1
		}
		i := int(d / width)
		if i >= n {
			return -1
		}
		return i
	}
	for i := range recs {
		r := &recs[i]
		if !k.ok(r) || r.out == outAborted {
			continue
		}
		if j := idx(r.intended); j >= 0 {
			bins[j].offered++
		}
		j := idx(r.done)
		if j < 0 {
			continue
		}
		switch r.out {
		case outOK:
			bins[j].ok++
			bins[j].latencies = append(bins[j].latencies, msOf(r.lat))
			if limit > 0 && r.lat <= limit {
				bins[j].good++
			}
		case outRejected:
			bins[j].rejected++
		case outTimeout:
			bins[j].timeouts++
		case outError:
			bins[j].errors++
		}
	}
	for i := range bins {
		b := &bins[i]
		b.p50 = monitor.Percentile(b.latencies, 0.5)
		b.p90 = monitor.Percentile(b.latencies, 0.9)
		b.mean = report.Mean(b.latencies)
		b.latencies = nil
	}
	return bins
}

// binColumns extracts x (bin start) and a value from bins.
func binColumns(bins []bin, f func(b *bin) float64) (x, y []float64) {
	x, y = make([]float64, len(bins)), make([]float64, len(bins))
	for i := range bins {
		x[i], y[i] = bins[i].t, f(&bins[i])
	}
	return x, y
}

// rejectedShare is rejected/(ok+rejected+timeouts+errors) of a bin by
// completion time, NaN if nothing finished.
func (b *bin) rejectedShare() float64 {
	return ratio(float64(b.rejected), float64(b.ok+b.rejected+b.timeouts+b.errors))
}
