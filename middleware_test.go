// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/policytest"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/stage"
)

// newPolicy reads src as a policy file and builds it.
func newPolicy(t testing.TB, src string) *policy.Policy { return policytest.New(t, src) }

// serve starts a real server on 127.0.0.1 whose panics are not logged.
func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

var steps atomic.Int64

// totals collects a period (at a time later than any before) and returns
// the class's totals.
func totals(p *policy.Policy, stageName string, class int) stage.ClassState {
	p.Step(time.Now().Add(time.Duration(steps.Add(1)) * time.Hour))
	return p.Stage(stageName).Totals(class)
}

func inFlight(p *policy.Policy, stageName string) int {
	return p.Stage(stageName).State(0).InFlightLimited.InFlight
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

func TestMiddlewareAdmitsAndRejects(t *testing.T) {
	p := newPolicy(t, `
stages: [{name: api, controller: static-rate, params: {rate: 0.001}, burst: 1}]
reject: {retry_after: 2s, retry_after_max: 2s}
`)
	srv := serve(t, sluice.Middleware(p)(okHandler))
	get := func(accept string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get(""); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("first request: %d %q", resp.StatusCode, body)
	}
	resp, body := get("")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, "stage api") {
		t.Fatalf("rejection: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	resp, body = get("application/json")
	var j map[string]any
	if err := json.Unmarshal([]byte(body), &j); err != nil || resp.StatusCode != 503 ||
		resp.Header.Get("Content-Type") != "application/json" || j["error"] != "overloaded" || j["stage"] != "api" || j["retry_after_s"] != 2.0 {
		t.Fatalf("JSON rejection: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	if tot := totals(p, "api", 0); tot.Admitted != 1 || tot.Rejected != 2 || tot.Completed != 1 || tot.Errors != 0 {
		t.Fatalf("totals %+v", tot)
	}
}

func TestMiddlewareShadowAdmitsAndCounts(t *testing.T) {
	p := newPolicy(t, `
shadow: true
stages: [{name: api, controller: static-rate, params: {rate: 0.001}, burst: 1}]
`)
	srv := serve(t, sluice.Middleware(p)(okHandler))
	for i := 0; i < 4; i++ {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("shadow mode answered %d", resp.StatusCode)
		}
	}
	if tot := totals(p, "api", 0); tot.Admitted != 4 || tot.ShadowRejected != 3 || tot.Rejected != 0 {
		t.Fatalf("totals %+v", tot)
	}
}

const classPolicy = `
classes:
  order: [gold, bronze]
  trusted_proxies: [127.0.0.1/32]
  rules:
    - {class: gold, header: {name: X-Priority, value: gold}}
stages: [{name: api, controller: seda, params: {target: 1s}}]
`

// A class header is believed from the trusted proxy 127.0.0.1 and ignored
// from 127.0.0.2, with real connections.
func TestMiddlewareClassHeaderTrust(t *testing.T) {
	p := newPolicy(t, classPolicy)
	srv := serve(t, sluice.Middleware(p)(okHandler))
	clientFrom := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 10 * time.Second}
	}
	send := func(ip string) error {
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.Header.Set("X-Priority", "gold")
		resp, err := clientFrom(ip).Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := send("127.0.0.2"); err != nil {
		t.Skipf("cannot connect from 127.0.0.2: %v", err)
	}
	if err := send("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := send("127.0.0.2"); err != nil {
		t.Fatal(err)
	}
	gold, bronze := totals(p, "api", 0), p.Stage("api").Totals(1)
	if gold.Offered != 1 || bronze.Offered != 2 {
		t.Fatalf("gold %+v bronze %+v: the spoofed header from 127.0.0.2 was honoured", gold, bronze)
	}
}

// The same at handler level with arbitrary peers and X-Forwarded-For.
func TestMiddlewareClassificationPeers(t *testing.T) {
	p := newPolicy(t, classPolicy)
	h := sluice.Middleware(p)(okHandler)
	for _, tc := range []struct {
		remote, xff string
		class       int
	}{
		{"127.0.0.1:5000", "", 0},
		{"192.0.2.1:5000", "", 1},
		{"192.0.2.1:5000", "127.0.0.1", 1}, // XFF from an untrusted peer
		{"127.0.0.1:5000", "192.0.2.9", 0}, // header set by the trusted proxy
	} {
		before := totals(p, "api", tc.class).Offered
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		r.Header.Set("X-Priority", "gold")
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got := totals(p, "api", tc.class).Offered; got != before+1 {
			t.Errorf("%s xff %q: not counted in class %d", tc.remote, tc.xff, tc.class)
		}
	}
}

// A degrading stage's quality reaches the handler through the context.
func TestMiddlewareQualityInContext(t *testing.T) {
	p := newPolicy(t, `
stages: [{name: search, controller: seda, params: {target: 100ms, nreq: 5, degrade: {enabled: true}}}]
`)
	st := p.Stage("search")
	if !st.Degrading() || st.Quality() != 1 {
		t.Fatalf("degrading %v quality %v", st.Degrading(), st.Quality())
	}
	var got atomic.Value
	h := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(sluice.QualityFrom(r.Context()))
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if got.Load() != 1.0 {
		t.Fatalf("full quality: %v", got.Load())
	}
	for i := 0; i < 5; i++ { // five responses at 10× the target
		tk, err := st.Enter(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(tk.Arrival().Add(time.Second), stage.Outcome{OK: true})
	}
	p.Step(time.Now())
	q := st.Quality()
	if q >= 1 {
		t.Fatalf("quality not lowered: %v", q)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if got.Load() != q {
		t.Fatalf("handler saw quality %v, stage %v", got.Load(), q)
	}
	if sluice.QualityFrom(context.Background()) != 1 {
		t.Fatal("QualityFrom without a level")
	}
	type key struct{}
	ctx := sluice.WithQuality(context.WithValue(context.Background(), key{}, "v"), 0.25)
	if sluice.QualityFrom(ctx) != 0.25 || ctx.Value(key{}) != "v" {
		t.Fatal("WithQuality")
	}
}

const concPolicy = `
stages:
  - name: c
    controller: static-concurrency
    params: {limit: 1}
    queue: {max: 64, timeout: 30s}
    long_lived: 50ms
`

// Flush and deadlines reach the real writer through the wrapper
// (http.ResponseController uses Unwrap); an event stream releases its slot
// as soon as its header is written.
func TestMiddlewareFlushAndEventStream(t *testing.T) {
	p := newPolicy(t, concPolicy)
	release := make(chan struct{})
	var ctlErr atomic.Value
	srv := serve(t, sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			ctlErr.Store(err)
		}
		if r.URL.Path == "/events" {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		io.WriteString(w, "data: 1\n\n")
		if err := rc.Flush(); err != nil {
			ctlErr.Store(err)
		}
		if r.URL.Path == "/events" {
			<-release
		}
	})))
	resp, err := srv.Client().Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: 1\n" {
		t.Fatalf("first event not flushed: %q %v", line, err)
	}
	if n := inFlight(p, "c"); n != 0 {
		t.Fatalf("event stream holds %d slots", n)
	}
	// The slot is free for another request while the stream is open.
	r2, err := srv.Client().Get(srv.URL + "/plain")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r2.Body)
	r2.Body.Close()
	close(release)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if v := ctlErr.Load(); v != nil {
		t.Fatalf("ResponseController through the wrapper: %v", v)
	}
	tot := totals(p, "c", 0)
	if tot.Completed != 2 || tot.Errors != 0 || tot.Last.Samples != 1 {
		t.Fatalf("totals %+v last %+v: the stream must not be a sample", tot, tot.Last)
	}
	if inFlight(p, "c") != 0 {
		t.Fatal("slot leaked")
	}
}

