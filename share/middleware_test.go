// SPDX-License-Identifier: Apache-2.0

package share

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// delayFor returns (1/d − 1/Â)·size for the tests' client a, whose d_a is
// 150 B/s after setAvg(a, 50) (unsatisfied: 2·100 − 50), with Â = 1000.
func delayFor(size int) time.Duration {
	return time.Duration(math.Round((1.0/150 - 1.0/1000) * float64(size) * 1e9))
}

// bodyHandler writes n bytes in chunks of chunk bytes, setting
// Content-Length first when setCL.
func bodyHandler(n, chunk int, setCL bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if setCL {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		w.Header().Set("X-Handler", "1")
		buf := make([]byte, chunk)
		for sent := 0; sent < n; sent += chunk {
			if _, err := w.Write(buf[:min(chunk, n-sent)]); err != nil {
				return
			}
		}
	})
}

// middlewareFixture returns a Shares where client a has d_a = 150 B/s and
// a middleware that sends every request to a.
func middlewareFixture(t *testing.T, mod func(*Config)) (*Shares, ClientID, func(http.Handler) http.Handler) {
	cfg := testConfig()
	if mod != nil {
		mod(&cfg)
	}
	s := mustNew(t, cfg)
	setAvg(t, s, "a", 50)
	a := id(t, s, "a")
	return s, a, Middleware(s, func(*http.Request) ClientID { return a })
}

// serve sends a GET / through mw to h and returns the recorded reply and
// how long ServeHTTP took (virtual time, inside synctest.Test).
func serve(mw func(http.Handler) http.Handler, h http.Handler) (*httptest.ResponseRecorder, time.Duration) {
	rec := httptest.NewRecorder()
	start := time.Now()
	mw(h).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	return rec, time.Since(start)
}

func TestMiddlewareDelaysBufferedReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, a, mw := middlewareFixture(t, nil)
		rec, elapsed := serve(mw, bodyHandler(1000, 300, false))
		// d_a = 150, Â = 1000: delay = (1/150 − 1/1000)·1000 = 5.6667 s.
		if elapsed != delayFor(1000) {
			t.Fatalf("reply took %v, want the delay %v", elapsed, delayFor(1000))
		}
		if rec.Code != 200 || rec.Body.Len() != 1000 || rec.Header().Get("Content-Length") != "1000" || !rec.Flushed {
			t.Fatalf("reply: %d, %d bytes, Content-Length %q, flushed %v", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"), rec.Flushed)
		}
		// The response time includes the delay: new_bw = 1000/5.6667 =
		// 176.47 B/s; avg_a = 0.2·176.47 + 0.8·50 = 75.294.
		want := 0.2*1000/elapsed.Seconds() + 0.8*50
		if got := s.Average(a); math.Abs(got-want) > 1e-9 {
			t.Fatalf("avg_a = %g, want %g", got, want)
		}
		if s.Standby(a) != 0 {
			t.Fatalf("standby = %d after the reply", s.Standby(a))
		}
	})
}

// A reply that is not buffered whole is delayed for the bytes known when
// its delay is taken, and its body streams after it: with Content-Length,
// the header's size (the body is never buffered); without, the bytes that
// fit in reply_buffer plus the write that overflows it (here 100 + 100).
func TestMiddlewareUnbufferedReplyDelay(t *testing.T) {
	for _, c := range []struct {
		name          string
		buffer        int  // reply_buffer
		size, chunk   int  // the handler's body and its writes
		contentLength bool // the handler sets Content-Length
		delayedFor    int  // the bytes the delay is computed for
	}{
		{"content-length", 10, 1200, 100, true, 1200},
		{"overflow", 100, 1000, 100, false, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, a, mw := middlewareFixture(t, func(cfg *Config) { cfg.ReplyBuffer = c.buffer })
				rec, got := serve(mw, bodyHandler(c.size, c.chunk, c.contentLength))
				if got != delayFor(c.delayedFor) {
					t.Fatalf("reply took %v, want the delay for %d bytes: %v", got, c.delayedFor, delayFor(c.delayedFor))
				}
				snap := s.Snapshot().Clients[a]
				if rec.Body.Len() != c.size || snap.Bytes != 250+uint64(c.size) || snap.Replies != 2 { // setAvg: 250 bytes, 1 reply
					t.Fatalf("body %d, recorded %d bytes in %d replies", rec.Body.Len(), snap.Bytes-250, snap.Replies)
				}
			})
		})
	}
}

func TestMiddlewareFlushSendsAfterDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, mw := middlewareFixture(t, nil)
		rec := httptest.NewRecorder()
		var afterFlush time.Duration
		start := time.Now()
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); !ok || u.Unwrap() != rec {
				t.Error("the writer does not unwrap to the underlying one")
			}
			w.Write(make([]byte, 300))
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush: %v", err)
			}
			afterFlush = time.Since(start)
			w.Write(make([]byte, 200))
		})
		mw(h).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if afterFlush != delayFor(300) || time.Since(start) != delayFor(300) || rec.Body.Len() != 500 || !rec.Flushed {
			t.Fatalf("flush after %v (want %v), total %v, body %d", afterFlush, delayFor(300), time.Since(start), rec.Body.Len())
		}
	})
}

func TestMiddlewareCancelDuringDelayReleasesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, a, mw := middlewareFixture(t, nil)
		h := mw(bodyHandler(1000, 1000, false))
		const n = 10 // the standby limit
		recs := make([]*httptest.ResponseRecorder, n)
		cancels := make([]context.CancelFunc, n)
		done := make(chan struct{}, n)
		for i := range n {
			ctx, cancel := context.WithCancel(context.Background())
			cancels[i], recs[i] = cancel, httptest.NewRecorder()
			go func() {
				h.ServeHTTP(recs[i], httptest.NewRequest("GET", "/", nil).WithContext(ctx))
				done <- struct{}{}
			}()
		}
		synctest.Wait() // every request is asleep in its delay
		if got := s.Standby(a); got != n {
			t.Fatalf("standby = %d, want %d", got, n)
		}
		// The 11th request is rejected at once, without running the handler.
		var ran atomic.Bool
		rec, _ := serve(mw, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Store(true) }))
		if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || ran.Load() {
			t.Fatalf("request over the standby limit: %d, Retry-After %q, handler ran %v", rec.Code, rec.Header().Get("Retry-After"), ran.Load())
		}
		start := time.Now()
		for _, c := range cancels {
			c()
		}
		synctest.Wait()
		if len(done) != n {
			t.Fatalf("%d of %d handlers returned after their clients left", len(done), n)
		}
		if time.Since(start) != 0 {
			t.Fatalf("release took %v of (virtual) time, want none", time.Since(start))
		}
		snap := s.Snapshot().Clients[a]
		if snap.Standby != 0 || snap.Cancellations != n || snap.Rejections["standby"] != 1 {
			t.Fatalf("after cancels: standby %d, cancellations %d, standby rejections %d", snap.Standby, snap.Cancellations, snap.Rejections["standby"])
		}
		if snap.Replies != 1 { // only setAvg's reply: cancelled requests are not samples
			t.Fatalf("replies = %d, want 1", snap.Replies)
		}
		for i, r := range recs {
			if r.Body.Len() != 0 || r.Flushed {
				t.Fatalf("request %d: %d bytes sent to a client that left", i, r.Body.Len())
			}
		}
		// synctest.Test fails if any goroutine (or timer wait) is left.
	})
}

func TestMiddlewareMaxDelayRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, a, mw := middlewareFixture(t, func(c *Config) { c.MaxDelay = time.Second })
		rec, _ := serve(mw, bodyHandler(1000, 1000, false))
		// delay 5.67 s > max_delay 1 s: 503, the handler's headers dropped.
		if rec.Code != 503 || rec.Header().Get("X-Handler") != "" || rec.Header().Get("Retry-After") != "1" {
			t.Fatalf("got %d, X-Handler %q, Retry-After %q", rec.Code, rec.Header().Get("X-Handler"), rec.Header().Get("Retry-After"))
		}
		snap := s.Snapshot().Clients[a]
		if snap.Rejections["max_delay"] != 1 || snap.Standby != 0 {
			t.Fatalf("max_delay rejections %d, standby %d", snap.Rejections["max_delay"], snap.Standby)
		}
	})
}

func TestMiddlewarePanicReleasesSlot(t *testing.T) {
	s, a, mw := middlewareFixture(t, nil)
	func() {
		defer func() { _ = recover() }()
		mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	if s.Standby(a) != 0 {
		t.Fatalf("standby = %d after a panic", s.Standby(a))
	}
}

func TestWaitHelper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Wait(context.Background(), 3*time.Second); err != nil || time.Since(start) != 3*time.Second {
			t.Fatalf("Wait: %v after %v", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Wait(ctx, time.Hour); err != context.DeadlineExceeded || time.Since(start) != time.Second {
			t.Fatalf("Wait with a 1 s context: %v after %v", err, time.Since(start))
		}
		if err := Wait(ctx, 0); err == nil {
			t.Fatal("Wait on a done context returned nil")
		}
	})
}

func TestRunTicksEveryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Period = 500 * time.Millisecond
		s := mustNew(t, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- s.Run(ctx) }()
		time.Sleep(1750 * time.Millisecond)
		synctest.Wait()
		if got := s.Snapshot().Ticks; got != 3 {
			t.Fatalf("%d ticks after 1.75 s with a 0.5 s period, want 3", got)
		}
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Fatalf("Run returned %v", err)
		}
	})
}

func TestMiddlewareHijackIsReleased(t *testing.T) {
	s, a, mw := middlewareFixture(t, nil)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		if _, err := w.Write([]byte("x")); err != http.ErrHijacked {
			t.Errorf("Write after Hijack: %v", err)
		}
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
		brw.Flush()
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	srv.Close()
	if string(body) != "hi" {
		t.Fatalf("body %q", body)
	}
	snap := s.Snapshot().Clients[a]
	if snap.Standby != 0 || snap.Replies != 1 { // 1: setAvg's reply only
		t.Fatalf("after a hijack: standby %d, replies %d", snap.Standby, snap.Replies)
	}
}

// With ratelimit_headers, client a's answers, sent or rejected, carry its
// allocation and headroom: b_a = 100 B/s, d_a = 2·100 − 50 = 150 B/s,
// avg_a = 50 B/s, so r = 150 − 50 = 100 bytes.
func TestMiddlewareRateLimitHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const policy, limit = `"a";q=100;qu="content-bytes";w=1`, `"a";r=100;t=1`
		_, _, mw := middlewareFixture(t, func(c *Config) { c.RateLimitHeaders = true })
		rec, _ := serve(mw, bodyHandler(10, 10, true))
		if rec.Code != 200 || rec.Header().Get("RateLimit-Policy") != policy || rec.Header().Get("RateLimit") != limit {
			t.Errorf("sent: %d RateLimit-Policy %q RateLimit %q", rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"))
		}
		_, _, mw = middlewareFixture(t, func(c *Config) { c.RateLimitHeaders, c.MaxDelay = true, time.Second })
		rec, _ = serve(mw, bodyHandler(1000, 1000, false))
		if rec.Code != 503 || rec.Header().Get("RateLimit-Policy") != policy || rec.Header().Get("RateLimit") != limit {
			t.Errorf("rejected: %d RateLimit-Policy %q RateLimit %q", rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"))
		}
		_, _, mw = middlewareFixture(t, nil)
		rec, _ = serve(mw, bodyHandler(10, 10, true))
		if rec.Header().Get("RateLimit") != "" || rec.Header().Get("RateLimit-Policy") != "" {
			t.Errorf("off by default: %v", rec.Header())
		}
	})
}
