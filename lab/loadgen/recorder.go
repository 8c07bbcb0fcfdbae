// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"bytes"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// outcome classifies how a request ended.
type outcome uint8

const (
	outOK             outcome = iota // 2xx or 3xx response
	outRejected                      // 503 or 429 response
	outHTTPError                     // any other 4xx/5xx (or 1xx) response
	outTransportError                // no response: connection or protocol error
	outTimeout                       // no complete response before the deadline
	outDropped                       // never sent: --max-inflight reached
	outAborted                       // cut short by cancellation (Ctrl-C)
)

// Counts are the outcome counters of a set of requests. Once every request
// has finished:
//
//	Offered   = Completed + TransportErrors + Dropped + Timeouts + Aborted
//	Completed = OK + Rejected + HTTPErrors   (an HTTP response arrived)
//	Errors    = HTTPErrors + TransportErrors + Dropped
type Counts struct {
	// Offered is the number of requests the generator meant to send: open
	// loop arrivals (including dropped ones), closed-loop sends (including
	// retries).
	Offered int64
	// Completed is the number of requests answered with any HTTP status.
	Completed int64
	// OK is the number of 2xx and 3xx responses (redirects are not followed).
	OK int64
	// Rejected is the number of 503 and 429 responses.
	Rejected int64
	// Errors is HTTPErrors + TransportErrors + Dropped.
	Errors int64
	// HTTPErrors is the number of other 4xx and 5xx responses.
	HTTPErrors int64
	// TransportErrors is the number of requests that failed without a
	// response for a reason other than the timeout (refused, reset, ...).
	TransportErrors int64
	// Dropped is the number of open-loop arrivals not sent because
	// MaxInflight requests were already in flight (client-side drops).
	Dropped int64
	// Timeouts is the number of requests aborted at their deadline.
	Timeouts int64
	// Aborted is the number of in-flight requests cut short by cancelling
	// the run (Ctrl-C); they are neither errors nor timeouts.
	Aborted int64
	// Bytes is the number of response body bytes received.
	Bytes int64
}

func (c *Counts) add(o outcome, bytes int64) {
	c.Bytes += bytes
	switch o {
	case outOK:
		c.OK++
		c.Completed++
	case outRejected:
		c.Rejected++
		c.Completed++
	case outHTTPError:
		c.HTTPErrors++
		c.Errors++
		c.Completed++
	case outTransportError:
		c.TransportErrors++
		c.Errors++
	case outTimeout:
		c.Timeouts++
	case outDropped:
		c.Dropped++
		c.Errors++
	case outAborted:
		c.Aborted++
	}
}

// Second is one row of a per-second series: the requests offered (by
// intended send time) and finished (by completion time) in [T, T+1) seconds
// after the start of the run.
type Second struct {
	// T is the second's index from the start of the run.
	T int
	Counts
	// P50, P90 and P99 are latency percentiles of the OK responses that
	// completed in this second; 0 when there were none.
	P50, P90, P99 time.Duration
}

// event is one finished request as seen by the recorder.
type event struct {
	typ, class, client string
	intended, done     time.Duration // offsets from the start of the run
	latency            time.Duration // done − intended
	out                outcome
	bytes              int64
}

// Histogram geometry: values are nanoseconds, resolved to 1 µs.
const (
	histLowest    = int64(time.Microsecond)
	histSigFigs   = 3 // whole-run histograms
	windowSigFigs = 2 // per-second histograms
)

// series accumulates one total or one key of a breakdown.
type series struct {
	Counts
	ok     *hdrhistogram.Histogram // latency of OK responses, ns
	rej    *hdrhistogram.Histogram // latency of rejections, ns
	rows   []Second
	win    [3]*hdrhistogram.Histogram // open per-second windows
	winSec [3]int
}

func newSeries(highest int64) *series {
	s := &series{
		ok:  hdrhistogram.New(histLowest, highest, histSigFigs),
		rej: hdrhistogram.New(histLowest, highest, windowSigFigs),
	}
	for i := range s.win {
		s.win[i] = hdrhistogram.New(histLowest, highest, windowSigFigs)
		s.winSec[i] = -1
	}
	return s
}

func (s *series) row(t int) *Second {
	for len(s.rows) <= t {
		s.rows = append(s.rows, Second{T: len(s.rows)})
	}
	return &s.rows[t]
}

// dimension is a breakdown (by type, class or client) with a bounded number
// of keys; keys beyond the bound are folded into "other".
type dimension struct {
	limit int
	keys  map[string]*series
}

// otherKey collects the keys beyond a dimension's limit.
const otherKey = "other"

// recorder aggregates finished requests into totals, breakdowns, HDR
// histograms and per-second rows. It is safe for concurrent use; all
// methods take time as an argument (offsets from the start of the run).
//
// Per-second latency percentiles use a window of three open seconds:
// second k is finalised by advance once the run is past k+2 s, or by a
// request completing in second k+3 or later; a request completing in a
// second already finalised (a straggler recorded late) is counted in its
// own row but its latency joins the oldest open second's percentiles.
type recorder struct {
	mu      sync.Mutex
	highest int64
	closed  int // seconds < closed are finalised
	maxSec  int
	total   *series
	dims    [3]dimension // type, class, client
	hlog    bytes.Buffer
	hlw     *hdrhistogram.HistogramLogWriter
}

const (
	dimType = iota
	dimClass
	dimClient
)