// A hijacked connection (a WebSocket-style upgrade) is a stream: its slot
// is released while the connection lives on.
func TestMiddlewareHijack(t *testing.T) {
	p := newPolicy(t, concPolicy)
	hijacked := make(chan struct{})
	srv := serve(t, sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Hijacker); !ok {
			t.Error("wrapper hides http.Hijacker")
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		close(hijacked)
		line, _ := brw.ReadString('\n') // echo one line
		conn.Write([]byte(line))
	})))
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	status, _ := br.ReadString('\n')
	if !strings.Contains(status, "101") {
		t.Fatalf("status %q", status)
	}
	<-hijacked
	if n := inFlight(p, "c"); n != 0 {
		t.Fatalf("upgraded connection holds %d slots", n)
	}
	for line, _ := br.ReadString('\n'); line != "\r\n"; line, _ = br.ReadString('\n') {
	}
	fmt.Fprintf(conn, "hello\n")
	if echo, _ := br.ReadString('\n'); echo != "hello\n" {
		t.Fatalf("echo %q", echo)
	}
}

// A response still being flushed after long_lived becomes a stream and
// gives its slot back (synctest: virtual time).
func TestMiddlewareLongLivedFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPolicy(t, concPolicy)
		h := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i < 4; i++ {
				io.WriteString(w, "chunk\n")
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond)
			}
		}))
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}()
		time.Sleep(30 * time.Millisecond) // before long_lived (50ms)
		synctest.Wait()
		if n := inFlight(p, "c"); n != 1 {
			t.Fatalf("in flight %d before long_lived", n)
		}
		time.Sleep(40 * time.Millisecond) // a flush at 60ms is past it
		synctest.Wait()
		if n := inFlight(p, "c"); n != 0 {
			t.Fatalf("in flight %d after long_lived", n)
		}
		<-done
		if tot := totals(p, "c", 0); tot.Completed != 1 || tot.Last.Samples != 0 {
			t.Fatalf("totals %+v", tot)
		}
	})
}

