// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

const hopMiddlewarePolicy = `
classes:
  order: [gold, bronze]
  trusted_proxies: [127.0.0.1]
stages: [{name: api, controller: static-concurrency, params: {limit: 100}}]
`

// The handler behind the middleware gets the request's deadline (from
// its timeout header) and what travels on (priority, tenant) in its
// context; a request out of time never reaches it.
func TestMiddlewareHopContext(t *testing.T) {
	p := newPolicy(t, hopMiddlewarePolicy)
	var got sluice.Hop
	var left time.Duration
	var hasDeadline, called bool
	h := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		got = sluice.HopFrom(r.Context())
		var dl time.Time
		dl, hasDeadline = r.Context().Deadline()
		left = time.Until(dl)
	}))
	serveOne := func(remote string, hdr ...string) int {
		called, got, hasDeadline = false, sluice.Hop{}, false
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Add(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := serveOne("127.0.0.1:1", sluice.PriorityHeader, "CRITICAL_PLUS", sluice.TenantHeader, "acme", sluice.TimeoutHeader, "1500m"); code != 200 {
		t.Fatalf("status %d", code)
	}
	if got != (sluice.Hop{Priority: "CRITICAL_PLUS", Tenant: "acme"}) || !hasDeadline || left <= time.Second || left > 1500*time.Millisecond {
		t.Fatalf("handler saw hop %+v, deadline %v in %v", got, hasDeadline, left)
	}
	// From an untrusted client its claims do not travel on (its class,
	// the default, travels as no priority).
	serveOne("192.0.2.1:1", sluice.PriorityHeader, "gold", sluice.TenantHeader, "acme")
	if got != (sluice.Hop{}) || hasDeadline {
		t.Fatalf("untrusted: hop %+v, deadline %v", got, hasDeadline)
	}
	if code := serveOne("192.0.2.1:1", sluice.TimeoutHeader, "-1S"); code != http.StatusServiceUnavailable || called {
		t.Fatalf("out of time: status %d, handler called %v", code, called)
	}
	if n := totals(p, "api", 1).Deadline; n != 1 {
		t.Fatalf("deadline rejections %d", n)
	}
}

// FuzzMiddlewareHopHeaders: whatever the hop headers hold, from a trusted
// proxy or anyone, the middleware answers 200 (the handler ran) or 503
// (rejected), never another status or a panic.
func FuzzMiddlewareHopHeaders(f *testing.F) {
	f.Add("gold", "acme", "250m", true)
	f.Add("SHEDDABLE", "", "0n", false)
	f.Add("\xff\x00", "a b", "99999999999999999999H", true)
	f.Add("", "", "-5S", true)
	p := newPolicy(f, hopMiddlewarePolicy)
	h := sluice.Middleware(p)(okHandler)
	f.Fuzz(func(t *testing.T, prio, tenant, timeout string, trusted bool) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		if trusted {
			r.RemoteAddr = "127.0.0.1:1"
		}
		r.Header[sluice.PriorityHeader] = []string{prio}
		r.Header[sluice.TenantHeader] = []string{tenant}
		r.Header[sluice.TimeoutHeader] = []string{timeout}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d for %q %q %q", w.Code, prio, tenant, timeout)
		}
	})
}
