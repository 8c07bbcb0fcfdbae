// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
)

// maxBody is how much of a body a session that NeedsBody sees.
const maxBody = 1 << 20

// noneType labels dropped requests, which never reached a session.
const noneType = "none"

// runner is the state of one Run.
type runner struct {
	cfg      Config
	base     string // scheme://host of the target
	start    time.Time
	rec      *recorder
	stop     chan struct{}   // closed when no new request may be issued
	abortCtx context.Context // cancelled when in-flight requests must end
	abortFn  context.CancelFunc
	needBody bool

	rts        []http.RoundTripper // one per client with SourceAddrs, else one
	own        []*http.Transport   // transports to close at the end
	dialers    []*net.Dialer       // parallel to rts
	lean       bool                // use the direct HTTP/1.1 client (h1.go)
	hostport   string              // host:port to dial
	conns      connSet
	pools      []*connPool // open loop: per transport index; nil in closed loop
	classNames []string
	classPick  picker
	clientName []string
	clientHdr  bool
	clientPick picker

	grpc grpcClients // gRPC mode (Config.GRPC)

	inflight    atomic.Int64
	maxInflight int
	users       atomic.Int64
	maxUsers    atomic.Int64
	thinks      atomic.Int64
	thinkNs     atomic.Int64
	retries     atomic.Int64
}

// newRunner applies defaults to cfg, validates it and prepares a run that
// starts now. The caller must call close.
func newRunner(cfg Config) (*runner, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Target)
	r := &runner{
		cfg:      cfg,
		base:     u.Scheme + "://" + u.Host,
		stop:     make(chan struct{}),
		needBody: cfg.Workload.NeedsBody(),
		hostport: u.Host,
		lean:     cfg.Transport == nil && u.Scheme == "http",
	}
	if u.Port() == "" {
		r.hostport = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	r.conns.m = map[*h1conn]struct{}{}
	r.setupIdentities()
	if cfg.Mode == ModeOpen {
		for range r.dialers {
			r.pools = append(r.pools, newConnPool(cfg.MaxConns))
		}
	}
	if cfg.GRPC != nil {
		r.lean = false
		if err := r.setupGRPC(u.Scheme); err != nil {
			return nil, err
		}
	}
	r.abortCtx, r.abortFn = context.WithCancel(context.Background())
	r.start = time.Now()
	r.rec = newRecorder(cfg.Timeout+time.Second, r.start.UnixMilli())
	return r, nil
}

// abort cancels every request in flight.
func (r *runner) abort() {
	r.abortFn()
	r.conns.abortAll()
}

// close releases the run's resources once every goroutine has finished.
func (r *runner) close() {
	r.abortFn()
	r.closeGRPC()
	for _, t := range r.own {
		t.CloseIdleConnections()
	}
}

// user is the per-goroutine state of a closed-loop user or an open-loop
// worker.
type user struct {
	rng   *rand.Rand
	sess  Session
	body  *[]byte // pooled body copy between do and Observe (NeedsBody only)
	wbuf  []byte
	tm    *time.Timer
	conns map[int]*h1conn // direct-client connections by transport index
}

// Run executes a load run and returns its result. It applies SetDefaults to
// a copy of cfg and returns Validate's error before sending anything.
//
// Cancelling ctx (Ctrl-C) stops issuing requests, aborts the ones in
// flight (counted as Aborted) and returns the partial result with
// Interrupted set and a nil error. Otherwise Run issues requests for
// cfg.Duration, then waits for in-flight requests (at most cfg.Timeout).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	r, err := newRunner(cfg)
	if err != nil {
		return nil, err
	}
	defer r.close()
	cfg = r.cfg
	genDone := make(chan struct{})
	go func() {
		defer close(genDone)
		if cfg.Mode == ModeOpen {
			r.openLoop()
		} else {
			r.closedLoop()
		}
	}()

	res := &Result{Mode: cfg.Mode, Workload: cfg.Workload.Name(), Seed: cfg.Seed, Elapsed: cfg.Duration}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	end := time.NewTimer(cfg.Duration)
	defer end.Stop()
	done := ctx.Done()
	stopped := false
	stopIssuing := func() {
		if !stopped {
			stopped = true
			close(r.stop)
		}
	}
