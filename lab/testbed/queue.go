// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

// Queue disciplines.
const (
	// DisciplineFIFO serves up to Workers requests at a time, each for its
	// whole demand, and queues the others in arrival order.
	DisciplineFIFO = "fifo"
	// DisciplinePS shares Workers CPUs among all requests present: with n
	// requests each progresses at min(1, Workers/n) seconds of work per
	// second.
	DisciplinePS = "ps"
)

// QueueConfig configures a Queue backend. Start from DefaultQueueConfig.
type QueueConfig struct {
	// Workers is the number of servers (CPUs), c ≥ 1. Capacity is
	// Workers / mean(Service) requests per second at quality 1.
	Workers int `json:"workers"`
	// Discipline is DisciplineFIFO or DisciplinePS.
	Discipline string `json:"discipline"`
	// Service is the service-demand distribution in dist.ParseDuration
	// syntax, e.g. "exp:20ms", "det:10ms", "lognormal:20ms,1.5",
	// "pareto:1ms,2s,1.2".
	Service string `json:"service"`
	// Seed seeds the service-time draws. Draws are taken in arrival order.
	Seed uint64 `json:"seed"`
	// QueueLimit bounds the requests waiting beyond the Workers in service:
	// at most Workers+QueueLimit requests are in the system and the others
	// are answered 503 at once. 0 means unlimited.
	QueueLimit int `json:"queue_limit"`
	// Size is the response body size in bytes (≥ 0).
	Size int `json:"size"`
	// Record keeps a record of every request (QueueRecord: arrival,
	// finish, demand, the deadline of its user from LabDeadlineHeader,
	// whether its caller had gone when it finished), served as CSV at
	// GET /_records (Records).
	Record bool `json:"record"`
	// Control serves POST /_scale?factor=F, which calls SetScale(F), and
	// POST /_workers?n=N, which calls SetWorkers(N): the capacity changed
	// at run time from outside (the chain experiment's trigger, the
	// adaptive figure's changes with its backends in processes of their
	// own).
	Control bool `json:"control"`
	// FreeGone ends the handler of a request whose client has gone at
	// once, closing its connection, while its work stays in the queue
	// and is done all the same (its record says when). Without it the
	// handler waits for the work and answers a closed connection, holding
	// a file descriptor per abandoned request, which a long collapse runs
	// out of (20,000 per process on this machine).
	FreeGone bool `json:"free_gone"`
}

// DefaultQueueConfig returns 4 FIFO workers with exponential 20 ms service
// (200 req/s), seed 1, no queue limit and 128-byte replies.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{Workers: 4, Discipline: DisciplineFIFO, Service: "exp:20ms", Seed: 1, Size: 128}
}

// maxQueueBody bounds Size so that a typo cannot allocate gigabytes.
const maxQueueBody = 64 << 20

// Validate reports the first invalid field, naming it and its value.
func (c QueueConfig) Validate() error {
	_, err := c.parse()
	return err
}

func (c QueueConfig) parse() (dist.Dist, error) {
	if c.Workers < 1 {
		return nil, fmt.Errorf("queue: workers=%d: want at least 1", c.Workers)
	}
	if c.Discipline != DisciplineFIFO && c.Discipline != DisciplinePS {
		return nil, fmt.Errorf("queue: discipline=%q: want %q or %q", c.Discipline, DisciplineFIFO, DisciplinePS)
	}
	if c.QueueLimit < 0 {
		return nil, fmt.Errorf("queue: queue_limit=%d: want ≥ 0 (0 = unlimited)", c.QueueLimit)
	}
	if c.Size < 0 || c.Size > maxQueueBody {
		return nil, fmt.Errorf("queue: size=%d: want 0..%d bytes", c.Size, maxQueueBody)
	}
	d, err := dist.ParseDuration(c.Service)
	if err != nil {
		return nil, fmt.Errorf("queue: service=%q: %w", c.Service, err)
	}
	if !(d.Mean() > 0) {
		return nil, fmt.Errorf("queue: service=%q: mean service time must be positive", c.Service)
	}
	return d, nil
}

