// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Header names shared with the proxy and the load generator.
const (
	// QualityHeader carries the service quality in [0, 1] requested by the
	// proxy (SEDA-style degradation). A missing header means 1.
	QualityHeader = "X-Sluice-Quality"
	// UtilizationHeader carries the backend's busy fraction in [0, 1],
	// formatted with four decimals, on every response of every kind.
	UtilizationHeader = "X-Sluice-Utilization"
)

// MinQuality is the floor applied to the requested quality before it scales
// work: a request asking for quality 0 still gets MinQuality of the work, so
// that a degraded reply costs something and is still a reply.
const MinQuality = 0.1

// UtilizationWindow is the length of the sliding window over which every
// kind reports its busy fraction. The window advances in steps of
// UtilizationWindow/10, so the value covers between 1.0 and 1.1 windows
// (or the whole uptime while the server is younger than that).
const UtilizationWindow = time.Second

// ParseQuality returns the quality requested by h's X-Sluice-Quality value:
// 1 when the header is absent or empty, the parsed value when it is a
// number in [0, 1], and an error naming the header and value otherwise.
func ParseQuality(h http.Header) (float64, error) {
	v := strings.TrimSpace(h.Get(QualityHeader))
	if v == "" {
		return 1, nil
	}
	q, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(q) || q < 0 || q > 1 {
		return 0, fmt.Errorf("header %s=%q: want a number in [0,1]", QualityHeader, v)
	}
	return q, nil
}

// EffectiveQuality returns the factor by which a backend scales its work
// for requested quality q: max(q, MinQuality).
func EffectiveQuality(q float64) float64 {
	return math.Max(q, MinQuality)
}

// CheckListenAddr reports whether addr ("host:port") may be listened on.
// Without allowPublic only loopback hosts are accepted: an IP literal in
// 127.0.0.0/8 or ::1, or "localhost". An empty host (":8081") means every
// interface and is refused too.
func CheckListenAddr(addr string, allowPublic bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %v", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("listen address %q: port %q is not a number in 0..65535", addr, port)
	}
	if allowPublic {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		if host == "" {
			host = "all interfaces"
		}
		return fmt.Errorf("listen address %q: %s is not a loopback address (127.0.0.0/8, ::1, localhost); pass --allow-public to listen on it", addr, host)
	}
	return nil
}

// Listen checks addr with CheckListenAddr and opens a TCP listener on it.
func Listen(addr string, allowPublic bool) (net.Listener, error) {
	if err := CheckListenAddr(addr, allowPublic); err != nil {
		return nil, err
	}
	return net.Listen("tcp", addr)
}

// Stats counts the requests a backend has answered. /_meta and /healthz are
// not counted.
type Stats struct {
	// Requests is the number of requests answered with any status.
	Requests uint64 `json:"requests"`
	// Rejected is the number answered 503 because the backend was full or
	// closing.
	Rejected uint64 `json:"rejected"`
	// Errors is the number answered with another 4xx or 5xx status.
	Errors uint64 `json:"errors"`
}

// Backend is what every testbed kind provides.
type Backend interface {
	http.Handler
	// Close releases the backend's resources (timers, database, temporary
	// files). Requests still waiting are answered 503. Close is idempotent.
	Close() error
	// Stats returns the counters so far. It is safe for concurrent use.
	Stats() Stats
	// Meta returns the manifest served at /_meta.
	Meta() any
}

// counters is the atomic implementation behind Stats.
type counters struct {
	requests, rejected, errors atomic.Uint64
}

func (c *counters) count(status int) {
	c.requests.Add(1)
	switch {
	case status == http.StatusServiceUnavailable:
		c.rejected.Add(1)
	case status >= 400:
		c.errors.Add(1)
	}
}

func (c *counters) stats() Stats {
	return Stats{Requests: c.requests.Load(), Rejected: c.rejected.Load(), Errors: c.errors.Load()}
}

