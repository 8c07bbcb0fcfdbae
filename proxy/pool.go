// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/gate"
	"github.com/sluicehq/sluice/monitor"
	"github.com/sluicehq/sluice/proxy/internal/h1"
	"github.com/sluicehq/sluice/proxy/tlsconf"
)

// Backend is one upstream server of a Pool. Its counters are safe for
// concurrent use.
type Backend struct {
	// URL is the server's parsed URL.
	URL *url.URL
	// Name is the URL as configured; it labels metrics.
	Name     string
	index    int // its place in the pool's servers, from 0
	max      int64
	inFlight atomic.Int64
	served   atomic.Uint64
}

// InFlight returns the number of requests this server is handling.
func (b *Backend) InFlight() int { return int(b.inFlight.Load()) }

// MaxConcurrency returns the server's concurrency limit.
func (b *Backend) MaxConcurrency() int { return int(b.max) }

// Pool is the upstream pool: servers with a per-server concurrency limit
// behind one bounded FIFO wait queue, and the HTTP transport shared by the
// servers.
//
// The queue is a gate.Limiter whose limit is the sum of the servers'
// max_concurrency: a request holding one of its slots is guaranteed a
// server below its limit, which Acquire then picks (round-robin or least
// in flight). The queue's length is the proxy's "listen queue" signal.
// A Pool is safe for concurrent use.
type Pool struct {
	backends  []*Backend
	lim       *gate.Limiter
	leastIF   bool
	rr        atomic.Uint64
	maxQueue  int
	timeout   time.Duration
	capacity  int
	transport *http.Transport   // the standard transport: https, HTTP/2, bodies, upgrades
	h1        *h1.Transport     // the common request's transport, falling back to transport
	rt        http.RoundTripper // h1, or a stand-in in benchmarks
	h2c       h2cTransport      // gRPC calls to http:// servers (grpc.go)
	tls       *tlsconf.Upstream // backends.tls (package tlsconf), or nil
	cfg       BackendsConfig
	busy      *monitor.Busy // busy time of the slots, when a pool-busy sensor reads it

	queueFull, queueTimeout atomic.Uint64
	// waited counts the requests that found no free slot, waited and got
	// one; waitNS sums their waits in nanoseconds.
	waited, waitNS atomic.Uint64
}

// Pool errors (both are answered 503).
var (
	ErrPoolQueueFull    = errors.New("backend pool saturated: wait queue full")
	ErrPoolQueueTimeout = errors.New("backend pool saturated: queue timeout")
)

// NewPool builds a pool from a validated BackendsConfig (with defaults).
func NewPool(cfg BackendsConfig) (*Pool, error) {
	p := &Pool{leastIF: cfg.Balance == BalanceLeastInFlight, timeout: cfg.Queue.Timeout, cfg: cfg}
	for i, s := range cfg.Servers {
		u, err := parseBackendURL(s.URL)
		if err != nil {
			return nil, fieldErr(fmt.Sprintf("backends.servers[%d].url", i), "%q is invalid: %v", s.URL, err)
		}
		if s.MaxConcurrency < 1 {
			return nil, fieldErr(fmt.Sprintf("backends.servers[%d].max_concurrency", i), "%d is invalid: must be ≥ 1", s.MaxConcurrency)
		}
		p.backends = append(p.backends, &Backend{URL: u, Name: s.URL, index: i, max: int64(s.MaxConcurrency)})
		p.capacity += s.MaxConcurrency
	}
	if len(p.backends) == 0 {
		return nil, fieldErr("backends.servers", "at least one server is required")
	}
	if cfg.Queue.Max == nil {
		return nil, fieldErr("backends.queue.max", "unset: call SetDefaults")
	}
	p.maxQueue = *cfg.Queue.Max
	lim, err := gate.NewLimiter(p.capacity, p.maxQueue, cfg.Queue.Timeout)
	if err != nil {
		return nil, fieldErr("backends.queue", "%v", err)
	}
	if d := cfg.Queue.Discipline; d == DisciplineCoDel || d == DisciplineCoDelLIFO {
		lim.SetDiscipline(gate.Discipline{CoDel: true, LIFO: d == DisciplineCoDelLIFO,
			Target: cfg.Queue.CoDelTarget, Interval: cfg.Queue.CoDelInterval})
	}
	p.lim = lim
	p.transport = NewTransport(cfg)
	if cfg.TLS != nil {
		if p.tls, err = tlsconf.NewUpstream(cfg.TLS, cfg.Timeouts.Dial, time.Now()); err != nil {
			return nil, err
		}
		p.transport.DialTLSContext = p.tls.DialTLS
	}
	p.h1 = newH1Transport(cfg, p.transport)
	p.rt = p.h1
	return p, nil
}

