// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync/atomic"
	"testing"
	"time"
)

// These tests use real sockets on 127.0.0.1 and wall-clock time; they are
// short and their margins generous.

func TestRealSocketOpenLoopRate(t *testing.T) {
	var log hitLog
	srv := httptest.NewServer(okHandler(&log))
	defer srv.Close()
	cfg := Config{Target: srv.URL, Mode: ModeOpen, Duration: 2 * time.Second, Seed: 1,
		Workload: mustURLs(t, "/x"), Arrivals: mustConstant(t, "200")}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hits := log.all()
	if res.Total.Offered != 399 || res.Total.OK != res.Total.Offered || len(hits) != 399 {
		t.Fatalf("offered %d ok %d server %d, want 399 each (arrivals every 5ms in 2s)", res.Total.Offered, res.Total.OK, len(hits))
	}
	span := hits[len(hits)-1].at.Sub(hits[0].at).Seconds()
	if got := float64(len(hits)-1) / span; !within(got, 200, 0.05) {
		t.Errorf("server-side rate %.1f/s, want 200 ±5%%", got)
	}
}

func TestRealSocketTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	cfg := Config{Target: srv.URL, Mode: ModeOpen, Duration: 500 * time.Millisecond, Seed: 1,
		Workload: mustURLs(t, "/"), Arrivals: mustConstant(t, "10"), Timeout: 100 * time.Millisecond}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total.Timeouts != 4 || res.Total.Offered != 4 {
		t.Errorf("counts %+v, want 4 offered, 4 timeouts", res.Total.Counts)
	}
}

func TestRealSocketTransportErrors(t *testing.T) {
	// A closed port: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := Config{Target: "http://" + addr, Mode: ModeOpen, Duration: 300 * time.Millisecond, Seed: 1,
		Workload: mustURLs(t, "/"), Arrivals: mustConstant(t, "10")}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Total.TransportErrors != 2 || res.Total.Errors != 2 {
		t.Errorf("counts %+v, want 2 transport errors", res.Total.Counts)
	}
}

func TestSourceAddrBinding(t *testing.T) {
	var log hitLog
	srv := httptest.NewServer(okHandler(&log))
	defer srv.Close()
	addrs, err := ParseAddrs("--source-addrs", "127.0.0.2-127.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		clients []Weighted
	}{
		{"addresses are identities", nil},
		{"named clients", []Weighted{{"x", 1}, {"y", 1}, {"z", 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log.mu.Lock()
			log.hits = nil
			log.mu.Unlock()
			cfg := Config{Target: srv.URL, Mode: ModeClosed, Duration: 500 * time.Millisecond, Seed: 1,
				Workload: mustURLs(t, "/"), Users: mustSchedule(t, "6"), Think: mustDist(t, "det:20ms"),
				SourceAddrs: addrs, Clients: tc.clients}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]string{} // source host -> client header
			for _, h := range log.all() {
				host, _, _ := net.SplitHostPort(h.remote)
				if prev, ok := seen[host]; ok && prev != h.header.Get("X-Client-Id") {
					t.Errorf("source %s carried client ids %q and %q", host, prev, h.header.Get("X-Client-Id"))
				}
				seen[host] = h.header.Get("X-Client-Id")
			}
			var hosts []string
			for h := range seen {
				hosts = append(hosts, h)
			}
			sort.Strings(hosts)
			if len(hosts) != 3 || hosts[0] != "127.0.0.2" || hosts[2] != "127.0.0.4" {
				t.Fatalf("source addresses seen %v, want 127.0.0.2..4", hosts)
			}
			for i, h := range hosts {
				want := ""
				key := h
				if tc.clients != nil {
					want = tc.clients[i].Name
					key = want
				}
				if seen[h] != want {
					t.Errorf("source %s: client header %q, want %q", h, seen[h], want)
				}
				if res.ByClient[key].OK == 0 {
					t.Errorf("ByClient[%s] is empty: %v", key, res.ByClient)
				}
			}
		})
	}
}

func TestParseAddrsLoopbackOnly(t *testing.T) {
	cases := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"127.0.0.2-127.0.0.4", []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}, false},
		{"127.0.0.9, 127.0.1.1", []string{"127.0.0.9", "127.0.1.1"}, false},
		{"127.0.0.255-127.0.1.0", []string{"127.0.0.255", "127.0.1.0"}, false},
		{"10.0.0.1", nil, true},
		{"::1", nil, true},
		{"127.0.0.5-127.0.0.2", nil, true},
		{"127.0.0.2,127.0.0.2", nil, true},
		{"127.0.0.0-127.0.255.255", nil, true}, // too many
		{"", nil, true},
		{"localhost", nil, true},
	}
	for _, tc := range cases {
		got, err := ParseAddrs("--source-addrs", tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseAddrs(%q) error %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		var s []string
		for _, a := range got {
			s = append(s, a.String())
		}
		if len(s) != len(tc.want) {
			t.Errorf("ParseAddrs(%q) = %v, want %v", tc.in, s, tc.want)
			continue
		}
		for i := range s {
			if s[i] != tc.want[i] {
				t.Errorf("ParseAddrs(%q) = %v, want %v", tc.in, s, tc.want)
				break
			}
		}
	}
}

