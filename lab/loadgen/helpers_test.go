// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

// handlerTransport serves requests in memory with an http.Handler, so runs
// inside a synctest bubble use virtual time end to end. It honours the
// request context like a real transport: a cancelled or expired request
// returns the context's error at once.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ch := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		t.h.ServeHTTP(rec, req)
		ch <- rec
	}()
	select {
	case rec := <-ch:
		return rec.Result(), nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// hit is one request as seen by a test server.
type hit struct {
	at     time.Time
	path   string
	header http.Header
	remote string
}

// hitLog records requests; safe for concurrent use.
type hitLog struct {
	mu   sync.Mutex
	hits []hit
}

func (l *hitLog) add(r *http.Request) {
	l.mu.Lock()
	l.hits = append(l.hits, hit{at: time.Now(), path: r.URL.RequestURI(), header: r.Header.Clone(), remote: r.RemoteAddr})
	l.mu.Unlock()
}

func (l *hitLog) all() []hit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hit(nil), l.hits...)
}

// okHandler answers 200 with a short body and logs the request.
func okHandler(l *hitLog) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l != nil {
			l.add(r)
		}
		w.Write([]byte("ok\n"))
	})
}

func mustConstant(t testing.TB, spec string) dist.Arrivals {
	t.Helper()
	s, err := dist.ParseSchedule(spec)
	if err != nil {
		t.Fatal(err)
	}
	return dist.Constant{Rate: s}
}

func mustPoisson(t testing.TB, spec string) dist.Arrivals {
	t.Helper()
	s, err := dist.ParseSchedule(spec)
	if err != nil {
		t.Fatal(err)
	}
	return dist.Poisson{Rate: s}
}

func mustSchedule(t testing.TB, spec string) dist.Schedule {
	t.Helper()
	s, err := dist.ParseSchedule(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustDist(t testing.TB, spec string) dist.Dist {
	t.Helper()
	d, err := dist.ParseDuration(spec)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustURLs(t testing.TB, list string) Workload {
	t.Helper()
	ws, err := ParseWeighted("--paths", list)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewURLs("paths", "--paths", ws)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// openConfig is an open-loop config against an in-memory handler.
func openConfig(t testing.TB, h http.Handler, arrivals dist.Arrivals, d time.Duration) Config {
	return Config{
		Target:    "http://127.0.0.1:1",
		Mode:      ModeOpen,
		Duration:  d,
		Seed:      7,
		Workload:  mustURLs(t, "/a"),
		Arrivals:  arrivals,
		Transport: handlerTransport{h},
	}
}

// closedConfig is a closed-loop config against an in-memory handler.
func closedConfig(t testing.TB, h http.Handler, users, think string, d time.Duration) Config {
	return Config{
		Target:    "http://127.0.0.1:1",
		Mode:      ModeClosed,
		Duration:  d,
		Seed:      7,
		Workload:  mustURLs(t, "/a"),
		Users:     mustSchedule(t, users),
		Think:     mustDist(t, think),
		Transport: handlerTransport{h},
	}
}

func within(got, want, frac float64) bool {
	return got >= want*(1-frac) && got <= want*(1+frac)
}

// recordLog collects RequestRecords; safe for concurrent use.
type recordLog struct {
	mu   sync.Mutex
	recs []RequestRecord
}

func (l *recordLog) add(r RequestRecord) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

func (l *recordLog) all() []RequestRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]RequestRecord(nil), l.recs...)
}

func parseRequestURL(s string) (*url.URL, error) { return url.Parse("http://127.0.0.1" + s) }
