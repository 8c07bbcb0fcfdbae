// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/textproto"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/gate"
	"github.com/sluicehq/sluice/internal/httpx"
)

// AccessLogConfig is the access_log section: one line per request with
// the admission decision, written off the request path and bounded so
// that a crowd of rejections cannot fill a disk. Absent (the default),
// nothing is logged. A reload applies changes, and reopens the file (for
// logrotate: move the file, then reload).
type AccessLogConfig struct {
	// Format is json (default), one JSON object per line, or combined:
	// nginx's combined format with sluice's fields appended as key=value.
	Format string `yaml:"format"`
	// Path is stdout (default), stderr, or a file, appended to and
	// created with mode 0640.
	Path string `yaml:"path"`
	// RequestIDHeader carries the request id (default X-Request-Id): a
	// valid one the client sent (1 to 128 visible ASCII characters, no
	// quote or backslash) is kept, else sluice makes one (32 hex digits);
	// the backend gets it in this header, and so does the client.
	RequestIDHeader string `yaml:"request_id_header"`
	// Sample is the fraction of admitted requests logged, in (0, 1]
	// (default 1): 0.1 logs every tenth.
	Sample *float64 `yaml:"sample"`
	// MaxPerSecond caps the lines of admitted requests per second
	// (default 1000, with a burst of one second's worth; 0: no cap).
	MaxPerSecond *int `yaml:"max_per_second"`
	// RejectedPerSecond caps the lines of refused requests per second and
	// per reason (default 10, with a burst of one second's worth; 0: no
	// cap): the first of each second are logged, the rest counted.
	RejectedPerSecond *int `yaml:"rejected_per_second"`
}

// Access log formats and outputs (AccessLogConfig.Format, Path).
const (
	AccessLogJSON     = "json"
	AccessLogCombined = "combined"
	AccessLogStdout   = "stdout"
	AccessLogStderr   = "stderr"
)

// Access log defaults.
const (
	DefaultAccessLogFormat            = AccessLogJSON
	DefaultAccessLogPath              = AccessLogStdout
	DefaultRequestIDHeader            = "X-Request-Id"
	DefaultAccessLogSample            = 1.0
	DefaultAccessLogMaxPerSecond      = 1000
	DefaultAccessLogRejectedPerSecond = 10
	// AccessLogQueue is the most lines waiting for the writer; a line
	// that finds the queue full is dropped and counted (queue_full).
	AccessLogQueue = 4096
	// AccessLogSummaryInterval is how often the proxy's log says how many
	// lines were dropped, and why, when some were.
	AccessLogSummaryInterval = 10 * time.Second
)

func (c *AccessLogConfig) setDefaults() {
	c.Format = cmp.Or(c.Format, DefaultAccessLogFormat)
	c.Path = cmp.Or(c.Path, DefaultAccessLogPath)
	c.RequestIDHeader = cmp.Or(c.RequestIDHeader, DefaultRequestIDHeader)
	setPtrDefault(&c.Sample, DefaultAccessLogSample)
	setPtrDefault(&c.MaxPerSecond, DefaultAccessLogMaxPerSecond)
	setPtrDefault(&c.RejectedPerSecond, DefaultAccessLogRejectedPerSecond)
}

func (c *AccessLogConfig) validate() error {
	const p = "access_log."
	if c.Format != AccessLogJSON && c.Format != AccessLogCombined {
		return fieldErr(p+"format", "%q is invalid: must be json or combined", c.Format)
	}
	if !httpx.IsToken(c.RequestIDHeader) {
		return fieldErr(p+"request_id_header", "%q is not a header name", c.RequestIDHeader)
	}
	if s := *c.Sample; !(s > 0 && s <= 1) {
		return fieldErr(p+"sample", "%v is invalid: must be within (0, 1]", s)
	}
	if n := *c.MaxPerSecond; n < 0 {
		return fieldErr(p+"max_per_second", "%d is invalid: must be 0 (no cap) or more", n)
	}
	if n := *c.RejectedPerSecond; n < 0 {
		return fieldErr(p+"rejected_per_second", "%d is invalid: must be 0 (no cap) or more", n)
	}
	return nil
}

