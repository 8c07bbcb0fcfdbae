// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientAbort checks backends.ignore_client_abort. By default a
// client that gives up cancels the upstream request and frees its server
// slot; with the option the backend keeps the request (its context stays
// live) and the slot stays taken until the backend answers, so a second
// request waits in the queue meanwhile.
func TestClientAbort(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore_client_abort=%v", ignore), func(t *testing.T) {
			entered := make(chan struct{}, 2)
			release := make(chan struct{})
			outcome := make(chan string, 2)
			be := backend(t, func(w http.ResponseWriter, r *http.Request) {
				entered <- struct{}{}
				select {
				case <-r.Context().Done():
					outcome <- "canceled"
					return
				case <-release:
					outcome <- "released"
				}
				_, _ = io.WriteString(w, "done")
			})
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			cfg := strings.Replace(baseConfig(be.URL, ""), "    - url: "+be.URL+"\n",
				"    - url: "+be.URL+"\n      max_concurrency: 1\n", 1)
			if ignore {
				cfg = strings.Replace(cfg, "backends:\n", "backends:\n  ignore_client_abort: true\n", 1)
			}
			p := startProxy(t, cfg)

			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/first", nil)
			must(t, err)
			first := goDo(req)
			waitFor(t, entered, "the first request at the backend")
			cancel()
			if a := <-first; a.code != 0 {
				t.Fatalf("the canceled client got an answer: %d", a.code)
			}

			if !ignore {
				if got := waitFor(t, outcome, "the backend's outcome"); got != "canceled" {
					t.Fatalf("backend: %s, want its request canceled with the client", got)
				}
				eventually(t, "the slot freed", func() bool {
					return strings.Contains(p.metricsText(t), "proxy_pool_in_flight 0")
				})
				return
			}

			// The proxy learns of the client's exit within microseconds;
			// give it ample time to (wrongly) pass it on.
			time.Sleep(200 * time.Millisecond)
			select {
			case got := <-outcome:
				t.Fatalf("backend: %s before it was released; want its request kept", got)
			default:
			}
			second := goGet(p.url + "/second")
			eventually(t, "the second request queued behind the held slot", func() bool {
				m := p.metricsText(t)
				return strings.Contains(m, "proxy_queue_length 1") && strings.Contains(m, "proxy_pool_in_flight 1")
			})
			close(release)
			if got := waitFor(t, outcome, "the first request's outcome"); got != "released" {
				t.Fatalf("backend: %s, want released", got)
			}
			waitFor(t, entered, "the second request at the backend")
			if a := waitFor(t, second, "the second answer"); a.code != 200 || a.body != "done" || a.err != nil {
				t.Fatalf("second request: %d %q (%v), want 200 done", a.code, a.body, a.err)
			}
		})
	}
}

// waitFor receives one value from ch within testTimeout.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// A slow reader is the client's time, not the backend's: the stage's
// response-time sample ends when the answer has been read from the
// backend (response buffering reads it at once), and the backend's slot
// is free then. The backend answers 16 MiB at once; the client reads
// nothing until 1.5 s after the backend's handler has returned. The
// sample must be within 500 ms of the backend's own time: counted, the
// client's 1.5 s would be more (the transfer itself takes 50–250 ms here,
// over a second under -race on a loaded machine, hence the bound
// relative to the backend's end rather than a fixed one).
func TestSlowReaderIsNotTheBackendsTime(t *testing.T) {
	body := strings.Repeat("s", 16<<20)
	var finished atomic.Int64 // Unix ns when the backend's handler returned
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, body)
		finished.Store(time.Now().UnixNano())
	})
	r := startManual(t, baseConfig(be.URL, apiRateStage))
	t0 := time.Now().Add(time.Hour)
	r.stepPolicy(t0)
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := time.Now()
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the backend to finish", func() bool { return finished.Load() != 0 })
	backendTime := time.Unix(0, finished.Load()).Sub(sent)
	time.Sleep(1500 * time.Millisecond)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n != int64(len(body)) {
		t.Fatalf("read %d bytes, want %d", n, len(body))
	}
	eventually(t, "the proxy to finish the request", func() bool { return r.srv.h.active.Load() == 0 })
	if st := r.state(t); st.Backends.InFlight != 0 {
		t.Fatalf("backend slot still held: %+v", st.Backends)
	}
	r.stepPolicy(t0.Add(2 * time.Second))
	for _, st := range r.state(t).Stages {
		if st.Name != "api" {
			continue
		}
		last := st.Classes[0].Last
		if last == nil || last.Samples != 1 {
			t.Fatalf("last period %+v, want one sample", last)
		}
		if bound := float64(backendTime+500*time.Millisecond) / 1e6; last.P50MS >= bound {
			t.Errorf("response-time sample %.1f ms, the backend's own %v: the 1.5 s the client did not read were counted", last.P50MS, backendTime)
		}
		return
	}
	t.Fatal("stage api not in /state")
}