// A panicking handler is Done(Failure), its slot is released and the panic
// goes on.
func TestMiddlewarePanic(t *testing.T) {
	p := newPolicy(t, concPolicy)
	h := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		panic("boom")
	}))
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Fatalf("recovered %v", v)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	if inFlight(p, "c") != 0 {
		t.Fatal("slot leaked by a panic")
	}
	// Over a real server too (net/http recovers and closes the connection).
	srv := serve(t, h)
	if _, err := srv.Client().Get(srv.URL); err == nil {
		t.Fatal("no error from a panicking handler")
	}
	if tot := totals(p, "c", 0); tot.Errors != 2 || tot.Completed != 2 || inFlight(p, "c") != 0 {
		t.Fatalf("totals %+v", tot)
	}
}

// Many clients that give up mid-flight, while served or while queued,
// leave no slot behind.
func TestMiddlewareClientCancelsLeakNothing(t *testing.T) {
	p := newPolicy(t, strings.Replace(concPolicy, "limit: 1", "limit: 4", 1))
	var entered atomic.Int64
	var handlers sync.WaitGroup
	srv := serve(t, sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery == "after" {
			return
		}
		handlers.Add(1)
		defer handlers.Done()
		entered.Add(1)
		<-r.Context().Done() // hold the slot until the client leaves
	})))
	const clients = 40
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// Wait (bounded) until four are in the handler and the rest queued.
	deadline := time.Now().Add(10 * time.Second)
	for (entered.Load() < 4 || p.Stage("c").State(0).InFlightLimited.Queued < clients-4) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if entered.Load() != 4 {
		t.Fatalf("%d requests in the handler with a limit of 4", entered.Load())
	}
	cancel()
	wg.Wait()
	// The server notices closed connections one by one: wait (bounded)
	// until every request offered has been admitted or refused.
	settled := func() bool { tot := totals(p, "c", 0); return tot.Admitted+tot.Rejected == clients }
	for (inFlight(p, "c") != 0 || p.Stage("c").State(0).InFlightLimited.Queued != 0 || !settled()) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	handlers.Wait()
	st := p.Stage("c").State(0)
	if st.InFlightLimited.InFlight != 0 || st.InFlightLimited.Queued != 0 {
		t.Fatalf("leaked: %+v", st.InFlightLimited)
	}
	tot := totals(p, "c", 0)
	if tot.Offered != clients || tot.Admitted+tot.Rejected != clients || tot.Errors != tot.Admitted {
		t.Fatalf("totals %+v", tot)
	}
	// The stage still admits.
	resp, err := srv.Client().Get(srv.URL + "/?after")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the cancels: %v %v", resp, err)
	}
	resp.Body.Close()
}