// refusal is why sluice refused a request (the access log's reason and
// its per-reason cap): by its stage, its backend pool or its client share,
// or a client that left while it waited.
type refusal uint8

const (
	notRefused refusal = iota
	refusedShed
	refusedQueueTimeout
	refusedDeadline
	refusedClientGone
	refusedPoolQueueFull
	refusedPoolQueueTimeout
	refusedShare
	numRefusals
)

var refusalNames = [numRefusals]string{"", "shed", "queue_timeout", "deadline", "client_gone", "pool_queue_full", "pool_queue_timeout", "share"}

func (r refusal) String() string { return refusalNames[r] }

// dropReason is why a request has no access-log line.
type dropReason uint8

const (
	dropSampled           dropReason = iota // sample < 1
	dropRateLimited                         // admitted beyond max_per_second
	dropRejectionsLimited                   // refused beyond rejected_per_second for its reason
	dropQueueFull                           // the writer's queue was full
	dropWriteError                          // the output refused the line
	numDropReasons
)

var dropNames = [numDropReasons]string{"sampled", "rate_limited", "rejections_limited", "queue_full", "write_error"}

// accessSettings are one generation's access_log: which requests get a
// line. Safe for concurrent use.
type accessSettings struct {
	combined bool
	idHeader string // canonical
	sample   float64
	seen     atomic.Uint64     // admitted requests offered to the sampler
	admitted *gate.TokenBucket // nil: no cap
	refused  [numRefusals]*gate.TokenBucket
}

// newAccessLogSettings returns the settings of c, or nil when c is nil
// (no access log).
func newAccessLogSettings(c *AccessLogConfig) *accessSettings {
	if c == nil {
		return nil
	}
	s := &accessSettings{combined: c.Format == AccessLogCombined, sample: *c.Sample,
		idHeader: textproto.CanonicalMIMEHeaderKey(c.RequestIDHeader)}
	bucket := func(n int) *gate.TokenBucket {
		if n == 0 {
			return nil
		}
		b, err := gate.NewTokenBucket(float64(n), n)
		if err != nil {
			panic("proxy: access_log: " + err.Error()) // validate checked n
		}
		return b
	}
	s.admitted = bucket(*c.MaxPerSecond)
	for r := refusedShed; r < numRefusals; r++ {
		s.refused[r] = bucket(*c.RejectedPerSecond)
	}
	return s
}

// allow decides at now whether a request gets its line: an admitted one
// if the sampler picks it and the cap has room, a refused one if its
// reason's cap has room.
func (s *accessSettings) allow(now time.Time, why refusal) (dropReason, bool) {
	if why != notRefused {
		if b := s.refused[why]; b != nil && !b.AllowAt(now) {
			return dropRejectionsLimited, false
		}
		return 0, true
	}
	if s.sample < 1 {
		// Every request whose count crosses a multiple of 1/sample: an
		// exact fraction, without a random draw.
		n := float64(s.seen.Add(1))
		if math.Floor(n*s.sample) == math.Floor((n-1)*s.sample) {
			return dropSampled, false
		}
	}
	if s.admitted != nil && !s.admitted.AllowAt(now) {
		return dropRateLimited, false
	}
	return 0, true
}

// accessLog writes the lines of every generation's access log on a
// goroutine of its own (run), so that the request path never waits for
// the output: a request formats its line into a pooled buffer and hands
// it over without blocking.
type accessLog struct {
	queue    chan *[]byte
	log      *slog.Logger
	interval time.Duration // of the dropped-lines summary
	warn     rate.Sometimes

	mu  sync.Mutex // guards out and bw, held by the writer while it writes
	out io.WriteCloser
	bw  *bufio.Writer

	lines   prometheus.Counter
	dropped [numDropReasons]prometheus.Counter
	counts  [numDropReasons]atomic.Uint64 // the same, for the summary
	written atomic.Uint64
	vec     *prometheus.CounterVec
}