// Queue is a backend with a fixed capacity: Workers servers, a FIFO queue or
// processor sharing, and service demands drawn from a distribution. Service
// is emulated with one timer, not CPU work, so capacity does not depend on
// the machine. A request's demand is its drawn service time multiplied by
// EffectiveQuality of its X-Sluice-Quality header.
//
// Start and completion times are computed on an exact virtual schedule
// (see queueCore), so timer lateness delays a reply by at most the timer
// latency but never lowers capacity. A client that gives up does not
// remove its request: like a real server, the work is still done.
//
// Every response carries X-Sluice-Utilization, the busy fraction
// min(n, Workers)/Workers averaged over the last UtilizationWindow (n:
// requests in the system) at the request's completion; rejected requests
// carry the value at rejection. Responses also carry X-Sluice-Demand-Ms,
// the request's demand in milliseconds.
//
// Queue is safe for concurrent use.
type Queue struct {
	cfg  QueueConfig
	svc  dist.Dist
	body []byte
	ctr  counters

	mu      sync.Mutex
	rng     *rand.Rand
	scale   float64 // demand multiplier (SetScale)
	core    *queueCore
	nextID  uint64
	waiters map[uint64]*queueWaiter
	timer   *time.Timer
	done    []completion // scratch
	closed  bool
	closing chan struct{}
	records []QueueRecord // when cfg.Record
}

// QueueRecord is one request a Queue received (QueueConfig.Record).
type QueueRecord struct {
	// Arrival and Finish are when it arrived and when its service ended
	// (zero: it had not ended, or it was refused, when the records were
	// read).
	Arrival, Finish time.Time
	// Demand is its service demand in seconds (0 if refused).
	Demand float64
	// UserDeadline is the deadline of the user request it serves, from
	// LabDeadlineHeader (zero: none).
	UserDeadline time.Time
	// Gone says its caller had gone (its connection closed) when its
	// service ended.
	Gone bool
}

type queueWaiter struct {
	ch          chan struct{}
	utilization float64
	rec         int  // index of its record (Record), or −1
	gone        bool // its client has gone (Record)
}

var _ Backend = (*Queue)(nil)

// NewQueue validates cfg and returns a running Queue. Call Close when done.
func NewQueue(cfg QueueConfig) (*Queue, error) {
	svc, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	limit := 0
	if cfg.QueueLimit > 0 {
		limit = cfg.Workers + cfg.QueueLimit
	}
	q := &Queue{
		cfg:     cfg,
		svc:     svc,
		body:    bytes.Repeat([]byte("q"), cfg.Size),
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x71756575)),
		scale:   1,
		core:    newQueueCore(cfg.Workers, cfg.Discipline == DisciplinePS, limit, UtilizationWindow),
		waiters: make(map[uint64]*queueWaiter),
		closing: make(chan struct{}),
	}
	q.timer = time.AfterFunc(time.Hour, q.onTimer)
	q.timer.Stop()
	return q, nil
}

// QueueMeta is the /_meta manifest of a Queue.
type QueueMeta struct {
	Kind          string  `json:"kind"`
	Workers       int     `json:"workers"`
	Discipline    string  `json:"discipline"`
	Service       string  `json:"service"`
	ServiceMeanMs float64 `json:"service_mean_ms"`
	CapacityRPS   float64 `json:"capacity_rps"`
	QueueLimit    int     `json:"queue_limit"`
	Size          int     `json:"size"`
	Seed          uint64  `json:"seed"`
	MinQuality    float64 `json:"min_quality"`
}

// Meta returns the manifest: the configuration plus the capacity
// Workers/mean(Service) in requests per second at quality 1.
func (q *Queue) Meta() any {
	m := q.svc.Mean()
	q.mu.Lock()
	defer q.mu.Unlock()
	return QueueMeta{
		Kind: "queue", Workers: q.cfg.Workers, Discipline: q.cfg.Discipline,
		Service: q.cfg.Service, ServiceMeanMs: m * 1e3, CapacityRPS: float64(q.cfg.Workers) / m,
		QueueLimit: q.cfg.QueueLimit, Size: q.cfg.Size, Seed: q.cfg.Seed, MinQuality: MinQuality,
	}
}

// Stats returns the request counters.
func (q *Queue) Stats() Stats { return q.ctr.stats() }

// Capacity returns Workers/(mean(Service)·scale), the saturation
// throughput in requests per second at quality 1.
func (q *Queue) Capacity() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return float64(q.cfg.Workers) / (q.svc.Mean() * q.scale)
}

// SetScale multiplies the demand of requests arriving from now on by f
// (> 0): 2 halves the capacity, 0.5 doubles it. Requests already in the
// system keep their demand.
func (q *Queue) SetScale(f float64) error {
	if !(f > 0) || math.IsInf(f, 0) {
		return fmt.Errorf("queue: scale=%v: want a finite number > 0", f)
	}
	q.mu.Lock()
	q.scale = f
	q.mu.Unlock()
	return nil
}

