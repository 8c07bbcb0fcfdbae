// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/monitor"
)

// The workload of sluice's adaptive experiment, from its spec
// (figure.DefaultAdaptive): the backend, the objective and the clients.
var (
	spec = figure.DefaultAdaptive()
	// workers and service make the backend: FIFO workers with exponential
	// service of this mean (400 req/s nominal).
	workers = spec.Workers
	service = spec.ServiceTime
	// slo is the objective goodput counts answers within.
	slo = spec.SLO
	// clientTimeout is the clients' timeout.
	clientTimeout = spec.Timeout
	// capacityUsers is the number of closed-loop users that measure the
	// backend's capacity.
	capacityUsers = 8 * workers
)

const (
	// conns bounds the load generator's connections and each proxy's
	// upstream connections per server (never binding).
	conns = 4096
	// grace is how long a run waits after its load's schedule ends before
	// the requests still in flight are aborted (and left out).
	grace = 2 * time.Second
)

// phase is one of the adaptive experiment's phases.
type phase struct {
	name, title string
	// backends is the number of backends (workers split evenly).
	backends int
}

var phases = []phase{
	{"a", "(a) flash crowd 0.5× → 10× capacity within 1 s", 1},
	{"b", "(b) the backend's capacity halves", 1},
	{"c", "(c) the backend's capacity doubles", 1},
	{"d", "(d) parallelism 4 → 16 workers, same cost per request", 1},
	{"e", "(e) two backends of 2 workers, one becomes 3× slower", 2},
}

// plan is the timing and the offered loads, in multiples of the measured
// capacity.
type plan struct {
	warm, crowd, changeAt, after time.Duration
	base, crowdX, overloadX      float64
	capLength                    time.Duration
}

// at returns the time of phase p's event: the crowd's arrival (a) or the
// backend's change (b–e), from the start of the run.
func (pl plan) at(p phase) time.Duration {
	if p.name == "a" {
		return pl.warm
	}
	return pl.warm + pl.changeAt
}

// length returns the length of a run of phase p.
func (pl plan) length(p phase) time.Duration {
	if p.name == "a" {
		return pl.warm + pl.crowd
	}
	return pl.warm + pl.changeAt + pl.after
}

// schedule is the open-loop rate of phase p: the adaptive figure's
// (figure.AdaptiveRates).
func (pl plan) schedule(p phase, capacity float64) (dist.Schedule, error) {
	return dist.NewSchedule(figure.AdaptiveRates(p.name, capacity, pl.warm, pl.base, pl.crowdX, pl.overloadX)...)
}

// newBackend is the queue testbed: n FIFO workers with exponential
// service of mean service.
func newBackend(seed uint64, n int) (*testbed.Queue, error) {
	cfg := testbed.DefaultQueueConfig()
	cfg.Workers, cfg.Discipline, cfg.Seed = n, testbed.DisciplineFIFO, seed
	cfg.Service = "exp:" + service.String()
	return testbed.NewQueue(cfg)
}

// change applies phase p's change (the adaptive figure's,
// figure.AdaptiveChangeOf) to its backends and returns the nominal
// capacity after it.
func change(p phase, bes []*testbed.Queue) (float64, error) {
	ch := figure.AdaptiveChangeOf(p.name, workers, service)
	switch {
	case ch.Scale > 0:
		return ch.Capacity, bes[ch.Backend].SetScale(ch.Scale)
	case ch.Workers > 0:
		return ch.Capacity, bes[ch.Backend].SetWorkers(ch.Workers)
	}
	return ch.Capacity, nil
}

// server is an HTTP server on a free loopback port.
type server struct {
	URL string
	srv *http.Server
}

func serve(h http.Handler) (*server, error) {
	ln, err := testbed.Listen("127.0.0.1:0", false)
	if err != nil {
		return nil, err
	}
	s := &server{URL: "http://" + ln.Addr().String(),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, ErrorLog: quietLog}}
	go s.srv.Serve(ln) //nolint:errcheck // Close ends it with ErrServerClosed
	return s, nil
}

// Close closes the listener and every connection at once.
func (s *server) Close() error { return s.srv.Close() }

// outcome is a request's outcome, as loadgen reports it.
type outcome uint8

const (
	outOK outcome = iota
	outRejected
	outTimeout
	outError
	outAborted
)

func outcomeOf(s string) outcome {
	switch s {
	case "ok":
		return outOK
	case "rejected":
		return outRejected
	case "timeout":
		return outTimeout
	case "aborted":
		return outAborted
	default:
		return outError
	}
}

// record is one finished request: its intended send time and end (from
// the load's start), latency from the intended time and outcome.
type record struct {
	intended, done, lat time.Duration
	out                 outcome
}

// recorder collects the records of a run; safe for concurrent use.
type recorder struct {
	mu   sync.Mutex
	recs []record
}

func (r *recorder) add(q loadgen.RequestRecord) {
	rec := record{intended: q.Intended, done: q.Done, lat: q.Latency, out: outcomeOf(q.Outcome)}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

// lastSecond summarises the requests that ended in (now−1s, now]: answers,
// rejections, other failures and the answers' p99 in ms.
func (r *recorder) lastSecond(now time.Duration) (ok, rejected, failed int, p99 float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lat []float64
	for i := len(r.recs) - 1; i >= 0; i-- {
		q := r.recs[i]
		if q.done < now-3*time.Second {
			break // records arrive in near completion order
		}
		if q.done <= now-time.Second || q.done > now {
			continue
		}
		switch q.out {
		case outOK:
			ok++
			lat = append(lat, float64(q.lat)/float64(time.Millisecond))
		case outRejected:
			rejected++
		case outAborted:
		default:
			failed++
		}
	}
	return ok, rejected, failed, monitor.Percentile(lat, 0.99)
}

func (r *recorder) records() []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]record(nil), r.recs...)
}

// urlWorkload is the one-URL workload the adaptive experiment sends.
func urlWorkload(name string) (*loadgen.URLs, error) {
	return loadgen.NewURLs(name, "url", []loadgen.Weighted{{Name: "/page", Weight: 1}})
}

// measureCapacity measures a backend's throughput with capacityUsers
// closed-loop users without think time, directly, over length (the first
// quarter left out), as the adaptive experiment does.
func measureCapacity(ctx context.Context, seed uint64, length time.Duration) (float64, error) {
	be, err := newBackend(seed, workers)
	if err != nil {
		return 0, err
	}
	srv, err := serve(be)
	if err != nil {
		return 0, errors.Join(err, be.Close())
	}
	defer func() { srv.Close(); be.Close() }()
	users, err := dist.ConstantSchedule(float64(capacityUsers))
	if err != nil {
		return 0, err
	}
	w, err := urlWorkload("capacity")
	if err != nil {
		return 0, err
	}
	rec := &recorder{}
	cfg := loadgen.Config{Target: srv.URL, Mode: loadgen.ModeClosed, Duration: length, Seed: seed, Timeout: clientTimeout,
		Workload: w, Users: users, Think: dist.Deterministic{}, OnRequest: rec.add}
	if _, err := loadgen.Run(ctx, cfg); err != nil {
		return 0, fmt.Errorf("capacity: %w", err)
	}
	warm, ok := length/4, 0
	for _, r := range rec.records() {
		if r.out == outOK && r.intended >= warm && r.intended < length {
			ok++
		}
	}
	return float64(ok) / (length - warm).Seconds(), nil
}
