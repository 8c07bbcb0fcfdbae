// SPDX-License-Identifier: Apache-2.0

package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
)

// fake is a base RoundTripper that answers from a script and records what
// it was sent.
type fake struct {
	mu     sync.Mutex
	reqs   []*http.Request
	times  []time.Time
	bodies []string
	next   func(n int, r *http.Request) (*http.Response, error)
}

func (f *fake) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, r)
	f.times = append(f.times, time.Now())
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
	}
	f.bodies = append(f.bodies, string(b))
	f.mu.Unlock()
	return f.next(n, r)
}

func answer(status int, hdr ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("x"))}
}

func newTransport(t *testing.T, base http.RoundTripper, mod func(*Config)) *Transport {
	t.Helper()
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	tr, err := New(base, cfg, Options{Rand: rand.New(rand.NewPCG(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A GET that meets 503 is retried after a jittered back-off, and after
// Retry-After; the last answer comes back when the attempts run out.
func TestTransportRetriesSafeRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{next: func(n int, _ *http.Request) (*http.Response, error) {
			if n == 0 {
				return answer(503, "Retry-After", "1"), nil
			}
			if n == 1 {
				return nil, errors.New("connection reset")
			}
			return answer(200), nil
		}}
		tr := newTransport(t, f, nil)
		req, _ := http.NewRequest("GET", "http://a.test/x", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 || len(f.reqs) != 3 {
			t.Fatalf("resp %v, err %v, %d attempts", resp, err, len(f.reqs))
		}
		if gap := f.times[1].Sub(f.times[0]); gap < time.Second {
			t.Errorf("retried %v after a Retry-After of 1 s", gap)
		}
		if gap := f.times[2].Sub(f.times[1]); gap >= 50*time.Millisecond {
			t.Errorf("second back-off %v, want < 2·25ms", gap)
		}
		_ = start
		// Always 503: three attempts, the last answer returned.
		f2 := &fake{next: func(int, *http.Request) (*http.Response, error) { return answer(503), nil }}
		tr2 := newTransport(t, f2, nil)
		resp, err = tr2.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || len(f2.reqs) != 3 {
			t.Fatalf("always 503: %v %v, %d attempts", resp, err, len(f2.reqs))
		}
		if c := tr2.Dest("a.test").Counts(); c.Attempts != 3 || c.Retries != 2 {
			t.Fatalf("counts %+v", c)
		}
	})
}

// A POST is sent once; with an Idempotency-Key and a body that can be
// sent again it is retried with the same body.
func TestTransportRetriesOnlyWhatIsSafe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{next: func(int, *http.Request) (*http.Response, error) { return answer(502), nil }}
		tr := newTransport(t, f, nil)
		req, _ := http.NewRequest("POST", "http://a.test/x", strings.NewReader("payload"))
		if resp, _ := tr.RoundTrip(req); resp.StatusCode != 502 || len(f.reqs) != 1 {
			t.Fatalf("POST: %d attempts", len(f.reqs))
		}
		req, _ = http.NewRequest("POST", "http://a.test/x", strings.NewReader("payload"))
		req.Header.Set("Idempotency-Key", "k-1")
		tr.RoundTrip(req)
		if len(f.reqs) != 4 || f.bodies[1] != "payload" || f.bodies[3] != "payload" {
			t.Fatalf("keyed POST: %d attempts, bodies %q", len(f.reqs)-1, f.bodies)
		}
		// A body that cannot be sent again is not retried, even for PUT.
		req, _ = http.NewRequest("PUT", "http://a.test/x", io.NopCloser(strings.NewReader("once")))
		tr.RoundTrip(req)
		if len(f.reqs) != 5 {
			t.Fatalf("unreplayable PUT: %d attempts", len(f.reqs)-4)
		}
	})
}

// The retry budget holds retries to ratio·calls + the floor, however
// many calls fail.
func TestTransportRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{next: func(int, *http.Request) (*http.Response, error) { return answer(503), nil }}
		off := false
		tr := newTransport(t, f, func(c *Config) {
			c.Throttle.Enabled = &off
			c.Retry.BudgetMinPerSecond = 0.5 // a floor of 5 per 10 s
		})
		req, _ := http.NewRequest("GET", "http://a.test/x", nil)
		const calls = 200
		for range calls {
			tr.RoundTrip(req)
			time.Sleep(10 * time.Millisecond)
		}
		c := tr.Dest("a.test").Counts()
		if max := 5 + 0.1*calls; float64(c.Retries) > max {
			t.Fatalf("%d retries for %d calls, budget %v", c.Retries, calls, max)
		}
		if c.BudgetExhausted == 0 {
			t.Fatal("budget never exhausted")
		}
		t.Logf("%d calls: %d attempts, %d retries, %d refused by the budget", calls, c.Attempts, c.Retries, c.BudgetExhausted)
	})
}