func newAccessLog(log *slog.Logger) *accessLog {
	a := &accessLog{queue: make(chan *[]byte, AccessLogQueue), log: log, interval: AccessLogSummaryInterval,
		warn: rate.Sometimes{Interval: time.Minute},
		lines: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_access_log_lines_total",
			Help: "Access-log lines written."}),
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_access_log_dropped_total",
			Help: "Requests without an access-log line, by reason: sampled (access_log.sample), rate_limited (admitted requests beyond max_per_second), rejections_limited (refused requests beyond rejected_per_second for their reason), queue_full (the writer fell behind), write_error (the output failed)."},
			[]string{"reason"})}
	for d := range numDropReasons {
		a.dropped[d] = a.vec.WithLabelValues(dropNames[d])
	}
	return a
}

func (a *accessLog) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.lines, a.vec}
}

func (a *accessLog) drop(d dropReason) {
	a.dropped[d].Inc()
	a.counts[d].Add(1)
}

// linePool recycles the lines' buffers.
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// putLine returns a line's buffer to linePool, unless a huge request
// made it grow past what is worth keeping.
func putLine(bp *[]byte) {
	if cap(*bp) <= 16<<10 {
		*bp = (*bp)[:0]
		linePool.Put(bp)
	}
}

// record writes ob's line if s allows it at now, or counts why not.
func (a *accessLog) record(now time.Time, s *accessSettings, ob *observation) {
	if d, ok := s.allow(now, ob.refusal); !ok {
		a.drop(d)
		return
	}
	bp := linePool.Get().(*[]byte)
	if s.combined {
		*bp = ob.appendCombined((*bp)[:0], now)
	} else {
		*bp = ob.appendJSON((*bp)[:0], now)
	}
	select {
	case a.queue <- bp:
	default:
		a.drop(dropQueueFull)
		putLine(bp)
	}
}

// openAccessLog opens the output that path names.
func openAccessLog(path string) (io.WriteCloser, error) {
	switch path {
	case AccessLogStdout:
		return nopCloser{os.Stdout}, nil
	case AccessLogStderr:
		return nopCloser{os.Stderr}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fieldErr("access_log.path", "%v", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// use makes out the output from the next line on: what was buffered goes
// to the previous output, which is closed.
func (a *accessLog) use(out io.WriteCloser) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bw != nil {
		_ = a.bw.Flush()
	}
	if a.out != nil {
		_ = a.out.Close()
	}
	a.out, a.bw = out, bufio.NewWriterSize(out, 64<<10)
}

// run writes the queued lines until ctx ends, flushing whenever the queue
// empties, and logs a summary of the dropped lines every interval when
// some were; then it writes what is left and closes the output.
func (a *accessLog) run(ctx context.Context) {
	tick := time.NewTicker(a.interval)
	defer tick.Stop()
	var last [numDropReasons]uint64
	for {
		select {
		case bp := <-a.queue:
			a.write(bp)
		case <-tick.C:
			a.summary(&last)
		case <-ctx.Done():
			for {
				select {
				case bp := <-a.queue:
					a.write(bp)
					continue
				default:
				}
				break
			}
			a.summary(&last)
			a.mu.Lock()
			if a.bw != nil {
				_ = a.bw.Flush()
				_ = a.out.Close()
				a.out, a.bw = nil, nil
			}
			a.mu.Unlock()
			return
		}
	}
}

// write writes one line, and flushes when no other waits.
func (a *accessLog) write(bp *[]byte) {
	a.mu.Lock()
	var err error
	if a.bw == nil {
		err = fmt.Errorf("no output")
	} else if _, err = a.bw.Write(*bp); err == nil && len(a.queue) == 0 {
		err = a.bw.Flush()
	}
	a.mu.Unlock()
	putLine(bp)
	if err != nil {
		a.drop(dropWriteError)
		a.warn.Do(func() { a.log.Warn("access log: write failed", "err", err) })
		return
	}
	a.lines.Inc()
	a.written.Add(1)
}

// summary logs the lines dropped since the last summary, by reason, when
// there were any.
func (a *accessLog) summary(last *[numDropReasons]uint64) {
	attrs := make([]any, 0, 2*numDropReasons+2)
	var total uint64
	for d := range numDropReasons {
		n := a.counts[d].Load()
		total += n - last[d]
		attrs = append(attrs, dropNames[d], n-last[d])
		last[d] = n
	}
	if total == 0 {
		return
	}
	attrs = append(attrs, "written_total", a.written.Load())
	a.log.Info("access log: lines dropped since the last summary", attrs...)
}