// serveMeta answers /_meta and /healthz and reports whether it did.
func serveMeta(w http.ResponseWriter, r *http.Request, meta func() any) bool {
	switch r.URL.Path {
	case "/_meta":
		b, err := json.Marshal(meta())
		if err != nil {
			http.Error(w, "encoding /_meta: "+err.Error(), http.StatusInternalServerError)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
		w.Write(append(b, '\n'))
		return true
	case "/healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
		return true
	}
	return false
}

// formatUtilization renders u for the UtilizationHeader.
func formatUtilization(u float64) string {
	return strconv.FormatFloat(u, 'f', 4, 64)
}

// busyWindow integrates a busy level b(t) in [0, 1], piecewise constant in
// time, and reports its mean over a sliding window:
//
//	U(now) = (∫_{m}^{now} b(t) dt) / (now − m)
//
// where m is the oldest of the last busyMarks+1 boundaries, spaced
// window/busyMarks apart from the first observation (so now − m is between
// one window and 1.1 windows), or the first observation while fewer
// boundaries have passed. Time only moves forward:
// an earlier now is treated as the latest one seen. The zero value is
// unusable; call init. Not safe for concurrent use.
type busyWindow struct {
	width   time.Duration
	started bool
	origin  time.Time // first observation
	last    time.Time // time the integral was advanced to
	level   float64   // b(t) since last
	total   float64   // ∫ b dt from origin to last, in seconds
	next    int64     // index of the next boundary origin+next*width
	marks   [busyRing]busyMark
	nmarks  int // boundaries recorded, up to busyRing
	head    int // index in marks of the oldest boundary once full
}

// busyMarks is the number of boundary steps in a window; busyRing
// boundaries are kept so that the window always spans at least busyMarks
// steps.
const (
	busyMarks = 10
	busyRing  = busyMarks + 1
)

type busyMark struct {
	at    time.Time
	total float64
}

func (w *busyWindow) init(window time.Duration) {
	*w = busyWindow{width: window / busyMarks}
}

// advance integrates the current level up to now, recording boundaries.
func (w *busyWindow) advance(now time.Time) {
	if !w.started {
		w.started, w.origin, w.last, w.next = true, now, now, 1
		return
	}
	if !now.After(w.last) {
		return
	}
	// After a long quiet spell only the last busyRing boundaries matter;
	// the level was constant since last, so the integral up to the first
	// kept boundary is computed in one step by the loop below.
	k := int64(now.Sub(w.origin) / w.width) // boundaries at or before now
	if k-w.next+1 > busyRing {
		w.next = k - busyRing + 1
	}
	for w.next <= k {
		at := w.origin.Add(time.Duration(w.next) * w.width)
		w.total += w.level * at.Sub(w.last).Seconds()
		w.last = at
		w.push(busyMark{at: at, total: w.total})
		w.next++
	}
	w.total += w.level * now.Sub(w.last).Seconds()
	w.last = now
}

func (w *busyWindow) push(m busyMark) {
	if w.nmarks < busyRing {
		w.marks[(w.head+w.nmarks)%busyRing] = m
		w.nmarks++
		return
	}
	w.marks[w.head] = m
	w.head = (w.head + 1) % busyRing
}

// set advances to now and changes the busy level from now on.
func (w *busyWindow) set(now time.Time, level float64) {
	w.advance(now)
	w.level = level
}

// mean advances to now and returns U(now) in [0, 1]; 0 before any time has
// passed.
func (w *busyWindow) mean(now time.Time) float64 {
	w.advance(now)
	from, base := w.origin, 0.0
	if w.nmarks == busyRing {
		m := w.marks[w.head]
		from, base = m.at, m.total
	}
	span := w.last.Sub(from).Seconds()
	if span <= 0 {
		return 0
	}
	u := (w.total - base) / span
	return math.Min(1, math.Max(0, u))
}

// loadMeter estimates the busy fraction of a handler that does real work:
// with n requests in flight and P processors, the level is min(n, P)/P, and
// the reported utilization is its mean over UtilizationWindow. It is safe
// for concurrent use.
type loadMeter struct {
	mu       sync.Mutex
	procs    int
	inflight int
	win      busyWindow
}

func newLoadMeter(procs int) *loadMeter {
	m := &loadMeter{procs: max(procs, 1)}
	m.win.init(UtilizationWindow)
	return m
}

func (m *loadMeter) level() float64 {
	return float64(min(m.inflight, m.procs)) / float64(m.procs)
}

// enter records that a request started at now.
func (m *loadMeter) enter(now time.Time) {
	m.mu.Lock()
	m.inflight++
	m.win.set(now, m.level())
	m.mu.Unlock()
}

// leave records that a request finished at now.
func (m *loadMeter) leave(now time.Time) {
	m.mu.Lock()
	m.inflight--
	m.win.set(now, m.level())
	m.mu.Unlock()
}

// metered runs serve, which returns the status it answered, as one
// request of the meter (between enter and leave) and counts that status
// in c.
func (m *loadMeter) metered(c *counters, serve func() int) {
	m.enter(time.Now())
	status := serve()
	m.leave(time.Now())
	c.count(status)
}

// utilization returns the windowed busy fraction at now.
func (m *loadMeter) utilization(now time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.win.mean(now)
}

// StatusRecorder is an http.ResponseWriter that remembers the status a
// handler wrote through it: the first WriteHeader's, or 200 once the body
// is written without one (Code: 200 also when nothing was written).
type StatusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code, the first time, and passes it on.
func (s *StatusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records 200 if no status was written, and passes b on.
func (s *StatusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController access to the underlying writer.
func (s *StatusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Code returns the status written (200 when none was).
func (s *StatusRecorder) Code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// WaitReady polls url (GET, every 50 ms) until it answers, whatever the
// status: a backend, a proxy or a helper process is up then. It fails
// when ctx ends or within has passed.
func WaitReady(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready after %v: %w", url, within, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