// What travels with the request: the priority and tenant of its context
// (unless set on the request), and the time left of its deadline; the
// caller's request is left as it was.
func TestTransportStampsHop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{next: func(int, *http.Request) (*http.Response, error) { return answer(200), nil }}
		tr := newTransport(t, f, nil)
		ctx := sluice.WithHop(t.Context(), sluice.Hop{Priority: "gold", Tenant: "acme"})
		ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		time.Sleep(500 * time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://a.test/x", nil)
		req.Header.Set("X-Other", "1")
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		got := f.reqs[0].Header
		if got.Get(sluice.PriorityHeader) != "gold" || got.Get(sluice.TenantHeader) != "acme" ||
			got.Get(sluice.TimeoutHeader) != "1000000u" || got.Get("X-Other") != "1" {
			t.Fatalf("stamped %v", got)
		}
		if f.reqs[0] == req || len(req.Header) != 1 {
			t.Fatalf("the caller's request was changed: %v", req.Header)
		}
		// A header the caller set wins over the context's.
		req.Header.Set(sluice.PriorityHeader, "bronze")
		tr.RoundTrip(req)
		if got := f.reqs[1].Header.Get(sluice.PriorityHeader); got != "bronze" {
			t.Fatalf("priority %q, want the caller's bronze", got)
		}
		// Nothing to stamp: the request goes as it is.
		plain, _ := http.NewRequest("GET", "http://a.test/x", nil)
		tr.RoundTrip(plain)
		if f.reqs[2] != plain {
			t.Fatal("a request with nothing to stamp was copied")
		}
		// StampInPlace: the first attempt is the caller's own request.
		tr2, _ := New(f, DefaultConfig(), Options{StampInPlace: true})
		r2, _ := http.NewRequestWithContext(ctx, "GET", "http://a.test/x", nil)
		tr2.RoundTrip(r2)
		if f.reqs[3] != r2 || r2.Header.Get(sluice.TimeoutHeader) != "1000000u" {
			t.Fatalf("in place: %v", r2.Header)
		}
	})
}

// An attempt is not sent with less than MinRemaining of its deadline; a
// retry that would start too late is not made; per-try timeouts bound
// each attempt and are what the header says.
func TestTransportDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{next: func(int, *http.Request) (*http.Response, error) { return answer(503, "Retry-After", "2"), nil }}
		tr := newTransport(t, f, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Microsecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://a.test/x", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) || len(f.reqs) != 0 {
			t.Fatalf("0.5 ms left: %v, %d sent", err, len(f.reqs))
		}
		ctx2, cancel2 := context.WithTimeout(t.Context(), time.Second)
		defer cancel2()
		req, _ = http.NewRequestWithContext(ctx2, "GET", "http://a.test/x", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 503 || len(f.reqs) != 1 {
			t.Fatalf("Retry-After beyond the deadline: %v %v, %d sent", resp, err, len(f.reqs))
		}
		if c := tr.Dest("a.test").Counts(); c.Deadline != 2 {
			t.Fatalf("deadline count %d", c.Deadline)
		}
		// Per-try timeout: each attempt's header says its own deadline.
		slow := &fake{next: func(n int, r *http.Request) (*http.Response, error) {
			if n < 2 {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			return answer(200), nil
		}}
		tr3 := newTransport(t, slow, func(c *Config) { c.Retry.PerTryTimeout = 100 * time.Millisecond })
		ctx3, cancel3 := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel3()
		req, _ = http.NewRequestWithContext(ctx3, "GET", "http://a.test/x", nil)
		resp, err = tr3.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 || len(slow.reqs) != 3 {
			t.Fatalf("per-try: %v %v, %d sent", resp, err, len(slow.reqs))
		}
		if h := slow.reqs[0].Header.Get(sluice.TimeoutHeader); h != "100000u" {
			t.Fatalf("per-try header %q", h)
		}
		resp.Body.Close()
	})
}