// countingPolicy records what the middleware does with each admission.
type countingPolicy struct {
	mu       sync.Mutex
	done     []sluice.Outcome
	streams  int
	rejectOn bool
}

func (c *countingPolicy) Admit(r *http.Request) (sluice.Admission, error) {
	if c.rejectOn {
		return nil, sluice.ErrRejected
	}
	return &countingAdmission{c: c}, nil
}

func (c *countingPolicy) Reject(w http.ResponseWriter, r *http.Request, err error) {
	w.WriteHeader(http.StatusServiceUnavailable)
}

type countingAdmission struct{ c *countingPolicy }

func (a *countingAdmission) Quality() float64 { return 1 }
func (a *countingAdmission) Stream() {
	a.c.mu.Lock()
	a.c.streams++
	a.c.mu.Unlock()
}
func (a *countingAdmission) Done(o sluice.Outcome) {
	a.c.mu.Lock()
	a.c.done = append(a.c.done, o)
	a.c.mu.Unlock()
}

type failingWriter struct{ http.ResponseWriter }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestMiddlewareDoneOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		wrap    func(http.ResponseWriter) http.ResponseWriter
		ctx     func() context.Context
		ok      bool
		streams int
	}{
		{name: "200", handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }, ok: true},
		{name: "implicit 200", handler: func(w http.ResponseWriter, r *http.Request) {}, ok: true},
		{name: "404", handler: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, ok: true},
		{name: "500", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, ok: false},
		{name: "103 then 502", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(103); w.WriteHeader(502) }, ok: false},
		{name: "200 then 500 ignored", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200); w.WriteHeader(500) }, ok: true},
		{name: "write error", handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") },
			wrap: func(w http.ResponseWriter) http.ResponseWriter { return failingWriter{w} }, ok: false},
		{name: "ReadFrom", handler: func(w http.ResponseWriter, r *http.Request) {
			w.(io.ReaderFrom).ReadFrom(strings.NewReader("body"))
		}, ok: true},
		{name: "client gone", handler: func(w http.ResponseWriter, r *http.Request) {},
			ctx: func() context.Context { c, cancel := context.WithCancel(context.Background()); cancel(); return c }, ok: false},
		{name: "event stream", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			io.WriteString(w, "data: x\n\n")
			io.WriteString(w, "data: y\n\n")
		}, ok: true, streams: 1},
		{name: "101", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(101) }, ok: true, streams: 1},
		{name: "hijack not supported", handler: func(w http.ResponseWriter, r *http.Request) {
			if _, _, err := w.(http.Hijacker).Hijack(); !errors.Is(err, http.ErrNotSupported) {
				panic(err)
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				panic(err)
			}
		}, ok: true},
		{name: "Goexit", handler: func(w http.ResponseWriter, r *http.Request) { panicOrExit() }, ok: false},
	} {
		c := &countingPolicy{}
		h := sluice.Middleware(c)(tc.handler)
		rec := httptest.NewRecorder()
		var w http.ResponseWriter = rec
		if tc.wrap != nil {
			w = tc.wrap(rec)
		}
		r := httptest.NewRequest("GET", "/", nil)
		if tc.ctx != nil {
			r = r.WithContext(tc.ctx())
		}
		fin := make(chan struct{})
		go func() { defer close(fin); h.ServeHTTP(w, r) }() // Goexit ends only this goroutine
		<-fin
		if len(c.done) != 1 || c.done[0] != sluice.OutcomeOf(tc.ok) || c.streams != tc.streams {
			t.Errorf("%s: done %v streams %d, want [%v] %d", tc.name, c.done, c.streams, tc.ok, tc.streams)
		}
	}
	c := &countingPolicy{rejectOn: true}
	rec := httptest.NewRecorder()
	sluice.Middleware(c)(okHandler).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 503 || len(c.done) != 0 || rec.Body.Len() != 0 {
		t.Fatalf("rejection reached the handler: %d %q", rec.Code, rec.Body)
	}
}