// dimension limits.
var dimLimits = [3]int{64, 32, 64}

func newRecorder(highest time.Duration, startUnixMs int64) *recorder {
	h := int64(highest)
	if h < 2*histLowest {
		h = 2 * histLowest
	}
	r := &recorder{highest: h, total: newSeries(h)}
	for i := range r.dims {
		r.dims[i] = dimension{limit: dimLimits[i], keys: map[string]*series{}}
	}
	r.hlw = hdrhistogram.NewHistogramLogWriter(&r.hlog)
	_ = r.hlw.OutputLogFormatVersion()
	_ = r.hlw.OutputComment("sluice-lab load: per-second latency of OK responses, values in ns, timestamps in s from the start of the run")
	_ = r.hlw.OutputStartTime(startUnixMs)
	_ = r.hlw.OutputLegend()
	return r
}

func (r *recorder) key(d int, k string) *series {
	if k == "" {
		return nil
	}
	dim := &r.dims[d]
	s, ok := dim.keys[k]
	if ok {
		return s
	}
	if len(dim.keys) >= dim.limit {
		k = otherKey
		if s, ok := dim.keys[k]; ok {
			return s
		}
	}
	s = newSeries(r.highest)
	dim.keys[k] = s
	return s
}

func secOf(d time.Duration) int {
	if d < 0 {
		return 0
	}
	return int(d / time.Second)
}

func (r *recorder) add(ev event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	is, ds := secOf(ev.intended), secOf(ev.done)
	if ds > r.maxSec {
		r.maxSec = ds
	}
	if is > r.maxSec {
		r.maxSec = is
	}
	if ds > r.closed+2 {
		r.closeUpTo(ds - 2)
	}
	ws := ds
	if ws < r.closed {
		ws = r.closed
	}
	lat := int64(ev.latency)
	if lat < 0 {
		lat = 0
	}
	if lat > r.highest {
		lat = r.highest
	}
	for _, s := range [4]*series{r.total, r.key(dimType, ev.typ), r.key(dimClass, ev.class), r.key(dimClient, ev.client)} {
		if s == nil {
			continue
		}
		s.Offered++
		s.row(is).Offered++
		s.Counts.add(ev.out, ev.bytes)
		s.row(ds).Counts.add(ev.out, ev.bytes)
		switch ev.out {
		case outOK:
			_ = s.ok.RecordValue(lat)
			slot := ws % 3
			if s.winSec[slot] != ws {
				s.win[slot].Reset()
				s.winSec[slot] = ws
			}
			_ = s.win[slot].RecordValue(lat)
		case outRejected:
			_ = s.rej.RecordValue(lat)
		}
	}
}

// closeUpTo finalises every second before c. The caller holds mu.
func (r *recorder) closeUpTo(c int) {
	for ; r.closed < c; r.closed++ {
		k := r.closed
		r.finalize(r.total, k, true)
		for d := range r.dims {
			for _, s := range r.dims[d].keys {
				r.finalize(s, k, false)
			}
		}
	}
}

func (r *recorder) finalize(s *series, k int, log bool) {
	slot := k % 3
	if s.winSec[slot] != k {
		return
	}
	h := s.win[slot]
	row := s.row(k)
	row.P50 = time.Duration(h.ValueAtQuantile(50))
	row.P90 = time.Duration(h.ValueAtQuantile(90))
	row.P99 = time.Duration(h.ValueAtQuantile(99))
	if log {
		h.SetStartTimeMs(int64(k) * 1000)
		h.SetEndTimeMs(int64(k+1) * 1000)
		_ = r.hlw.OutputIntervalHistogram(h)
	}
	h.Reset()
	s.winSec[slot] = -1
}

// advance finalises the seconds that ended more than one second before
// elapsed.
func (r *recorder) advance(elapsed time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := secOf(elapsed) - 1; c > r.closed {
		r.closeUpTo(c)
	}
}

// totals returns a copy of the run's total counts.
func (r *recorder) totals() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total.Counts
}

// lastSecond returns the most recent finalised second of the total series.
func (r *recorder) lastSecond() (Second, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.closed - 1
	if k < 0 || k >= len(r.total.rows) {
		return Second{}, false
	}
	return r.total.rows[k], true
}

// finish finalises every second up to end (and any later second that
// holds data) and stores totals, breakdowns, series and the histogram log
// in res. The recorder must not be used afterwards.
func (r *recorder) finish(end time.Duration, res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.maxSec
	if e := secOf(end - 1); e > last {
		last = e
	}
	r.closeUpTo(last + 1)
	rows := func(s *series) []Second {
		s.row(last) // pad every series to the same length
		return s.rows
	}
	res.Total = statsOf(r.total)
	res.Series = rows(r.total)
	res.ByType, res.ByClass, res.ByClient = map[string]Stats{}, map[string]Stats{}, map[string]Stats{}
	res.SeriesByType, res.SeriesByClass, res.SeriesByClient = map[string][]Second{}, map[string][]Second{}, map[string][]Second{}
	by := [3]map[string]Stats{res.ByType, res.ByClass, res.ByClient}
	ser := [3]map[string][]Second{res.SeriesByType, res.SeriesByClass, res.SeriesByClient}
	for d := range r.dims {
		for k, s := range r.dims[d].keys {
			by[d][k] = statsOf(s)
			ser[d][k] = rows(s)
		}
	}
	res.HistogramLog = append([]byte(nil), r.hlog.Bytes()...)
}