func TestRealSocketMaxConnsQueuesInClient(t *testing.T) {
	var open, maxOpen atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			if v := open.Add(1); v > maxOpen.Load() {
				maxOpen.Store(v)
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	cfg := Config{Target: srv.URL, Mode: ModeOpen, Duration: 500 * time.Millisecond, Seed: 1,
		Workload: mustURLs(t, "/"), Arrivals: mustConstant(t, "40"), MaxConns: 2}
	var recs recordLog
	cfg.OnRequest = recs.add
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if maxOpen.Load() != 2 {
		t.Errorf("server saw %d connections at once, want MaxConns=2", maxOpen.Load())
	}
	if res.Total.OK != 19 {
		t.Errorf("counts %+v, want 19 OK", res.Total.Counts)
	}
	// 2 connections serve 20/s while 40/s arrive: requests wait in the
	// client, and that wait is part of their latency.
	var worst time.Duration
	for _, r := range recs.all() {
		worst = max(worst, r.Latency)
		if r.Latency < r.Done-r.Sent {
			t.Errorf("latency %v shorter than the exchange %v", r.Latency, r.Done-r.Sent)
		}
	}
	if worst < 400*time.Millisecond {
		t.Errorf("worst latency %v: the client-side wait for a connection is hidden", worst)
	}
}

func TestRealSocketStallShowsInLatency(t *testing.T) {
	start := time.Now()
	stallFrom, stallTo := start.Add(500*time.Millisecond), start.Add(800*time.Millisecond)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if now := time.Now(); now.After(stallFrom) && now.Before(stallTo) {
			time.Sleep(stallTo.Sub(now))
		}
	}))
	defer srv.Close()
	cfg := Config{Target: srv.URL, Mode: ModeOpen, Duration: 1200 * time.Millisecond, Seed: 1,
		Workload: mustURLs(t, "/"), Arrivals: mustConstant(t, "100")}
	var recs recordLog
	cfg.OnRequest = recs.add
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, r := range recs.all() {
		// Requests intended well inside the stall (not at its edges, where
		// real-time jitter decides) must wait for its end.
		at := r.Intended
		if at > 520*time.Millisecond && at < 780*time.Millisecond {
			checked++
			want := 800*time.Millisecond - at - 5*time.Millisecond
			if r.Latency < want {
				t.Errorf("request intended at %v: latency %v, want >= %v (until the stall ends)", at, r.Latency, want)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d requests inside the stall", checked)
	}
}

// stallingServer answers no request: each waits until its client goes
// away or the test ends.
func stallingServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv
}

func TestRealSocketCancelAbortsInflight(t *testing.T) {
	srv := stallingServer(t)
	for _, mode := range []Mode{ModeOpen, ModeClosed} {
		cfg := Config{Target: srv.URL, Mode: mode, Duration: 10 * time.Second, Seed: 1, Workload: mustURLs(t, "/")}
		if mode == ModeOpen {
			cfg.Arrivals = mustConstant(t, "50")
		} else {
			cfg.Users, cfg.Think = mustSchedule(t, "5"), mustDist(t, "det:0")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		t0 := time.Now()
		res, err := Run(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(t0); el > 2*time.Second {
			t.Errorf("%s: Run took %v after cancellation", mode, el)
		}
		if !res.Interrupted || res.Total.Aborted == 0 || res.Total.Aborted != res.Total.Offered || res.Total.Timeouts != 0 {
			t.Errorf("%s: interrupted %v counts %+v, want every request aborted", mode, res.Interrupted, res.Total.Counts)
		}
	}
}

func TestRealSocketKeepAliveEdgeCases(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		idle    time.Duration
		bytes   int64
	}{
		{"server closes idle connections", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("abc")) }, 30 * time.Millisecond, 3},
		{"connection close", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			w.Write([]byte("abcd"))
		}, 0, 4},
		{"chunked body", func(w http.ResponseWriter, r *http.Request) {
			for range 3 {
				w.Write([]byte("12345"))
				w.(http.Flusher).Flush()
			}
		}, 0, 15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(tc.handler)
			srv.Config.IdleTimeout = tc.idle
			srv.Start()
			defer srv.Close()
			cfg := Config{Target: srv.URL, Mode: ModeClosed, Duration: 500 * time.Millisecond, Seed: 1,
				Workload: mustURLs(t, "/"), Users: mustSchedule(t, "2"), Think: mustDist(t, "det:60ms")}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			tot := res.Total
			if tot.Errors != 0 || tot.OK < 10 || tot.OK != tot.Offered || tot.Bytes != tc.bytes*tot.OK {
				t.Errorf("counts %+v, want every request ok with %d bytes", tot.Counts, tc.bytes)
			}
		})
	}
}