func panicOrExit() { runtime.Goexit() }

// The control loop under overload: a SEDA stage in front of a handler that
// takes 10× the p90 target cuts its rate and starts rejecting (virtual
// time, so no real-time assertion).
func TestMiddlewareSEDACutsRateUnderOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := policytest.Running(t, `
stages: [{name: api, controller: seda, burst: 2, params: {target: 100ms, nreq: 20, initial_rate: 200}}]
`)
		h := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Second)
		}))
		var codes sync.Map
		var wg sync.WaitGroup
		for i := 0; i < 600; i++ { // 100 req/s for 6 s
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
				n, _ := codes.LoadOrStore(rec.Code, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}()
			time.Sleep(10 * time.Millisecond)
		}
		wg.Wait()
		st := p.Stage("api").State(100)
		if st.Setting >= 100 {
			t.Fatalf("rate %v not cut below the offered 100 req/s; decisions %+v", st.Setting, st.Decisions)
		}
		rejected, _ := codes.Load(503)
		if rejected == nil || rejected.(*atomic.Int64).Load() == 0 {
			t.Fatal("no request rejected under 10× overload")
		}
		if p.Decisions(p.Stage("api")) == 0 {
			t.Fatal("no decision counted")
		}
	})
}

// auto behind the middleware, in virtual time: a handler that serves 4
// requests at a time (10 ms each) under 10× overload. auto caps what is in
// service, the queue holds about one service time, the excess is rejected
// at once, answers stay within the SLO, and the high class is shed last.
func TestMiddlewareAutoUnderOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := policytest.Running(t, `
classes:
  order: [gold, bronze]
  rules: [{class: gold, header: {name: X-Tier, value: gold, trust: any}}]
stages: [{name: api, controller: auto, params: {slo: 250ms}}]
`)
		workers := make(chan struct{}, 4)
		var inService, peak atomic.Int64
		h := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inService.Add(1)
			for {
				if m := peak.Load(); n <= m || peak.CompareAndSwap(m, n) {
					break
				}
			}
			workers <- struct{}{}
			time.Sleep(10 * time.Millisecond)
			<-workers
			inService.Add(-1)
		}))
		type result struct {
			gold bool
			code int
			rt   time.Duration
		}
		results := make(chan result, 20000)
		var wg sync.WaitGroup
		for i := 0; i < 12000; i++ { // 4000 req/s for 3 s: 10× the 400 req/s capacity
			wg.Add(1)
			go func(gold bool) {
				defer wg.Done()
				req := httptest.NewRequest("GET", "/", nil)
				if gold {
					req.Header.Set("X-Tier", "gold")
				}
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, req)
				results <- result{gold, rec.Code, time.Since(start)}
			}(i%20 == 0) // gold: 200 req/s, half the capacity
			time.Sleep(250 * time.Microsecond)
		}
		wg.Wait()
		close(results)
		var ok, okGold, gold, slow int
		for r := range results {
			if r.gold {
				gold++
			}
			if r.code == 200 {
				ok++
				if r.gold {
					okGold++
				}
				if r.rt > 250*time.Millisecond {
					slow++
				}
			}
		}
		// Capacity 400 req/s for 3 s: 1200 answers at most.
		if ok < 1000 {
			t.Errorf("%d answers in 3 s of a 400 req/s service, want ≥ 1000", ok)
		}
		if slow > ok/100 {
			t.Errorf("%d of %d answers over the 250 ms SLO", slow, ok)
		}
		// Gold asks for half the capacity: it is served in full (the low
		// class is shed first), and bronze gets the rest, not nothing.
		if okGold < gold*95/100 || ok-okGold < 300 {
			t.Errorf("gold answered %d of %d, bronze %d of %d: the low class must be shed first, and only it", okGold, gold, ok-okGold, 12000-gold)
		}
		st := p.Stage("api").State(5)
		t.Logf("answers %d (gold %d of %d), over the SLO %d, peak in service %d, limit %v", ok, okGold, gold, slow, peak.Load(), st.Estimates["limit"])
		if st.Kind != "concurrency" || st.Estimates["limit"] < 1 || st.InFlightLimited == nil {
			t.Errorf("state %+v", st)
		}
		if int(peak.Load()) > int(st.Estimates["limit"]*4)+4 {
			t.Errorf("peak in service %d for a limit around %v", peak.Load(), st.Estimates["limit"])
		}
	})
}