// SetWorkers changes the number of workers from now on (≥ 1): a service
// that gains or loses parallelism at the same cost per request. More
// workers start waiting requests at once; fewer let the requests in
// service finish.
func (q *Queue) SetWorkers(n int) error {
	if n < 1 {
		return fmt.Errorf("queue: workers=%d: want at least 1", n)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.cfg.Workers = n
	q.done = q.core.setServers(time.Now(), n, q.done[:0])
	q.releaseLocked()
	return nil
}

// onTimer processes the completions that are due.
func (q *Queue) onTimer() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.done = q.core.advance(time.Now(), q.done[:0])
	q.releaseLocked()
}

// releaseLocked wakes the finished requests in q.done and re-arms the timer
// for the next completion. q.mu must be held.
func (q *Queue) releaseLocked() {
	for _, c := range q.done {
		if w, ok := q.waiters[c.id]; ok {
			w.utilization = c.utilization
			if w.rec >= 0 {
				q.records[w.rec].Finish, q.records[w.rec].Gone = c.at, w.gone
			}
			close(w.ch)
			delete(q.waiters, c.id)
		}
	}
	q.done = q.done[:0]
	if next, ok := q.core.nextEvent(); ok {
		q.timer.Reset(max(time.Until(next), 0))
	} else {
		q.timer.Stop()
	}
}

// Records returns a copy of the records kept so far (QueueConfig.Record).
func (q *Queue) Records() []QueueRecord {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]QueueRecord(nil), q.records...)
}

// WriteRecords writes the records as CSV: a header line, then one line
// per request, arrival_unix_ns,finish_unix_ns,demand_s,
// user_deadline_unix_ns,gone (0 for a zero time; gone 0 or 1).
func (q *Queue) WriteRecords(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "arrival_unix_ns,finish_unix_ns,demand_s,user_deadline_unix_ns,gone")
	ns := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixNano()
	}
	for _, r := range q.Records() {
		gone := 0
		if r.Gone {
			gone = 1
		}
		fmt.Fprintf(bw, "%d,%d,%s,%d,%d\n", ns(r.Arrival), ns(r.Finish), strconv.FormatFloat(r.Demand, 'g', -1, 64), ns(r.UserDeadline), gone)
	}
	return bw.Flush()
}

// ParseQueueRecords reads the CSV of WriteRecords.
func ParseQueueRecords(rd io.Reader) ([]QueueRecord, error) {
	sc := bufio.NewScanner(rd)
	var out []QueueRecord
	tm := func(v int64) time.Time {
		if v == 0 {
			return time.Time{}
		}
		return time.Unix(0, v)
	}
	for line := 0; sc.Scan(); line++ {
		if line == 0 {
			continue
		}
		f := strings.Split(sc.Text(), ",")
		if len(f) != 5 {
			return nil, fmt.Errorf("records line %d: %d fields, want 5", line+1, len(f))
		}
		var v [3]int64
		var err error
		for i, j := range []int{0, 1, 3} {
			if v[i], err = strconv.ParseInt(f[j], 10, 64); err != nil {
				return nil, fmt.Errorf("records line %d: %w", line+1, err)
			}
		}
		d, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("records line %d: %w", line+1, err)
		}
		out = append(out, QueueRecord{Arrival: tm(v[0]), Finish: tm(v[1]), Demand: d, UserDeadline: tm(v[2]), Gone: f[4] == "1"})
	}
	return out, sc.Err()
}

// serveControl answers /_records, /_scale and /_workers when configured,
// and reports whether it did.
func (q *Queue) serveControl(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.URL.Path == "/_records" && q.cfg.Record:
		w.Header().Set("Content-Type", "text/csv")
		_ = q.WriteRecords(w)
		return true
	case r.URL.Path == "/_scale" && q.cfg.Control:
		q.serveSet(w, r, "factor", "POST /_scale?factor=F", func(v string) (string, error) {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				err = q.SetScale(f)
			}
			return fmt.Sprintf("scale %g", f), err
		})
		return true
	case r.URL.Path == "/_workers" && q.cfg.Control:
		q.serveSet(w, r, "n", "POST /_workers?n=N", func(v string) (string, error) {
			n, err := strconv.Atoi(v)
			if err == nil {
				err = q.SetWorkers(n)
			}
			return fmt.Sprintf("workers %d", n), err
		})
		return true
	}
	return false
}

