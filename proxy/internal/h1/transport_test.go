// SPDX-License-Identifier: Apache-2.0

package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/proxy/internal/proxytest"
)

// testTimeout bounds every wait of these tests.
const testTimeout = proxytest.Timeout

// newTestH1 returns a transport with the limits the proxy's backends
// configuration has by default for one server (when these tests were
// written), edited, over a standard transport set up like the proxy's.
func newTestH1(t *testing.T, edit func(*Options)) *Transport {
	t.Helper()
	opts := Options{DialTimeout: 5 * time.Second, ResponseHeaderTimeout: 30 * time.Second,
		MaxIdlePerHost: 256, IdleTimeout: 90 * time.Second}
	if edit != nil {
		edit(&opts)
	}
	d := &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}
	std := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: opts.MaxIdlePerHost,
		IdleConnTimeout: opts.IdleTimeout, ResponseHeaderTimeout: opts.ResponseHeaderTimeout,
		DisableCompression: true, ForceAttemptHTTP2: true}
	tr := NewTransport(std, opts)
	t.Cleanup(tr.Close)
	return tr
}

// countingBackend is an httptest server that counts the connections it
// accepted.
func countingBackend(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &conns
}

func roundTrip(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	return resp, string(b)
}

func newReq(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Bodyless requests share one keep-alive connection, HEAD and 204 too;
// requests with a body, Expect or Upgrade go to the standard transport.
func TestH1ReusesConnectionsAndFallsBack(t *testing.T) {
	s, conns := countingBackend(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/empty" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(b))
	})
	tr := newTestH1(t, nil)
	for i := 0; i < 20; i++ {
		if _, body := roundTrip(t, tr, newReq(t, "GET", s.URL+"/a", nil)); body != "GET /a " {
			t.Fatalf("body %q", body)
		}
	}
	if resp, body := roundTrip(t, tr, newReq(t, "HEAD", s.URL+"/a", nil)); resp.StatusCode != 200 || body != "" {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, body)
	}
	if resp, _ := roundTrip(t, tr, newReq(t, "GET", s.URL+"/empty", nil)); resp.StatusCode != 204 {
		t.Fatalf("204: %d", resp.StatusCode)
	}
	if n := conns.Load(); n != 1 || tr.dials.Load() != 1 || tr.reused.Load() != 21 {
		t.Fatalf("backend saw %d connections; dials %d reused %d, want 1, 1, 21", n, tr.dials.Load(), tr.reused.Load())
	}
	if _, body := roundTrip(t, tr, newReq(t, "POST", s.URL+"/p", strings.NewReader("hello"))); body != "POST /p hello" {
		t.Fatalf("POST body %q", body)
	}
	r := newReq(t, "GET", s.URL+"/e", nil)
	r.Header.Set("Expect", "100-continue")
	roundTrip(t, tr, r)
	r = newReq(t, "GET", s.URL+"/u", nil)
	r.Header.Set("Upgrade", "websocket")
	roundTrip(t, tr, r)
	if tr.fallback.Load() != 3 {
		t.Fatalf("fallback %d, want 3 (body, Expect, Upgrade)", tr.fallback.Load())
	}
}

// rawBackend serves each accepted connection with fn on 127.0.0.1.
func rawBackend(t *testing.T, fn func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(testTimeout))
				fn(c, bufio.NewReader(c))
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// rawAnswers is a raw backend that answers each request of a connection
// with answers[path], bytes as they are (answers["*"] for any other
// path; none when it is missing too), and closes the connection after an
// answer that says Connection: close. accepted, when not nil, counts the
// connections.
func rawAnswers(t *testing.T, accepted *atomic.Int64, answers map[string]string) string {
	return rawBackend(t, func(c net.Conn, br *bufio.Reader) {
		if accepted != nil {
			accepted.Add(1)
		}
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			a, ok := answers[req.URL.Path]
			if !ok {
				a = answers["*"]
			}
			_, _ = io.WriteString(c, a)
			if strings.Contains(a, "\r\nConnection: close\r\n") {
				return
			}
		}
	})
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// A server that closes each connection after one answer, without saying
// so: the next request on the reused connection fails before any byte
// came back and is sent again on a new one (replayable), or finds the
// connection closed before it is used (not replayable).
func TestH1ResendsAfterAnIdleClose(t *testing.T) {
	var accepted atomic.Int64
	url := rawBackend(t, func(c net.Conn, br *bufio.Reader) {
		accepted.Add(1)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, okAnswer)
	})
	tr := newTestH1(t, nil)
	for _, method := range []string{"GET", "GET", "DELETE", "GET"} {
		time.Sleep(20 * time.Millisecond) // the server's FIN arrives
		if resp, body := roundTrip(t, tr, newReq(t, method, url+"/", nil)); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", method, resp.StatusCode, body)
		}
	}
	if accepted.Load() != 4 {
		t.Fatalf("backend accepted %d connections, want 4", accepted.Load())
	}
	if tr.retried.Load() < 2 {
		t.Fatalf("retried %d, want the two GETs after the first resent", tr.retried.Load())
	}
}