// benchPolicy never rejects: the benchmark measures classify + admit +
// record, not the rejection path.
const benchPolicy = `
classes:
  order: [gold, bronze]
  trusted_proxies: [10.0.0.0/8]
  rules:
    - {class: gold, header: {name: X-Priority, value: gold}}
stages:
  - name: static
    match: {path_prefix: /static/}
    controller: none
  - name: api
    match: {path_prefix: /api/}
    controller: seda
    burst: 1000000000
    params: {target: 1s, rate_max: 1e9, initial_rate: 1e9}
`

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkMiddleware compares a bare handler with the same handler
// behind sluice.Middleware and a SEDA stage (classify + admit + record).
func BenchmarkMiddleware(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.Write([]byte("ok"))
	})
	p := policytest.Running(b, benchPolicy)
	// A degrading stage below full quality adds the quality to the
	// request context (two allocations: the context and the request copy).
	deg := newPolicy(b, strings.Replace(benchPolicy, "params: {target: 1s, rate_max: 1e9, initial_rate: 1e9}",
		"params: {target: 100ms, nreq: 5, degrade: {enabled: true}}\n    differentiate: false", 1))
	for i := 0; i < 5; i++ {
		tk, _ := deg.Stage("api").Enter(context.Background(), 0)
		tk.Finish(tk.Arrival().Add(time.Second), stage.Outcome{OK: true})
	}
	deg.Step(time.Now())
	if q := deg.Stage("api").Quality(); q >= 1 {
		b.Fatalf("quality %v", q)
	}
	// A request of a class other than the default (gold) carries its
	// priority on to the next hop in its context: the same two
	// allocations. One of the default class (bronze) carries nothing.
	for _, bc := range []struct {
		name  string
		h     http.Handler
		class string
	}{{"bare", handler, "gold"}, {"sluice", sluice.Middleware(p)(handler), "gold"},
		{"sluice-default-class", sluice.Middleware(p)(handler), ""},
		{"sluice-degraded", sluice.Middleware(deg)(handler), "gold"}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest("GET", "/api/items?id=1", nil)
				r.RemoteAddr = "10.1.2.3:40000"
				if bc.class != "" {
					r.Header.Set("X-Priority", bc.class)
				}
				r.Header.Set("X-Forwarded-For", "198.51.100.7")
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					bc.h.ServeHTTP(w, r)
				}
			})
		})
	}
	p.Step(time.Now().Add(time.Hour))
	if tot := p.Stage("api").Totals(0); tot.Rejected != 0 {
		b.Fatalf("benchmark policy rejected %d requests", tot.Rejected)
	}
}
