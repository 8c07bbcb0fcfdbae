// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func newTestQueue(t *testing.T, cfg QueueConfig) *Queue {
	t.Helper()
	q, err := NewQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func queueCfg(workers int, discipline, service string) QueueConfig {
	c := DefaultQueueConfig()
	c.Workers, c.Discipline, c.Service = workers, discipline, service
	return c
}

func TestQueueConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		mod   func(*QueueConfig)
		field string
	}{
		{"workers", func(c *QueueConfig) { c.Workers = 0 }, "workers=0"},
		{"discipline", func(c *QueueConfig) { c.Discipline = "lifo" }, `discipline="lifo"`},
		{"service", func(c *QueueConfig) { c.Service = "exp:" }, `service="exp:"`},
		{"zero service", func(c *QueueConfig) { c.Service = "det:0s" }, `service="det:0s"`},
		{"queue limit", func(c *QueueConfig) { c.QueueLimit = -1 }, "queue_limit=-1"},
		{"size", func(c *QueueConfig) { c.Size = -5 }, "size=-5"},
	}
	for _, tt := range tests {
		c := DefaultQueueConfig()
		tt.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: Validate() = %v, want an error naming %s", tt.name, err, tt.field)
		}
	}
	if err := DefaultQueueConfig().Validate(); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
}

// closedLoop runs clients that each send requests back to back through h
// (no network) until the virtual deadline and returns the completions per
// status.
func closedLoop(h http.Handler, clients int, d time.Duration, hdr http.Header) map[int]int {
	var mu sync.Mutex
	counts := map[int]int{}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/work", nil)
				for k, v := range hdr {
					req.Header[k] = v
				}
				h.ServeHTTP(rec, req)
				if time.Now().After(deadline) {
					return
				}
				mu.Lock()
				counts[rec.Code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return counts
}

// TestQueueCapacityVirtual measures the throughput of saturated queues in
// virtual time: exactly Workers/mean requests per second.
func TestQueueCapacityVirtual(t *testing.T) {
	tests := []struct {
		workers    int
		discipline string
		service    string
		quality    string
		want       float64 // req/s
	}{
		{4, DisciplineFIFO, "det:10ms", "", 400},
		{4, DisciplinePS, "det:10ms", "", 400},
		{2, DisciplineFIFO, "det:5ms", "", 400},
		{4, DisciplineFIFO, "det:10ms", "0.5", 800},
		{4, DisciplineFIFO, "det:10ms", "0", 4000},
		{1, DisciplinePS, "exp:10ms", "", 100},
	}
	for _, tt := range tests {
		name := tt.discipline + "/" + strconv.Itoa(tt.workers) + "x" + tt.service + "/q" + tt.quality
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newTestQueue(t, queueCfg(tt.workers, tt.discipline, tt.service))
				hdr := http.Header{}
				if tt.quality != "" {
					hdr.Set(QualityHeader, tt.quality)
				}
				const secs = 20
				counts := closedLoop(q, 4*tt.workers, secs*time.Second, hdr)
				got := float64(counts[http.StatusOK]) / secs
				// Deterministic service is exact up to the requests in
				// flight at the deadline; the exponential case is a random
				// sum of 2000 draws (±3σ ≈ ±7%).
				tol := 0.01
				if strings.HasPrefix(tt.service, "exp") {
					tol = 0.08
				}
				if math.Abs(got-tt.want) > tol*tt.want {
					t.Errorf("throughput = %.1f req/s, want %.1f ±%.0f%% (counts %v)", got, tt.want, tol*100, counts)
				}
			})
		})
	}
}

func TestQueueLatencyAndHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestQueue(t, queueCfg(1, DisciplineFIFO, "det:10ms"))
		for _, tt := range []struct {
			quality string
			want    time.Duration
			status  int
		}{
			{"", 10 * time.Millisecond, 200},
			{"0.5", 5 * time.Millisecond, 200},
			{"0.01", time.Millisecond, 200}, // floor MinQuality
			{"2", 0, 400},
		} {
			req := httptest.NewRequest("GET", "/x", nil)
			if tt.quality != "" {
				req.Header.Set(QualityHeader, tt.quality)
			}
			rec := httptest.NewRecorder()
			start := time.Now()
			q.ServeHTTP(rec, req)
			if got := time.Since(start); rec.Code != tt.status || got != tt.want {
				t.Errorf("quality %q: status %d after %v, want %d after %v", tt.quality, rec.Code, got, tt.status, tt.want)
			}
			if tt.status != 200 {
				continue
			}
			if rec.Body.Len() != 128 || rec.Header().Get("Content-Length") != "128" {
				t.Errorf("body %d bytes, Content-Length %q; want 128", rec.Body.Len(), rec.Header().Get("Content-Length"))
			}
			u, err := strconv.ParseFloat(rec.Header().Get(UtilizationHeader), 64)
			if err != nil || u < 0 || u > 1 {
				t.Errorf("utilization header %q not in [0,1]", rec.Header().Get(UtilizationHeader))
			}
		}
		time.Sleep(2 * time.Second) // idle: the window forgets the work
		// Saturate for 3 s with 4 clients: utilization is 1.
		closedLoop(q, 4, 3*time.Second, nil)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { q.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil)); close(done) }()
		<-done
		if u := rec.Header().Get(UtilizationHeader); u != "1.0000" {
			t.Errorf("utilization after saturation = %s, want 1.0000", u)
		}
	})
}

func TestQueueLimitRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := queueCfg(1, DisciplineFIFO, "det:10ms")
		cfg.QueueLimit = 1
		q := newTestQueue(t, cfg)
		codes := make(chan int, 3)
		for range 3 {
			go func() {
				rec := httptest.NewRecorder()
				q.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
				if rec.Code == 503 && rec.Header().Get("Retry-After") == "" {
					t.Error("503 without Retry-After")
				}
				if rec.Header().Get(UtilizationHeader) == "" {
					t.Errorf("status %d without %s", rec.Code, UtilizationHeader)
				}
				codes <- rec.Code
			}()
		}
		got := map[int]int{}
		for range 3 {
			got[<-codes]++
		}
		if got[200] != 2 || got[503] != 1 {
			t.Errorf("statuses %v, want two 200 and one 503", got)
		}
		if s := q.Stats(); s.Requests != 3 || s.Rejected != 1 {
			t.Errorf("stats %+v, want 3 requests, 1 rejected", s)
		}
	})
}

func TestQueueCloseReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestQueue(t, queueCfg(1, DisciplineFIFO, "det:1h"))
		code := make(chan int)
		go func() {
			rec := httptest.NewRecorder()
			q.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
			code <- rec.Code
		}()
		synctest.Wait()
		q.Close()
		if c := <-code; c != http.StatusServiceUnavailable {
			t.Errorf("status after Close = %d, want 503", c)
		}
	})
}

// TestQueueCapacityHTTP measures a 4 × det 10 ms queue (400 req/s) over
// real sockets with a bounded closed-loop client: within 10%.
func TestQueueCapacityHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time measurement")
	}
	q := newTestQueue(t, queueCfg(4, DisciplineFIFO, "det:10ms"))
	srv := httptest.NewServer(q)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()

	var meta QueueMeta
	getJSON(t, client, srv.URL+"/_meta", &meta)
	if meta.Kind != "queue" || meta.Workers != 4 || math.Abs(meta.CapacityRPS-400) > 1e-9 {
		t.Fatalf("/_meta = %+v", meta)
	}

	const warmup, window = 300 * time.Millisecond, 1500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), warmup+window+time.Second)
	defer cancel()
	start := time.Now()
	from, to := start.Add(warmup), start.Add(warmup+window)
	var inWindow, failed atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for time.Now().Before(to) {
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/w", nil)
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				now := time.Now()
				if resp.StatusCode != 200 {
					failed.Add(1)
				} else if now.After(from) && !now.After(to) {
					inWindow.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d requests failed", failed.Load())
	}
	got := float64(inWindow.Load()) / window.Seconds()
	t.Logf("measured %.1f req/s (configured 400)", got)
	if math.Abs(got-400) > 40 {
		t.Errorf("measured capacity %.1f req/s, want 400 ±10%%", got)
	}
}

func getJSON(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