// Against a destination that refuses everything the throttle refuses
// most calls locally, without sending them.
func TestTransportThrottles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{next: func(int, *http.Request) (*http.Response, error) { return answer(503), nil }}
		tr := newTransport(t, f, func(c *Config) { c.Retry.MaxAttempts = 1 })
		req, _ := http.NewRequest("GET", "http://a.test/x", nil)
		throttled := 0
		for range 1000 {
			if _, err := tr.RoundTrip(req); IsThrottled(err) {
				throttled++
				if !errors.Is(err, sluice.ErrRejected) {
					t.Fatal("ErrThrottled is not a rejection")
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		if throttled < 800 || len(f.reqs)+throttled != 1000 {
			t.Fatalf("throttled %d, sent %d", throttled, len(f.reqs))
		}
	})
}

func TestTransportMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{next: func(n int, _ *http.Request) (*http.Response, error) {
			if n == 0 {
				return answer(503), nil
			}
			return answer(200), nil
		}}
		reg := prometheus.NewRegistry()
		tr, err := New(f, DefaultConfig(), Options{Registerer: reg, Name: "test"})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", "http://a.test:8080/x", nil)
		tr.RoundTrip(req)
		const want = `
# HELP sluice_client_attempts_total Attempts sent to the destination (host:port), first attempts and retries.
# TYPE sluice_client_attempts_total counter
sluice_client_attempts_total{client="test",destination="a.test:8080"} 2
# HELP sluice_client_retries_total Retries sent to the destination.
# TYPE sluice_client_retries_total counter
sluice_client_retries_total{client="test",destination="a.test:8080"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_client_attempts_total", "sluice_client_retries_total"); err != nil {
			t.Fatal(err)
		}
		if _, err := New(f, DefaultConfig(), Options{Registerer: reg, Name: "test"}); err == nil {
			t.Fatal("a second collector of the same name registered")
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := t0
	for _, c := range []struct {
		v  string
		d  time.Duration
		ok bool
	}{
		{"", 0, false}, {"3", 3 * time.Second, true}, {"0", 0, true}, {" 7 ", 7 * time.Second, true},
		{"-1", 0, false}, {"1.5", 0, false}, {"99999999999", 0, false}, {"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	} {
		h := http.Header{}
		if c.v != "" {
			h.Set("Retry-After", c.v)
		}
		d, ok := RetryAfter(h, now)
		if d != c.d || ok != c.ok {
			t.Errorf("Retry-After %q: %v, %v; want %v, %v", c.v, d, ok, c.d, c.ok)
		}
	}
}

// FuzzRetryAfter: no header value panics, and none gives a negative wait.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "Wed, 21 Oct 2015 07:28:00 GMT", "", "-5", "1e9", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := RetryAfter(http.Header{"Retry-After": {v}}, t0)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("%q: %v, %v", v, d, ok)
		}
	})
}

// A real server on loopback: the hop headers arrive.
func TestTransportLoopback(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	tr := newTransport(t, nil, nil)
	c := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(sluice.WithHop(context.Background(), sluice.Hop{Priority: sluice.Critical}), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(b, []byte("ok")) || got.Get(sluice.PriorityHeader) != sluice.Critical || got.Get(sluice.TimeoutHeader) == "" {
		t.Fatalf("body %q headers %v", b, got)
	}
	if d, ok := sluice.ParseTimeout(got.Get(sluice.TimeoutHeader)); !ok || d > 5*time.Second || d < 4*time.Second {
		t.Fatalf("timeout header %q", got.Get(sluice.TimeoutHeader))
	}
}

// Configuration reloads while calls are in flight: each call keeps the
// configuration it began with, and nothing races (run under -race: the
// proxy's reload-under-load test met a race on the destination's config
// on 2026-11-27).
func TestTransportReloadWhileCalling(t *testing.T) {
	f := &fake{next: func(int, *http.Request) (*http.Response, error) { return answer(200), nil }}
	tr := newTransport(t, f, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				req, _ := http.NewRequest("GET", "http://api.example/x", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			cfg := DefaultConfig()
			cfg.MinRemaining = time.Duration(i+1) * time.Millisecond
			if i%2 == 1 {
				cfg.Throttle.Window *= 2
			}
			if err := tr.SetConfig(cfg); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	var call LiveCall
	tr.Begin(&call, "api.example", time.Now(), true, time.Time{})
	if got := call.Config().MinRemaining; got != 200*time.Millisecond {
		t.Errorf("a call begun after the last reload has MinRemaining %v, want 200ms", got)
	}
}