loop:
	for {
		select {
		case <-ticker.C:
			el := time.Since(r.start)
			r.rec.advance(el)
			if cfg.Progress != nil {
				cfg.Progress(r.progress(el))
			}
		case <-end.C:
			stopIssuing()
		case <-done:
			done = nil
			if !stopped {
				if el := time.Since(r.start); el < cfg.Duration {
					res.Elapsed = el
					res.Interrupted = true
				}
			}
			stopIssuing()
			r.abort()
		case <-genDone:
			break loop
		}
	}
	stopIssuing()
	r.rec.finish(res.Elapsed, res)
	res.MaxInflight = r.maxInflight
	res.MaxUsers = int(r.maxUsers.Load())
	res.Thinks = r.thinks.Load()
	res.ThinkTotal = time.Duration(r.thinkNs.Load())
	res.Retries = r.retries.Load()
	if cfg.Progress != nil {
		cfg.Progress(r.progress(time.Since(r.start)))
	}
	return res, nil
}

func (r *runner) progress(el time.Duration) Progress {
	p := Progress{Elapsed: el, Duration: r.cfg.Duration, Counts: r.rec.totals(),
		InFlight: r.inflight.Load(), Users: int(r.users.Load())}
	p.Last, p.HaveLast = r.rec.lastSecond()
	return p
}

// setupIdentities builds the class and client tables and the transports.
func (r *runner) setupIdentities() {
	c := &r.cfg
	for _, w := range c.Classes {
		r.classNames = append(r.classNames, w.Name)
	}
	if len(c.Classes) > 0 {
		r.classPick = newPicker(weightsOf(c.Classes))
	}
	switch {
	case len(c.Clients) > 0:
		for _, w := range c.Clients {
			r.clientName = append(r.clientName, w.Name)
		}
		r.clientPick = newPicker(weightsOf(c.Clients))
		r.clientHdr = true
	case len(c.SourceAddrs) > 0:
		ws := make([]float64, len(c.SourceAddrs))
		for i, a := range c.SourceAddrs {
			r.clientName = append(r.clientName, a.String())
			ws[i] = 1
		}
		r.clientPick = newPicker(ws)
	}
	if len(c.SourceAddrs) > 0 {
		for _, a := range c.SourceAddrs {
			r.dialers = append(r.dialers, r.newDialer(&net.TCPAddr{IP: a.AsSlice()}))
		}
	} else {
		r.dialers = []*net.Dialer{r.newDialer(nil)}
	}
	if c.Transport != nil {
		r.rts = []http.RoundTripper{c.Transport}
		return
	}
	for _, d := range r.dialers {
		t := r.newTransport(d)
		r.own = append(r.own, t)
		r.rts = append(r.rts, t)
	}
}

func (r *runner) newDialer(local *net.TCPAddr) *net.Dialer {
	d := &net.Dialer{Timeout: r.cfg.Timeout, KeepAlive: 30 * time.Second}
	if ct := r.cfg.ConnectTimeout; ct > 0 && ct < d.Timeout {
		d.Timeout = ct
	}
	if local != nil {
		d.LocalAddr = local
	}
	return d
}

// newTransport returns an HTTP/1.1 transport tuned for load generation:
// no proxy (traffic stays on loopback), no compression, idle pool as large
// as the possible concurrency, the dialer's source address. It serves
// https targets and absolute workload URLs on another loopback host; plain
// http requests to the target use the direct client (h1.go).
func (r *runner) newTransport(d *net.Dialer) *http.Transport {
	idle := r.cfg.MaxInflight
	if r.cfg.Mode == ModeClosed {
		idle = int(math.Round(r.cfg.Users.Max()))
	}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		DisableCompression:  true,
		DisableKeepAlives:   r.cfg.DisableKeepAlives,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: idle,
		MaxConnsPerHost:     r.cfg.MaxConns, // 0 (closed loop): no limit
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
}

