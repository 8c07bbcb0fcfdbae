// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func BenchmarkRecorderAdd(b *testing.B) {
	rec := newRecorder(11*time.Second, 0)
	ev := event{typ: "/a", class: "gold", client: "A", out: outOK, bytes: 100, latency: 3 * time.Millisecond}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ev.intended = time.Duration(i) * 50 * time.Microsecond
		ev.done = ev.intended + ev.latency
		rec.add(ev)
		i++
	}
}

func BenchmarkTPCWNext(b *testing.B) {
	w, _ := NewTPCW(bookMeta, "shopping")
	r := rand.New(rand.NewPCG(1, 2))
	s := w.NewSession(r)
	body := []byte(`<a href="/shopping_cart?SHOPPING_ID=17&I_ID=5">cart</a><a href="/product_detail?I_ID=42">x</a>`)
	b.ReportAllocs()
	for b.Loop() {
		q := s.Next(r)
		s.Observe(q, 200, body)
	}
}

// benchExchange measures one request on a real loopback connection to a
// trivial server, through the direct client or net/http.Transport.
func benchExchange(b *testing.B, direct bool) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }))
	defer srv.Close()
	cfg := Config{Target: srv.URL, Mode: ModeOpen, Duration: time.Hour, Seed: 1, Workload: mustURLs(b, "/"), Arrivals: mustConstant(b, "1")}
	r, err := newRunner(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	r.lean = direct
	u := r.newUser(1)
	req := Request{Type: "/", URL: "/"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, out := r.do(u, req, time.Since(r.start), -1, -1); out != outOK {
			b.Fatalf("outcome %s", outcomeNames[out])
		}
	}
	r.h1ClosePools()
}

func BenchmarkExchangeDirect(b *testing.B)    { benchExchange(b, true) }
func BenchmarkExchangeTransport(b *testing.B) { benchExchange(b, false) }
