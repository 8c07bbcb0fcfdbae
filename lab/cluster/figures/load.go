// SPDX-License-Identifier: Apache-2.0

package figures

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
	"github.com/sluicehq/sluice/lab/loadgen"
)

// spread is the clients' load balancer: it sends each request to the
// next instance by smooth weighted round robin (equal weights: plain
// round robin), and, as a load balancer's health check would, stops
// sending to an instance whose connection is refused, retrying the
// request on the next one (nothing was sent).
type spread struct {
	inner   *http.Transport
	hosts   []string
	weights []int

	mu   sync.Mutex
	cur  []int
	down []bool
}

func newSpread(hosts []string, weights []int) *spread {
	if weights == nil {
		weights = make([]int, len(hosts))
		for i := range weights {
			weights[i] = 1
		}
	}
	return &spread{inner: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
		hosts: hosts, weights: weights, cur: make([]int, len(hosts)), down: make([]bool, len(hosts))}
}

// next picks an instance (smooth weighted round robin over the live ones).
func (s *spread) next() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	total, best := 0, -1
	for i, w := range s.weights {
		if s.down[i] {
			continue
		}
		s.cur[i] += w
		total += w
		if best < 0 || s.cur[i] > s.cur[best] {
			best = i
		}
	}
	if best >= 0 {
		s.cur[best] -= total
	}
	return best
}

func (s *spread) markDown(i int) {
	s.mu.Lock()
	s.down[i] = true
	s.mu.Unlock()
}

func (s *spread) RoundTrip(r *http.Request) (*http.Response, error) {
	var last error = errors.New("no live instance")
	for range s.hosts {
		i := s.next()
		if i < 0 {
			break
		}
		out := r.Clone(r.Context())
		out.URL.Host, out.Host = s.hosts[i], s.hosts[i]
		resp, err := s.inner.RoundTrip(out)
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			s.markDown(i)
			last = err
			continue
		}
		return resp, err
	}
	return nil, last
}

// result is one finished request, timed by the wall clock: done when it
// finished, sent when it was sent (when the proxy decided on it, give or
// take the loopback).
type result struct {
	client string
	done   time.Time
	sent   time.Time
	status int
	out    string // loadgen's outcome: ok, rejected, http_error, ...
}

// results collects the requests of concurrent loads.
type results struct {
	mu   sync.Mutex
	recs []result
}

func (r *results) hook(rec loadgen.RequestRecord) {
	now := time.Now()
	r.mu.Lock()
	r.recs = append(r.recs, result{client: rec.Client, done: now, sent: now.Add(-(rec.Done - rec.Sent)), status: rec.Status, out: rec.Outcome})
	r.mu.Unlock()
}

func (r *results) all() []result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]result(nil), r.recs...)
}

// countSent counts the requests sent in [from, to) that f accepts.
func countSent(recs []result, from, to time.Time, f func(result) bool) int {
	n := 0
	for _, r := range recs {
		if !r.sent.Before(from) && r.sent.Before(to) && f(r) {
			n++
		}
	}
	return n
}

// count counts the requests done in [from, to) that f accepts.
func count(recs []result, from, to time.Time, f func(result) bool) int {
	n := 0
	for _, r := range recs {
		if !r.done.Before(from) && r.done.Before(to) && f(r) {
			n++
		}
	}
	return n
}

func ok(r result) bool { return r.out == "ok" }

// failed is a request that neither succeeded nor was an admission
// rejection (503 with Retry-After): an error the cluster caused.
func failed(r result) bool { return r.out != "ok" && r.out != "rejected" }

// openLoad is an open loop of rate req/s for length, at constant spacing,
// on path, through t.
func openLoad(target string, t http.RoundTripper, rate float64, length time.Duration, seed uint64, client string, sched *dist.Schedule, rec *results) (loadgen.Config, error) {
	w, err := loadgen.NewURLs("figures", "url", []loadgen.Weighted{{Name: "/file", Weight: 1}})
	if err != nil {
		return loadgen.Config{}, err
	}
	s := dist.Schedule{}
	if sched != nil {
		s = *sched
	} else if s, err = dist.NewSchedule(dist.Segment{Start: 0, Rate: rate}); err != nil {
		return loadgen.Config{}, err
	}
	c := loadgen.Config{Target: target, Mode: loadgen.ModeOpen, Duration: length, Seed: seed, Timeout: 30 * time.Second,
		Workload: w, Arrivals: dist.Constant{Rate: s}, Transport: t, OnRequest: rec.hook, MaxInflight: 4000}
	if client != "" {
		c.Clients = []loadgen.Weighted{{Name: client, Weight: 1}}
		c.ClientHeader = "X-Sluice-Client"
	}
	return c, nil
}

// runLoads runs the loads at once and waits for them.
func runLoads(ctx context.Context, cfgs ...loadgen.Config) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cfgs))
	for i, c := range cfgs {
		wg.Go(func() { _, errs[i] = loadgen.Run(ctx, c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