func (r *runner) newUser(stream uint64) *user {
	u := &user{
		rng: rand.New(rand.NewPCG(r.cfg.Seed, stream)),
	}
	u.sess = r.cfg.Workload.NewSession(u.rng)
	return u
}

// sleep waits d or until the run stops issuing; it reports whether the
// full wait elapsed.
func (r *runner) sleep(u *user, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-r.stop:
			return false
		default:
			return true
		}
	}
	if u.tm == nil {
		u.tm = time.NewTimer(d)
	} else {
		u.tm.Reset(d)
	}
	select {
	case <-u.tm.C:
		return true
	case <-r.stop:
		u.tm.Stop()
		return false
	}
}

// Random streams: the pacer uses stream 0, open-loop worker i stream
// 1<<32+i, closed-loop user i stream 1<<33+i.
const (
	streamPacer  = 0
	streamWorker = 1 << 32
	streamUser   = 1 << 33
)

type job struct {
	intended      time.Duration
	class, client int
}

// openLoop dispatches arrivals to a pool of worker goroutines that grows on
// demand up to MaxInflight; an arrival that finds every worker busy and the
// pool at its bound is dropped.
func (r *runner) openLoop() {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, streamPacer))
	jobs := make(chan job)
	var wg sync.WaitGroup
	workers := 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var t time.Duration
loop:
	for {
		next := r.cfg.Arrivals.Next(rng, t)
		if next >= r.cfg.Duration || next <= t {
			break
		}
		t = next
		if wait := time.Until(r.start.Add(t)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-r.stop:
				timer.Stop()
				break loop
			}
		} else {
			select {
			case <-r.stop:
				break loop
			default:
			}
		}
		j := job{intended: t, class: -1, client: -1}
		if r.classNames != nil {
			j.class = r.classPick.pick(rng.Float64())
		}
		if r.clientName != nil {
			j.client = r.clientPick.pick(rng.Float64())
		}
		select {
		case jobs <- j:
		default:
			if workers < r.cfg.MaxInflight {
				workers++
				if workers > r.maxInflight {
					r.maxInflight = workers
				}
				wg.Add(1)
				go r.worker(uint64(workers-1), j, jobs, &wg)
			} else {
				r.drop(j)
			}
		}
	}
	close(jobs)
	wg.Wait()
	r.h1ClosePools()
}

func (r *runner) worker(id uint64, first job, jobs <-chan job, wg *sync.WaitGroup) {
	defer wg.Done()
	u := r.newUser(streamWorker + id)
	for j, ok := first, true; ok; j, ok = <-jobs {
		req := u.sess.Next(u.rng)
		status, body, _ := r.do(u, req, j.intended, j.class, j.client)
		u.sess.Observe(req, status, body)
		r.releaseBody(u)
	}
}

func (r *runner) name(names []string, i int) string {
	if i < 0 || names == nil {
		return ""
	}
	return names[i]
}

func (r *runner) drop(j job) {
	ev := event{typ: noneType, class: r.name(r.classNames, j.class), client: r.name(r.clientName, j.client),
		intended: j.intended, done: j.intended, out: outDropped}
	r.rec.add(ev)
	if r.cfg.OnRequest != nil {
		r.cfg.OnRequest(RequestRecord{Type: ev.typ, Class: ev.class, Client: ev.client,
			Intended: j.intended, Sent: j.intended, Done: j.intended, Outcome: outcomeNames[outDropped]})
	}
}

// errLoopback is returned for a workload URL outside loopback.
var errLoopback = errors.New("workload produced a non-loopback URL")

