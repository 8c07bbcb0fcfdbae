// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkTransport is a GET against a loopback server through a bare
// http.Transport and through the client side in front of the same kind
// of transport, on the success path (200, no retry, throttle on and
// quiet): without anything to stamp ("plain"), and with a deadline and a
// hop in the context, stamped on a copy ("stamped") or on the request
// itself ("stamped-in-place", the proxy's way), against a bare transport
// sent the same headers by its caller ("bare-with-headers"; the
// in-process server's parsing of them is in every run). The loopback
// exchange costs tens of µs, far more than the client side adds:
// BenchmarkOverhead measures that alone.
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	newBase := func() *http.Transport {
		return &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	}
	ctx, cancel := context.WithTimeout(sluice.WithHop(context.Background(), sluice.Hop{Priority: "gold", Tenant: "acme"}), time.Hour)
	defer cancel()
	run := func(b *testing.B, rt http.RoundTripper, ctx context.Context, headers bool) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/x", nil)
				if headers { // what the client side would stamp, set by the caller
					req.Header.Set(sluice.PriorityHeader, "gold")
					req.Header.Set(sluice.TenantHeader, "acme")
					req.Header.Set(sluice.TimeoutHeader, "3599999999u")
				}
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	for _, bc := range []struct {
		name    string
		wrap    bool
		inPlace bool
		ctx     context.Context
		headers bool
	}{
		{"bare", false, false, context.Background(), false},
		{"client-plain", true, false, context.Background(), false},
		{"bare-with-headers", false, false, ctx, true},
		{"client-stamped", true, false, ctx, false},
		{"client-stamped-in-place", true, true, ctx, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			base := newBase()
			defer base.CloseIdleConnections()
			rt := wrapped(b, base, bc.wrap, bc.inPlace)
			run(b, rt, bc.ctx, bc.headers)
		})
	}
}

// wrapped returns base itself (wrap false) or a Transport with the
// default configuration over it.
func wrapped(b *testing.B, base http.RoundTripper, wrap, inPlace bool) http.RoundTripper {
	if !wrap {
		return base
	}
	t, err := New(base, DefaultConfig(), Options{StampInPlace: inPlace})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// BenchmarkDecisions is the client side's own work per successful call,
// without the network: the destination lookup, Begin and Done under the
// destination's lock.
func BenchmarkDecisions(b *testing.B) {
	t, err := New(http.DefaultTransport, DefaultConfig(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var c LiveCall
			now := time.Now()
			t.Begin(&c, "a.test:80", now, true, time.Time{})
			c.Done(now, Result{Status: 200})
		}
	})
}

// canned is a base RoundTripper that answers at once, without a network.
type canned struct{ resp http.Response }

func (c *canned) RoundTrip(*http.Request) (*http.Response, error) { return &c.resp, nil }

// BenchmarkOverhead is the client side's cost per successful call on its
// own: the same request sent to an instant base transport directly
// ("bare") and through Transport ("client"), without and with a deadline
// and a hop to stamp. The allocations of a real transport (58 per GET on
// loopback, BenchmarkTransport) are not in either.
func BenchmarkOverhead(b *testing.B) {
	base := &canned{resp: http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}}
	ctx, cancel := context.WithTimeout(sluice.WithHop(context.Background(), sluice.Hop{Priority: "gold", Tenant: "acme"}), time.Hour)
	defer cancel()
	plain, _ := http.NewRequest("GET", "http://a.test/x", nil)
	for _, bc := range []struct {
		name    string
		wrap    bool
		inPlace bool
		ctx     context.Context
	}{
		{"bare", false, false, context.Background()},
		{"client", true, false, context.Background()},
		{"client-stamped", true, false, ctx},
		{"client-stamped-in-place", true, true, ctx},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rt := wrapped(b, base, bc.wrap, bc.inPlace)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				// One request per goroutine, sent again and again (in
				// place, its headers are stamped once and then updated).
				r := plain.Clone(bc.ctx)
				for pb.Next() {
					if _, err := rt.RoundTrip(r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
