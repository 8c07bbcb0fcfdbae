// SPDX-License-Identifier: Apache-2.0

package retry

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/internal/testclock"
)

var t0 = testclock.T0

func newDest(t *testing.T, cfg Config) *Dest {
	t.Helper()
	d, err := NewDest(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// run makes one call whose attempts end with the statuses given, in
// turn, and returns the stops and waits of Done.
func run(d *Dest, now time.Time, statuses ...int) (stops []client.Stop, waits []time.Duration) {
	rng := rand.New(rand.NewPCG(1, 2))
	var c Call
	c.Begin(d, now, rng)
	for _, st := range statuses {
		stop, wait := c.Done(now, client.Result{Status: st}, rng)
		stops, waits = append(stops, stop), append(waits, wait)
		if stop != client.StopRetry {
			break
		}
	}
	return stops, waits
}

func TestNaive(t *testing.T) {
	d := newDest(t, Config{Kind: Naive, Backoff: 10 * time.Millisecond})
	for _, c := range []struct {
		name     string
		statuses []int
		want     []client.Stop
	}{
		{"success", []int{200}, []client.Stop{client.StopDone}},
		{"not retryable", []int{404}, []client.Stop{client.StopDone}},
		{"500 is not retried", []int{500}, []client.Stop{client.StopDone}},
		{"timeouts, then success", []int{0, 503, 200}, []client.Stop{client.StopRetry, client.StopRetry, client.StopDone}},
		{"three failures", []int{0, 502, 504, 0}, []client.Stop{client.StopRetry, client.StopRetry, client.StopAttempts}},
	} {
		stops, waits := run(d, t0, c.statuses...)
		if len(stops) != len(c.want) {
			t.Errorf("%s: stops %v, want %v", c.name, stops, c.want)
			continue
		}
		for i := range stops {
			if stops[i] != c.want[i] || (stops[i] == client.StopRetry) != (waits[i] == 10*time.Millisecond) {
				t.Errorf("%s: stops %v waits %v, want %v with 10ms before each retry", c.name, stops, waits, c.want)
			}
		}
	}
}

// Budget: over its window, retries ≤ floor + ratio·calls, whatever fails.
func TestBudget(t *testing.T) {
	d := newDest(t, Config{Kind: Budget, BudgetRatio: 0.2, BudgetMinPerSecond: 0.1, BudgetWindow: 10 * time.Second})
	retries, budget := 0, 0
	for i := range 100 {
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		stops, _ := run(d, now, 503, 503, 503)
		for _, s := range stops {
			switch s {
			case client.StopRetry:
				retries++
			case client.StopBudget:
				budget++
			}
		}
	}
	// 1 + 0.2·100 = 21 within the window.
	if retries < 19 || retries > 21 || budget == 0 {
		t.Errorf("%d retries (%d refused for budget) over 100 failing calls; want about 21", retries, budget)
	}
	// A call that succeeds is not retried, and spends nothing.
	if stops, _ := run(d, t0.Add(2*time.Second), 200); stops[0] != client.StopDone {
		t.Errorf("success: %v", stops)
	}
}

// Throttle follows gRFC A6's token count: failures take a token,
// successes give back tokenRatio (not above maxTokens), and retries stop
// once no more than half the tokens are left.
func TestThrottle(t *testing.T) {
	d := newDest(t, Config{Kind: Throttle, MaxTokens: 10, TokenRatio: 0.1})
	steps := []struct {
		statuses []int
		want     []client.Stop
		tokens   float64
	}{
		{[]int{503, 503, 503}, []client.Stop{client.StopRetry, client.StopRetry, client.StopAttempts}, 7},
		{[]int{0, 0}, []client.Stop{client.StopRetry, client.StopThrottled}, 5},
		{[]int{200}, []client.Stop{client.StopDone}, 5.1},
		{[]int{0}, []client.Stop{client.StopThrottled}, 4.1},
		{[]int{404}, []client.Stop{client.StopDone}, 4.1},
	}
	for i, s := range steps {
		stops, _ := run(d, t0, s.statuses...)
		if len(stops) != len(s.want) || d.Tokens() < s.tokens-1e-9 || d.Tokens() > s.tokens+1e-9 {
			t.Fatalf("step %d: stops %v tokens %v, want %v tokens %v", i, stops, d.Tokens(), s.want, s.tokens)
		}
		for j := range stops {
			if stops[j] != s.want[j] {
				t.Fatalf("step %d: stops %v, want %v", i, stops, s.want)
			}
		}
	}
	for range 100 {
		run(d, t0, 200)
	}
	if d.Tokens() != 10 {
		t.Errorf("tokens after many successes %v, want maxTokens 10", d.Tokens())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Kind: "exponential"}, {MaxAttempts: 11}, {Backoff: -1}, {PerTry: -1}, {BudgetRatio: 2},
		{BudgetMinPerSecond: -1}, {BudgetWindow: -1}, {MaxTokens: 2000}, {TokenRatio: -1},
	} {
		c.SetDefaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	var c Config
	c.SetDefaults()
	if err := c.Validate(); err != nil || c.Kind != Naive || c.MaxAttempts != 3 {
		t.Errorf("defaults %+v: %v", c, err)
	}
}

// The Transport retries what its policy retries, bounds each attempt by
// PerTry, and stops when the caller's context ends.
func TestTransport(t *testing.T) {
	var calls atomic.Int32
	slow := make(chan struct{})
	defer close(slow)
	arrived := make(chan int32, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		arrived <- n
		switch r.URL.Path {
		case "/flaky":
			if n < 3 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
		case "/slow":
			select {
			case <-slow:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	rt, err := NewTransport(nil, Config{Kind: Naive, PerTry: 50 * time.Millisecond}, 1)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: rt}
	resp, err := hc.Get(srv.URL + "/flaky")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("flaky: %v %v", resp, err)
	}
	resp.Body.Close()
	if a, r := rt.Counts(); calls.Load() != 3 || a != 3 || r != 2 {
		t.Errorf("flaky: %d calls, counts %d attempts %d retries; want 3, 3, 2", calls.Load(), a, r)
	}
	drain := func() {
		for len(arrived) > 0 {
			<-arrived
		}
	}
	drain()
	calls.Store(0)
	start := time.Now()
	_, err = hc.Get(srv.URL + "/slow")
	if err == nil || calls.Load() != 3 || time.Since(start) < 150*time.Millisecond {
		t.Errorf("slow: err %v after %d calls in %v; want a timeout after 3 attempts of 50ms", err, calls.Load(), time.Since(start))
	}
	drain()
	calls.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The caller leaves during the second attempt.
		<-arrived
		<-arrived
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/slow", nil)
	_, err = hc.Do(req)
	if err == nil || calls.Load() != 2 {
		t.Errorf("caller gone: err %v after %d calls; want an error after 2 (the second cut by the caller)", err, calls.Load())
	}
}
