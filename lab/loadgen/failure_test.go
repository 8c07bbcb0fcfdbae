// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// failureKinds runs cfg and counts its records' FailureKind.
func failureKinds(t *testing.T, cfg Config) map[string]int {
	t.Helper()
	var log recordLog
	cfg.OnRequest = log.add
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range log.all() {
		kinds[FailureKind(r.Err)]++
	}
	return kinds
}

// TestFailureKindResponse: against a server that never answers, the
// requests time out waiting for their responses.
func TestFailureKindResponse(t *testing.T) {
	srv := stallingServer(t)
	cfg := Config{Target: srv.URL, Mode: ModeOpen, Duration: 200 * time.Millisecond, Seed: 1, Timeout: 300 * time.Millisecond,
		Workload: mustURLs(t, "/x"), Arrivals: mustConstant(t, "20")}
	kinds := failureKinds(t, cfg)
	if kinds[FailResponseTimeout] < 3 || len(kinds) != 1 {
		t.Errorf("kinds %v: want response timeouts only", kinds)
	}
}

// TestFailureKindPoolWait: a request that finds every pooled connection
// busy until its deadline fails as a pool wait.
func TestFailureKindPoolWait(t *testing.T) {
	r := &runner{pools: []*connPool{newConnPool(1)}, abortCtx: context.Background()}
	r.pools[0].tokens <- struct{}{} // the one connection is busy
	_, err := r.h1Get(&user{}, 0, time.Now().Add(20*time.Millisecond))
	if k := FailureKind(err); k != FailPoolWait {
		t.Errorf("h1Get with the pool full: %v, kind %q; want %q", err, k, FailPoolWait)
	}
	if !errors.Is(err, errDeadline) {
		t.Errorf("%v does not wrap errDeadline: the run would not count it as a timeout", err)
	}
}

// TestFailureKindRefused: nobody listens on the port.
func TestFailureKindRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := Config{Target: "http://" + addr, Mode: ModeOpen, Duration: 200 * time.Millisecond, Seed: 1, Timeout: 300 * time.Millisecond,
		Workload: mustURLs(t, "/x"), Arrivals: mustConstant(t, "20")}
	kinds := failureKinds(t, cfg)
	if kinds[FailRefused] < 3 || len(kinds) != 1 {
		t.Errorf("kinds %v: want every request refused", kinds)
	}
}

// TestFailureKindOK: an answer, whatever its status, is no failure.
func TestFailureKindOK(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	cfg := Config{Target: srv.URL, Mode: ModeOpen, Duration: 200 * time.Millisecond, Seed: 1, Timeout: time.Second,
		Workload: mustURLs(t, "/x"), Arrivals: mustConstant(t, "20")}
	kinds := failureKinds(t, cfg)
	if kinds[""] < 3 || len(kinds) != 1 {
		t.Errorf("kinds %v: want only answers", kinds)
	}
}
