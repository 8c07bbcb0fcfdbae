// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestShortSoak is the soak's short form: a backend of 100 req/s behind
// sluice with seda, offered 3× that for a few seconds. Every request gets
// an answer — served, or an explicit 503 — and afterwards nothing is in
// flight and the goroutines are back to where they were.
func TestShortSoak(t *testing.T) {
	be, err := NewCapacityBackend(2, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	s := startSluice(t, strings.ReplaceAll(`listeners: [{addr: 127.0.0.1:0}]
admin: {addr: 127.0.0.1:0}
backends:
  servers: [{url: BACKEND, max_concurrency: 8}]
  queue: {max: 64, timeout: 500ms}
stages:
  - name: all
    match: {path_prefix: /}
    controller: seda
    params: {target: 200ms, rate_max: 1000000, initial_rate: 1000000}
`, "BACKEND", be.URL))
	tr := &http.Transport{MaxIdleConnsPerHost: 512}
	c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	if code, _, err := fetch(t, c, "http://"+s.addr+"/"); err != nil || code != 200 {
		t.Fatalf("warm-up: %d %v", code, err)
	}
	tr.CloseIdleConnections()
	s.idle(t)
	before := runtime.NumGoroutine()
	ss := OpenLoop(context.Background(), c, "http://"+s.addr+"/", 300, 4*time.Second)
	sum := Summarize(ss)
	t.Logf("%d requests: %d served (p99 %.0f ms), %d rejected, %d failed", sum.Requests, sum.Served, sum.P99ms, sum.Rejected, sum.Failed)
	if sum.Failed > 0 {
		t.Errorf("%d requests failed without an explicit 503: %v", sum.Failed, sum.Errors)
	}
	if sum.Served == 0 {
		t.Error("nothing served")
	}
	s.idle(t)
	tr.CloseIdleConnections()
	deadline := time.Now().Add(testTimeout)
	// Up to 7 more idle upstream connections (3 goroutines each) may stay
	// for backends.idle_conn_timeout.
	for runtime.NumGoroutine() > before+3*7 {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %d, %d before the load", runtime.NumGoroutine(), before)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