// newH1Transport returns the pool's own HTTP/1.1 transport for cfg
// (internal/h1), falling back to std for the requests it does not send
// itself.
func newH1Transport(cfg BackendsConfig, std *http.Transport) *h1.Transport {
	return h1.NewTransport(std, h1.Options{DialTimeout: cfg.Timeouts.Dial, ResponseHeaderTimeout: cfg.Timeouts.ResponseHeader,
		MaxIdlePerHost: cfg.MaxIdleConnsPerHost, IdleTimeout: cfg.IdleConnTimeout})
}

// NewTransport returns the upstream transport for cfg (with defaults):
// no environment proxy, the dial and response-header timeouts, keep-alive
// pools sized by MaxIdleConnsPerHost, no transparent compression (bodies
// pass through as the server sent them), HTTP/2 attempted with https
// servers.
func NewTransport(cfg BackendsConfig) *http.Transport {
	d := &net.Dialer{Timeout: cfg.Timeouts.Dial, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:       cfg.IdleConnTimeout,
		TLSHandshakeTimeout:   cfg.Timeouts.Dial,
		ResponseHeaderTimeout: cfg.Timeouts.ResponseHeader,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     true,
	}
}

// Acquire waits for a server slot (FIFO, at most the queue timeout) and
// returns the chosen server, which the caller must give back with
// Release. It returns ErrPoolQueueFull or ErrPoolQueueTimeout when the
// pool is saturated, or ctx's error if the client left while waiting.
func (p *Pool) Acquire(ctx context.Context) (*Backend, error) {
	b, _, err := p.acquireAt(ctx)
	return b, err
}

