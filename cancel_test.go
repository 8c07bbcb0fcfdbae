// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/policytest"
)

const cancelHopPolicy = `
classes:
  trusted_proxies: [127.0.0.1]
stages: [{name: api, controller: static-concurrency, params: {limit: 100, period: 100ms}}]
`

// workEnd is what a leaf handler saw of its context: when it ended and
// with what cause.
type workEnd struct {
	at    time.Time
	cause error
	dl    bool // the context had a deadline
}

// leaf is a handler that works until its context ends (at most a
// minute), as a CPU-bound handler checking its context between slices
// of work does, and reports when and why it stopped.
func leaf(ended chan<- workEnd) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		_, dl := ctx.Deadline()
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		ended <- workEnd{at: time.Now(), cause: context.Cause(ctx), dl: dl}
	}
}

// front is a handler that calls next through sluice's client side with
// its request's context, and relays the status.
func front(t *testing.T, next string) http.HandlerFunc {
	rt, err := client.New(http.DefaultTransport, client.DefaultConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: rt}
	return func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", next, nil)
		resp, err := c.Do(req)
		if err != nil {
			return // the context ended: the middleware answers (or nobody listens)
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}
}

// Cancellation crosses two hops over real sockets: a caller → hop A (the
// middleware, whose handler calls hop B through client.Transport with
// its request's context) → hop B (the middleware, a handler that works
// until its context ends). When the caller's deadline passes, B's handler
// sees its context end — it has a deadline of its own, from the
// X-Sluice-Timeout hop A stamped, and hop A's transport closes the
// connection when A's deadline passes, whichever comes first — and when a
// caller without a deadline gives up, B's handler sees it cancelled (the
// connection hop A's transport closes): within a second either way, where
// the handler would otherwise work a minute.
func TestCancellationCrossesTwoHops(t *testing.T) {
	ended := make(chan workEnd, 1)
	b := serve(t, sluice.Middleware(newPolicy(t, cancelHopPolicy))(leaf(ended)))
	a := serve(t, sluice.Middleware(newPolicy(t, cancelHopPolicy))(front(t, b.URL)))
	rt, err := client.New(http.DefaultTransport, client.DefaultConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	caller := &http.Client{Transport: rt}
	for _, tc := range []struct {
		name     string
		deadline bool
	}{{"deadline", true}, {"caller leaves", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			give := time.Now().Add(300 * time.Millisecond)
			if tc.deadline {
				ctx, cancel = context.WithDeadline(ctx, give)
				defer cancel()
			} else {
				time.AfterFunc(time.Until(give), cancel)
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", a.URL, nil)
			if resp, err := caller.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the call succeeded (%d) where its caller gave up", resp.StatusCode)
			}
			var e workEnd
			select {
			case e = <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("hop B's handler still works 10 s after its caller gave up")
			}
			late := e.at.Sub(give)
			t.Logf("hop B's handler stopped %v after the caller gave up: %v (deadline %v)", late.Round(time.Millisecond), e.cause, e.dl)
			if late > time.Second {
				t.Errorf("hop B's handler stopped %v after its caller gave up, want within 1 s", late)
			}
			if tc.deadline && (!e.dl || e.cause == nil) {
				t.Errorf("with a deadline: B's context had a deadline %v, ended by %v; want the caller's deadline carried to B", e.dl, e.cause)
			}
			if !tc.deadline && (e.dl || !errors.Is(e.cause, context.Canceled)) {
				t.Errorf("without a deadline: B's context had a deadline %v, ended by %v; want cancelled", e.dl, e.cause)
			}
		})
	}
}

// A request a stage's hog rule cancels is answered, not dropped: its
// handler's context ends with a cause wrapping sluice.ErrHog, and the
// handler, returning without an answer, gets the policy's rejection (503
// with Retry-After) from the middleware. A handler whose deadline passes
// before it answers gets 504, not an empty 200.
func TestMiddlewareAnswersCancelledRequests(t *testing.T) {
	p := policytest.Running(t, `
stages: [{name: api, controller: static-concurrency, params: {limit: 10, period: 50ms}, hog: {max_service_time: 200ms}}]
`)
	ended := make(chan workEnd, 2)
	srv := serve(t, sluice.Middleware(p)(leaf(ended)))
	var hogs atomic.Int64
	for _, tc := range []struct {
		name    string
		timeout string
		status  int
	}{{"hog", "", http.StatusServiceUnavailable}, {"deadline", "100m", http.StatusGatewayTimeout}} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if tc.timeout != "" {
			req.Header.Set(sluice.TimeoutHeader, tc.timeout)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := <-ended
		t.Logf("%s: %d %q, Retry-After %q; handler's cause %v", tc.name, resp.StatusCode, strings.TrimSpace(string(body)), resp.Header.Get("Retry-After"), e.cause)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if tc.name == "hog" {
			hogs.Add(1)
			if !errors.Is(e.cause, sluice.ErrHog) || resp.Header.Get("Retry-After") == "" {
				t.Errorf("hog: cause %v, Retry-After %q; want ErrHog and a Retry-After", e.cause, resp.Header.Get("Retry-After"))
			}
		}
	}
	if got := p.Stage("api").HogCancelled()["max_service_time"]; got != uint64(hogs.Load()) {
		t.Errorf("counted %d hog cancellations, want %d", got, hogs.Load())
	}
}