// serveSet answers a control POST: set applies the query parameter
// param and says what it set; usage is the answer to another method.
func (q *Queue) serveSet(w http.ResponseWriter, r *http.Request, param, usage string, set func(string) (string, error)) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, usage, http.StatusMethodNotAllowed)
		return
	}
	what, err := set(r.URL.Query().Get(param))
	if err != nil {
		http.Error(w, param+": "+err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%s: capacity %.1f req/s\n", what, q.Capacity())
}

// ServeHTTP answers /_meta and /healthz directly (and /_records, /_scale
// and /_workers when configured) and every other path after the request's
// service in the emulated server.
func (q *Queue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serveMeta(w, r, q.Meta) || q.serveControl(w, r) {
		return
	}
	status := q.serve(w, r)
	q.ctr.count(status)
}

func (q *Queue) serve(w http.ResponseWriter, r *http.Request) int {
	quality, err := ParseQuality(r.Header)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return http.StatusBadRequest
	}
	h := w.Header()
	res, err := q.Serve(r.Context(), quality, labDeadline(r.Header))
	switch {
	case errors.Is(err, ErrQueueGone):
		return 0
	case errors.Is(err, ErrQueueClosed):
		h.Set("Retry-After", "1")
		http.Error(w, "queue backend closing", http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrQueueFull):
		h.Set(UtilizationHeader, formatUtilization(res.Utilization))
		h.Set("Retry-After", "1")
		http.Error(w, "queue backend full", http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable
	}
	h.Set(UtilizationHeader, formatUtilization(res.Utilization))
	h.Set("X-Sluice-Demand-Ms", strconv.FormatFloat(res.Demand*1e3, 'f', 3, 64))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(q.body)))
	w.WriteHeader(http.StatusOK)
	w.Write(q.body)
	return http.StatusOK
}

// Errors of Queue.Serve.
var (
	// ErrQueueFull: the system already held Workers+QueueLimit requests.
	ErrQueueFull = errors.New("queue backend full")
	// ErrQueueClosed: the backend is closed, or closed while the request
	// waited.
	ErrQueueClosed = errors.New("queue backend closing")
	// ErrQueueGone: with FreeGone, the caller's context ended while the
	// request waited (its work stays queued and is still done).
	ErrQueueGone = errors.New("queue backend: caller gone")
)

// Served is one request's service by Serve.
type Served struct {
	// Demand is the request's demand in seconds (its drawn service time
	// times its quality's factor and the scale).
	Demand float64
	// Utilization is the busy fraction at its completion (or at its
	// rejection).
	Utilization float64
}

// Serve runs one request of the given quality through the emulated
// server and returns when its service completes: the model behind every
// protocol the Queue is served over (HTTP here, gRPC in GRPCService).
// It is ErrQueueFull at once when the queue limit refuses the request,
// ErrQueueClosed when the backend is closed, ErrQueueGone when ctx ends
// first and FreeGone is set. userDeadline (zero: none) is recorded with
// Record. A caller that stops waiting
// does not take its request out: like a real server, the work is done.
func (q *Queue) Serve(ctx context.Context, quality float64, userDeadline time.Time) (Served, error) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return Served{}, ErrQueueClosed
	}
	demand := q.svc.Sample(q.rng) * EffectiveQuality(quality) * q.scale
	q.nextID++
	id := q.nextID
	wt := &queueWaiter{ch: make(chan struct{}), rec: -1}
	q.waiters[id] = wt
	var ok bool
	now := time.Now()
	if q.cfg.Record {
		wt.rec = len(q.records)
		q.records = append(q.records, QueueRecord{Arrival: now, Demand: demand, UserDeadline: userDeadline})
	}
	q.done, ok = q.core.arrive(now, id, demand, q.done[:0])
	if !ok {
		if wt.rec >= 0 {
			q.records[wt.rec].Demand = 0
		}
		delete(q.waiters, id)
		var u float64
		q.done, u = q.core.utilization(time.Now(), q.done)
		q.releaseLocked()
		q.mu.Unlock()
		return Served{Demand: demand, Utilization: u}, ErrQueueFull
	}
	q.releaseLocked()
	q.mu.Unlock()

	var gone <-chan struct{}
	if q.cfg.Record {
		// Seen at the work's completion (releaseLocked).
		stop := context.AfterFunc(ctx, func() {
			q.mu.Lock()
			wt.gone = true
			q.mu.Unlock()
		})
		defer stop()
	}
	if q.cfg.FreeGone {
		gone = ctx.Done()
	}
	select {
	case <-wt.ch:
	case <-gone:
		// Nobody reads an answer; the work stays queued.
		return Served{Demand: demand}, ErrQueueGone
	case <-q.closing:
		return Served{Demand: demand}, ErrQueueClosed
	}
	return Served{Demand: demand, Utilization: wt.utilization}, nil
}

// labDeadline reads LabDeadlineHeader (zero when absent or malformed).
func labDeadline(h http.Header) time.Time {
	v, err := strconv.ParseInt(h.Get(LabDeadlineHeader), 10, 64)
	if err != nil || v <= 0 {
		return time.Time{}
	}
	return time.Unix(0, v)
}

// Close stops the timer and answers every waiting request 503. It is
// idempotent.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	q.timer.Stop()
	close(q.closing)
	return nil
}