// acquireAt is Acquire that also says when the slot was granted: the
// zero time when one was free at once, so that the caller, who knows
// when that was, reads no clock.
func (p *Pool) acquireAt(ctx context.Context) (*Backend, time.Time, error) {
	if p.lim.TryAcquire() {
		return p.acquired(), time.Time{}, nil
	}
	b, err := p.acquireWaiting(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	return b, time.Now(), nil
}

// acquireWaiting is Acquire when no slot was free: it queues, and
// measures the wait of a request that gets a slot.
func (p *Pool) acquireWaiting(ctx context.Context) (*Backend, error) {
	start := time.Now()
	if err := p.lim.Acquire(ctx, 0); err != nil {
		switch {
		case errors.Is(err, gate.ErrQueueFull):
			p.queueFull.Add(1)
			return nil, ErrPoolQueueFull
		case errors.Is(err, gate.ErrQueueTimeout):
			p.queueTimeout.Add(1)
			return nil, ErrPoolQueueTimeout
		}
		return nil, err
	}
	p.waitNS.Add(uint64(time.Since(start)))
	p.waited.Add(1)
	return p.acquired(), nil
}

// acquired picks the server of a request that holds a slot.
func (p *Pool) acquired() *Backend {
	b := p.pick()
	b.served.Add(1)
	if p.busy != nil {
		p.busy.Begin(time.Now())
	}
	return b
}

// waits returns how many requests waited for a slot and got one, and the
// sum of their waits in nanoseconds.
func (p *Pool) waits() (n, ns uint64) { return p.waited.Load(), p.waitNS.Load() }

// trackBusy makes the pool measure the busy time of its slots from now
// on (the pool-busy utilization sensor). Call it before the pool serves.
func (p *Pool) trackBusy(now time.Time) error {
	b, err := monitor.NewBusy(p.capacity, now)
	if err != nil {
		return err
	}
	p.busy = b
	return nil
}

// pick chooses a server below its limit and counts the request on it. The
// caller holds a limiter slot, and every holder counts on at most one
// server, so the servers' in-flight counts sum to less than their limits
// and a free server exists: the loop ends.
func (p *Pool) pick() *Backend {
	bs := p.backends
	n := len(bs)
	if n == 1 {
		bs[0].inFlight.Add(1)
		return bs[0]
	}
	start := int(p.rr.Add(1) % uint64(n))
	for {
		if p.leastIF {
			var best *Backend
			var bestN int64
			for i := range n {
				b := bs[(start+i)%n]
				c := b.inFlight.Load()
				if c < b.max && (best == nil || c < bestN) {
					best, bestN = b, c
				}
			}
			if best != nil && best.inFlight.CompareAndSwap(bestN, bestN+1) {
				return best
			}
			continue
		}
		for i := range n {
			b := bs[(start+i)%n]
			c := b.inFlight.Load()
			if c < b.max && b.inFlight.CompareAndSwap(c, c+1) {
				return b
			}
		}
	}
}

// Release gives back a slot taken by Acquire. The server's count drops
// before the slot is freed, so the next holder always finds a server.
func (p *Pool) Release(b *Backend) {
	if p.busy != nil {
		p.busy.End(time.Now())
	}
	b.inFlight.Add(-1)
	p.lim.Release()
}

// Backends returns the servers in configuration order.
func (p *Pool) Backends() []*Backend { return p.backends }

// QueueLen returns the number of requests waiting for a server slot.
func (p *Pool) QueueLen() int { return p.lim.QueueLen() }

// InFlight returns the number of requests holding a server slot.
func (p *Pool) InFlight() int { return p.lim.InFlight() }

// Capacity returns the sum of the servers' max_concurrency.
func (p *Pool) Capacity() int { return p.capacity }

// Transport returns the standard upstream transport (the one for https,
// HTTP/2, request bodies and upgrades).
func (p *Pool) Transport() *http.Transport { return p.transport }

// CloseIdleConnections closes the idle upstream connections of both
// transports.
func (p *Pool) CloseIdleConnections() {
	p.h1.CloseIdleConnections()
	p.h2c.closeIdle()
}

// Close closes the idle upstream connections and keeps no more idle: a
// retired pool's connections close as their answers end.
func (p *Pool) Close() { p.h1.Close() }

// PoolState is the pool as GET /state shows it.
type PoolState struct {
	Balance  string         `json:"balance"`
	Capacity int            `json:"capacity"`
	InFlight int            `json:"in_flight"`
	Queue    QueueState     `json:"queue"`
	Servers  []BackendState `json:"servers"`
}

// QueueState is the pool's wait queue.
type QueueState struct {
	Length     int    `json:"length"`
	Max        int    `json:"max"`
	Timeout    string `json:"timeout"`
	Discipline string `json:"discipline"`
	Full       uint64 `json:"rejected_full"`
	TimedOut   uint64 `json:"rejected_timeout"`
	// Waited counts the requests that waited for a slot and got one;
	// WaitSeconds sums their waits, in seconds.
	Waited      uint64  `json:"waited"`
	WaitSeconds float64 `json:"wait_seconds_total"`
}

// BackendState is one server.
type BackendState struct {
	URL            string `json:"url"`
	InFlight       int    `json:"in_flight"`
	MaxConcurrency int    `json:"max_concurrency"`
	Served         uint64 `json:"served"`
}

// State returns a snapshot of the pool.
func (p *Pool) State() PoolState {
	st := PoolState{Balance: p.cfg.Balance, Capacity: p.capacity, InFlight: p.lim.InFlight(),
		Queue: QueueState{Length: p.lim.QueueLen(), Max: p.maxQueue, Timeout: p.timeout.String(), Discipline: p.cfg.Queue.Discipline,
			Full: p.queueFull.Load(), TimedOut: p.queueTimeout.Load(), Waited: p.waited.Load(),
			WaitSeconds: float64(p.waitNS.Load()) / 1e9}}
	for _, b := range p.backends {
		st.Servers = append(st.Servers, BackendState{URL: b.Name, InFlight: b.InFlight(),
			MaxConcurrency: int(b.max), Served: b.served.Load()})
	}
	return st
}