// No answer within the response header timeout: a timeout error, which
// the handler answers 504. A context that ends wakes the read at once and
// its cause is the error; also while the body is read.
func TestH1TimeoutsAndCancellation(t *testing.T) {
	release := make(chan struct{})
	url := rawBackend(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.URL.Path == "/partial" {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
		}
		<-release
	})
	t.Cleanup(func() { close(release) }) // before rawBackend's cleanup waits for its handlers
	tr := newTestH1(t, func(o *Options) { o.ResponseHeaderTimeout = 100 * time.Millisecond })
	_, err := tr.RoundTrip(newReq(t, "GET", url+"/silent", nil))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("silent backend: %v, want a timeout", err)
	}

	tr = newTestH1(t, nil)
	cause := errors.New("overall timeout")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	_, err = tr.RoundTrip(newReq(t, "GET", url+"/silent", nil).WithContext(ctx))
	if !errors.Is(err, cause) || time.Since(start) > testTimeout/2 {
		t.Fatalf("canceled while waiting: %v after %v, want the cause at once", err, time.Since(start))
	}

	ctx, cancel = context.WithCancelCause(context.Background())
	resp, err := tr.RoundTrip(newReq(t, "GET", url+"/partial", nil).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "abc" {
		t.Fatalf("first bytes %q %v", buf, err)
	}
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	if _, err := resp.Body.Read(make([]byte, 10)); !errors.Is(err, cause) {
		t.Fatalf("body read after cancel: %v, want the cause", err)
	}
	resp.Body.Close()
	if tr.reused.Load() != 0 {
		t.Fatal("a canceled connection was reused")
	}
}

// 1xx answers reach the trace's Got1xxResponse (ReverseProxy forwards
// them), after its WroteRequest and GotFirstResponseByte (the stage's
// overtake meter orders requests by the one and measures their time in
// the backend up to the other); more than five, or a 101 nobody asked for, fail the request.
func TestH1InformationalAnswers(t *testing.T) {
	url := rawAnswers(t, nil, map[string]string{
		"/hints":  "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" + okAnswer,
		"/many":   strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", 6) + okAnswer,
		"/switch": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n",
	})
	tr := newTestH1(t, nil)
	var got []string
	wrote, first := 0, 0
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		got = append(got, http.StatusText(code)+" "+h.Get("Link"))
		if wrote != 1 || first != 1 {
			t.Errorf("Got1xxResponse after %d WroteRequest and %d GotFirstResponseByte, want 1 and 1", wrote, first)
		}
		return nil
	}, WroteRequest: func(httptrace.WroteRequestInfo) { wrote++ }, GotFirstResponseByte: func() { first++ }}
	req := newReq(t, "GET", url+"/hints", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	if resp, body := roundTrip(t, tr, req); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("after hints: %d %q", resp.StatusCode, body)
	}
	if len(got) != 1 || got[0] != "Early Hints </style.css>; rel=preload" {
		t.Fatalf("Got1xxResponse saw %q", got)
	}
	if _, err := tr.RoundTrip(newReq(t, "GET", url+"/many", nil)); err == nil || !strings.Contains(err.Error(), "too many 1xx") {
		t.Fatalf("six 1xx: %v", err)
	}
	if _, err := tr.RoundTrip(newReq(t, "GET", url+"/switch", nil)); err == nil || !strings.Contains(err.Error(), "101") {
		t.Fatalf("unasked 101: %v", err)
	}
}

// A connection is reused only after an answer that ended cleanly: not
// after Connection: close, bytes nobody asked for, or a body closed
// before its end. Trailers of a chunked answer arrive.
func TestH1ReuseRules(t *testing.T) {
	var accepted atomic.Int64
	url := rawAnswers(t, &accepted, map[string]string{
		"/close":   "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"/junk":    okAnswer + "HTTP/1.1 200 OK\r\n",
		"/big":     "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 100000),
		"/chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 42\r\n\r\n",
		"*":        okAnswer,
	})
	tr := newTestH1(t, nil)
	step := func(path string, want int64) {
		t.Helper()
		resp, err := tr.RoundTrip(newReq(t, "GET", url+path, nil))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if path == "/big" {
			_, _ = resp.Body.Read(make([]byte, 10)) // then give up
		} else if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if path == "/chunked" && resp.Trailer.Get("X-Sum") != "42" {
			t.Fatalf("trailer %v", resp.Trailer)
		}
		time.Sleep(10 * time.Millisecond)
		roundTrip(t, tr, newReq(t, "GET", url+"/", nil))
		if n := accepted.Load(); n != want {
			t.Fatalf("after %s: %d connections, want %d (%s)", path, n, want, tr)
		}
	}
	step("/chunked", 1) // the chunked answer ended cleanly: reused
	step("/close", 2)
	step("/junk", 3)
	step("/big", 4)
}

// At most 10 MiB of response headers, as http.Transport.
func TestH1ResponseHeaderLimit(t *testing.T) {
	url := rawBackend(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for i := 0; i < 11<<10; i++ {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	tr := newTestH1(t, nil)
	if _, err := tr.RoundTrip(newReq(t, "GET", url+"/", nil)); !errors.Is(err, errHeadersTooLarge) {
		t.Fatalf("11 MB of headers: %v", err)
	}
}

// Idle connections close after idle_conn_timeout, and at once on Close.
func TestH1IdleConnectionsClose(t *testing.T) {
	var open atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	tr := newTestH1(t, func(o *Options) { o.IdleTimeout = 50 * time.Millisecond })
	roundTrip(t, tr, newReq(t, "GET", s.URL, nil))
	proxytest.Eventually(t, "the idle connection to close after idle_conn_timeout", func() bool { return open.Load() == 0 })
	tr = newTestH1(t, nil)
	roundTrip(t, tr, newReq(t, "GET", s.URL, nil))
	tr.Close()
	proxytest.Eventually(t, "the idle connection to close on Close", func() bool { return open.Load() == 0 })
	roundTrip(t, tr, newReq(t, "GET", s.URL, nil)) // still works, keeps nothing idle
	proxytest.Eventually(t, "a closed transport to keep nothing idle", func() bool { return open.Load() == 0 })
}