// do sends one request intended at the offset intended and records it. It
// returns the status (0 without a response), the body if the workload
// needs it, and the outcome.
func (r *runner) do(u *user, req Request, intended time.Duration, class, client int) (int, []byte, outcome) {
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	deadline := r.start.Add(intended + r.cfg.Timeout)
	className, clientName := r.name(r.classNames, class), r.name(r.clientName, client)
	ti := 0
	if len(r.dialers) > 1 && client >= 0 {
		ti = client
	}
	target := req.URL
	sent := time.Since(r.start)
	status, n := 0, int64(0)
	var err error
	var out outcome
	var code codes.Code
	if r.cfg.GRPC != nil {
		status, n, code, err = r.grpcCall(u, ti, target, className, clientName, deadline)
		target = r.base + target
		if err != nil {
			out = r.errOutcome(deadline, err)
		}
	} else if r.lean && strings.HasPrefix(target, "/") {
		status, n, err = r.h1Exchange(u, ti, target, className, clientName, deadline)
		target = r.base + target
		switch {
		case err == nil:
		case errors.Is(err, errAborted):
			out = outAborted
		case errors.Is(err, errDeadline):
			out = outTimeout
		default:
			out = outTransportError
		}
	} else {
		if strings.HasPrefix(target, "/") {
			target = r.base + target
		}
		status, n, err = r.roundTrip(u, ti, target, className, clientName, deadline)
		if err != nil {
			out = r.errOutcome(deadline, err)
		}
	}
	done := time.Since(r.start)
	if err == nil {
		switch {
		case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
			out = outRejected
		case status >= 200 && status < 400:
			out = outOK
		default:
			out = outHTTPError
		}
	}
	ev := event{typ: req.Type, class: className, client: clientName, intended: intended, done: done,
		latency: done - intended, out: out, bytes: n}
	r.rec.add(ev)
	if r.cfg.OnRequest != nil {
		r.cfg.OnRequest(RequestRecord{Type: req.Type, Class: className, Client: clientName, URL: target,
			Intended: intended, Sent: sent, Done: done, Latency: done - intended, Status: status,
			Outcome: outcomeNames[out], Bytes: n, Err: err, GRPCCode: grpcCodeName(r.cfg.GRPC != nil, code)})
	}
	if u.body != nil && out == outOK {
		return status, *u.body, out
	}
	return status, nil, out
}

// roundTrip sends one request through the http.RoundTripper for transport
// index ti (https targets, absolute URLs, a custom Transport).
func (r *runner) roundTrip(u *user, ti int, target, class, client string, deadline time.Time) (int, int64, error) {
	if _, err := CheckLoopbackURL("workload URL", target); err != nil {
		return 0, 0, errLoopback
	}
	ctx, cancel := context.WithDeadline(r.abortCtx, deadline)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, 0, err
	}
	hreq.Header.Set("User-Agent", "sluice-load")
	if class != "" {
		hreq.Header.Set(r.cfg.ClassHeader, class)
	}
	if client != "" && r.clientHdr {
		hreq.Header.Set(r.cfg.ClientHeader, client)
	}
	resp, err := r.rts[min(ti, len(r.rts)-1)].RoundTrip(hreq)
	if err != nil {
		return 0, 0, err
	}
	n, err := r.readBody(u, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, n, err
	}
	return resp.StatusCode, n, nil
}

// Buffers are pooled rather than owned by users: thousands of users or
// workers are mostly idle, and only requests reading a body need one.
var (
	readBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	bodyPool    = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}
)

// readBody reads the whole body; when the workload needs bodies it keeps
// the first maxBody bytes in u.body until releaseBody.
func (r *runner) readBody(u *user, b io.Reader) (int64, error) {
	bp := readBufPool.Get().(*[]byte)
	defer readBufPool.Put(bp)
	buf := *bp
	if r.needBody && u.body == nil {
		u.body = bodyPool.Get().(*[]byte)
		*u.body = (*u.body)[:0]
	}
	var n int64
	for {
		k, err := b.Read(buf)
		n += int64(k)
		if u.body != nil && len(*u.body) < maxBody {
			keep := min(k, maxBody-len(*u.body))
			*u.body = append(*u.body, buf[:keep]...)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// releaseBody returns u's body buffer to the pool after Observe.
func (r *runner) releaseBody(u *user) {
	if u.body != nil {
		if cap(*u.body) <= 256<<10 {
			bodyPool.Put(u.body)
		}
		u.body = nil
	}
}

func (r *runner) errOutcome(deadline time.Time, err error) outcome {
	if r.abortCtx.Err() != nil {
		return outAborted
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(deadline) {
		return outTimeout
	}
	return outTransportError
}

// closedLoop keeps the scheduled number of users running. User i is active
// while i < round(Users.At(elapsed)); a user above the target leaves after
// its current request and think time.
func (r *runner) closedLoop() {
	var (
		mu      sync.Mutex
		running []bool
		target  int
		wg      sync.WaitGroup
		timer   = time.NewTimer(time.Hour)
	)
	// active reports whether user i may send another request; a user that
	// is above the target marks its slot free and leaves.
	active := func(i int) bool {
		mu.Lock()
		defer mu.Unlock()
		if i < target {
			return true
		}
		running[i] = false
		return false
	}
	maxUsers := 0
	for {
		el := time.Since(r.start)
		n := int(math.Round(r.cfg.Users.At(el)))
		mu.Lock()
		target = n
		for len(running) < n {
			running = append(running, false)
		}
		for i := 0; i < n; i++ {
			if !running[i] {
				running[i] = true
				r.users.Add(1)
				wg.Add(1)
				go r.user(i, active, &wg)
			}
		}
		if u := int(r.users.Load()); u > maxUsers {
			maxUsers = u
		}
		mu.Unlock()
		next, ok := r.cfg.Users.NextChange(el)
		if !ok || next >= r.cfg.Duration {
			break
		}
		timer.Reset(time.Until(r.start.Add(next)))
		stopped := false
		select {
		case <-timer.C:
		case <-r.stop:
			stopped = true
		}
		if stopped {
			break
		}
	}
	wg.Wait()
	r.maxUsers.Store(int64(maxUsers))
}

// user runs closed-loop user i: request, think, repeat; after a rejection
// with RetryWait > 0 it waits and resends the same request.
func (r *runner) user(i int, active func(int) bool, wg *sync.WaitGroup) {
	defer wg.Done()
	u := r.newUser(streamUser + uint64(i))
	defer r.h1CloseAll(u)
	class, client := -1, -1
	if r.classNames != nil {
		class = r.classPick.pick(lowDiscrepancy(i))
	}
	if r.clientName != nil {
		// A different multiplier keeps classes and clients independent.
		_, f := math.Modf(float64(i+1) * 0.7548776662466927)
		client = r.clientPick.pick(f)
	}
	defer r.users.Add(-1)
	// Start at a random phase of the first think time so that users do not
	// all send at the same instant.
	if !r.sleep(u, time.Duration(u.rng.Float64()*r.cfg.Think.Sample(u.rng)*1e9)) {
		return
	}
	var retry *Request
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		if !active(i) {
			return
		}
		req := Request{}
		if retry != nil {
			req, retry = *retry, nil
		} else {
			req = u.sess.Next(u.rng)
		}
		status, body, out := r.do(u, req, time.Since(r.start), class, client)
		u.sess.Observe(req, status, body)
		r.releaseBody(u)
		if out == outAborted {
			return
		}
		if out == outRejected && r.cfg.RetryWait > 0 {
			retry = &req
			r.retries.Add(1)
			if !r.sleep(u, r.cfg.RetryWait) {
				return
			}
			continue
		}
		z := time.Duration(r.cfg.Think.Sample(u.rng) * 1e9)
		r.thinks.Add(1)
		r.thinkNs.Add(int64(z))
		if !r.sleep(u, z) {
			return
		}
	}
}
