// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/share"
)

// sharesConfig is a proxy with four header-identified clients a–d of
// 10/20/30/40 % of B, the loopback peer trusted.
func sharesConfig(backendURL string, B, ahat float64, extra string) string {
	return baseConfig(backendURL, fmt.Sprintf(`classes:
  trusted_proxies: [127.0.0.1]
shares:
  total_bandwidth: %g
  initial_max_bandwidth: %g
  period: 500ms
  clients:
    - {name: a, share: 10, header_values: [a]}
    - {name: b, share: 20, header_values: [b]}
    - {name: c, share: 30, header_values: [c]}
    - {name: d, share: 40, header_values: [d]}
%s`, B, ahat, extra))
}

// sizedBackend answers every request with n bytes and a Content-Length.
func sizedBackend(t *testing.T, n int) (*atomic.Int64, string) {
	body := strings.Repeat("x", n)
	var hits atomic.Int64
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = io.WriteString(w, body)
	})
	return &hits, b.URL
}

// TestSharesLiveThroughProxy is Li & Jamin's sharing end to end through
// the proxy: B = 400 KB/s (far below what loopback does) shared by four
// clients a–d with 10/20/30/40 %, each a closed-loop user asking for
// 10 KB replies back to back (more than its share), identified by the
// client header from the trusted loopback peer, Â₀ = 4·B. In steady state
// each client's share of the delivered bytes must be within ±2 points of
// its allocation and the total within 10 % of B; then a and b go idle
// and c and d must take up the slack (each above its allocation, the
// total not above B). About 20 s of real time, without the race
// detector (whose pacing it slows: make test's PLAIN_ONLY), and only
// when SLUICE_LIVE_SHARES=1:
// make test measures the same live in package share
// (TestLiveLoopbackShares, on loopback) and through the proxy in the
// lab (lijamin-epochs' quick figure), and the other share tests here
// check the proxy's wiring; this one is the paper's accuracy through
// the proxy, for a change to the shares' path.
func TestSharesLiveThroughProxy(t *testing.T) {
	if testing.Short() || os.Getenv("SLUICE_LIVE_SHARES") != "1" {
		t.Skip("live test (20 s): set SLUICE_LIVE_SHARES=1")
	}
	if raceEnabled {
		t.Skip("live measure of shares: run without -race")
	}
	const B = 400e3
	_, url := sizedBackend(t, 10000)
	p := startProxy(t, sharesConfig(url, B, 4*B, ""))
	names := []string{"a", "b", "c", "d"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var received [4]atomic.Int64
	var failures atomic.Int64
	var idle [4]atomic.Bool
	for i, n := range names {
		wg.Go(func() {
			tr := &http.Transport{MaxConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: tr, Timeout: 15 * time.Second}
			for ctx.Err() == nil {
				if idle[i].Load() {
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/file", nil)
				req.Header.Set(share.DefaultClientHeader, n)
				resp, err := cl.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failures.Add(1)
					}
					continue
				}
				nb, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures.Add(1)
					continue
				}
				received[i].Add(nb)
			}
		})
	}
	window := func(warm, dur time.Duration) (x [4]float64) {
		time.Sleep(warm)
		var b0 [4]int64
		for i := range b0 {
			b0[i] = received[i].Load()
		}
		time.Sleep(dur)
		for i := range x {
			x[i] = float64(received[i].Load()-b0[i]) / dur.Seconds()
		}
		return x
	}
	all := window(3*time.Second, 6*time.Second)
	idle[0].Store(true)
	idle[1].Store(true)
	two := window(5*time.Second, 5*time.Second)
	cancel()
	wg.Wait()

	var total float64
	for _, v := range all {
		total += v
	}
	st := p.state(t)
	t.Logf("all active: a %.2f  b %.2f  c %.2f  d %.2f %% (allocations 10/20/30/40), total %.1f KB/s = %.3f B, Â = %.2f B",
		100*all[0]/total, 100*all[1]/total, 100*all[2]/total, 100*all[3]/total, total/1e3, total/B, st.Shares.MaxMeasured/B)
	for i, want := range []float64{10, 20, 30, 40} {
		if got := 100 * all[i] / total; math.Abs(got-want) > 2 {
			t.Errorf("client %s: share %.2f %%, want %g ± 2", names[i], got, want)
		}
	}
	if math.Abs(total/B-1) > 0.1 {
		t.Errorf("total %.3f B, want within 10 %% of B", total/B)
	}
	total2 := two[2] + two[3]
	t.Logf("a, b idle: c %.1f KB/s (%.2f of its allocation), d %.1f KB/s (%.2f), total %.3f B",
		two[2]/1e3, two[2]/(0.3*B), two[3]/1e3, two[3]/(0.4*B), total2/B)
	// c and d must take up the slack and the total must stay under B;
	// how close to B it comes within 5 s depends on how much CPU the
	// machine gives the proxy (0.83 B at load 11 on 2026-11-27), so its
	// lower bound is the lab's live figure's (lijamin-epochs), not a
	// unit test's.
	if two[2] < 1.15*0.3*B || two[3] < 1.15*0.4*B || total2 > 1.1*B {
		t.Errorf("slack not taken up: c %.3f B, d %.3f B (allocations 0.3 B, 0.4 B), total %.3f B", two[2]/B, two[3]/B, total2/B)
	}
	if f := failures.Load(); f > 0 {
		t.Errorf("%d requests failed or were rejected", f)
	}
	eventually(t, "standby slots released", func() bool {
		for _, c := range p.state(t).Shares.Clients {
			if c.Standby != 0 {
				return false
			}
		}
		return true
	})
}

// TestShareStandbyRejection: a client with its standby slot taken gets an
// immediate 503 with Retry-After, and the backend is not asked.
func TestShareStandbyRejection(t *testing.T) {
	url, release, hits := blockingBackend(t)
	p := startProxy(t, sharesConfig(url, 1e6, 0, "  standby_limit: 1\n"))
	first := make(chan int, 1)
	go func() {
		code, _, _ := get(t, p.url+"/slow", map[string]string{share.DefaultClientHeader: "a"})
		first <- code
	}()
	eventually(t, "the first request at the backend", func() bool { return hits.Load() == 1 })
	code, hdr, body := get(t, p.url+"/again", map[string]string{share.DefaultClientHeader: "a"})
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(body, "standby") {
		t.Errorf("second request of a: %d Retry-After %q %q; want 503 with Retry-After (standby)", code, hdr.Get("Retry-After"), body)
	}
	// Another client is not affected.
	go func() { _, _, _ = get(t, p.url+"/other", map[string]string{share.DefaultClientHeader: "b"}) }()
	eventually(t, "b's request at the backend", func() bool { return hits.Load() == 2 })
	release()
	if c := <-first; c != 200 {
		t.Errorf("first request: %d", c)
	}
	if h := hits.Load(); h != 2 {
		t.Errorf("backend saw %d requests, want 2 (the rejected one never reaches it)", h)
	}
	eventually(t, "rejection counted", func() bool {
		for _, c := range p.state(t).Shares.Clients {
			if c.Name == "a" {
				return c.Rejections["standby"] == 1
			}
		}
		return false
	})
}

// TestShareClientGoneWhileDelayed: a client that disconnects during its
// delay frees its standby slot at once; nothing is recorded as a reply.
func TestShareClientGoneWhileDelayed(t *testing.T) {
	_, url := sizedBackend(t, 10000)
	// B = 1000 B/s: a 10 KB reply of client a (b_a = 100 B/s) waits about
	// (1/200 − 1/1000)·10000 = 40 s, within max_delay 60s.
	p := startProxy(t, sharesConfig(url, 1000, 0, "  max_delay: 60s\n"))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/file", nil)
	req.Header.Set(share.DefaultClientHeader, "a")
	done := goDo(req)
	clientA := func() share.ClientSnapshot {
		for _, c := range p.state(t).Shares.Clients {
			if c.Name == "a" {
				return c
			}
		}
		t.Fatal("no client a")
		return share.ClientSnapshot{}
	}
	eventually(t, "a delayed", func() bool { c := clientA(); return c.Standby == 1 && c.LastDelay > 10 })
	start := time.Now()
	cancel()
	if a := <-done; a.code != 0 || !errors.Is(a.err, context.Canceled) {
		t.Fatalf("client: %d (%v), want no answer, canceled", a.code, a.err)
	}
	eventually(t, "slot freed", func() bool { c := clientA(); return c.Standby == 0 && c.Cancellations == 1 })
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("slot freed after %v: not at once", waited)
	}
	if c := clientA(); c.Replies != 0 {
		t.Errorf("a cancelled reply was recorded: %+v", c)
	}
	eventually(t, "no request in flight", func() bool { return p.state(t).InFlight == 0 })
}

// TestShareChunkedReplyIsPaced: a reply without Content-Length is paced
// while it streams, and recorded with every byte.
func TestShareChunkedReplyIsPaced(t *testing.T) {
	const piece, pieces = 2000, 5
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		for range pieces {
			_, _ = io.WriteString(w, strings.Repeat("y", piece))
			http.NewResponseController(w).Flush()
		}
	})
	// B = 100 KB/s, client d: b_d = 40 KB/s, d_d = 2·b_d = 80 KB/s at
	// first (unsatisfied), Â = B: each 2000-byte piece waits
	// (1/80000 − 1/100000)·2000 = 5 ms, 25 ms in all at least.
	p := startProxy(t, sharesConfig(b.URL, 100e3, 0, ""))
	start := time.Now()
	code, hdr, body := get(t, p.url+"/stream", map[string]string{share.DefaultClientHeader: "d"})
	took := time.Since(start)
	if code != 200 || len(body) != piece*pieces || hdr.Get("Content-Length") != "" {
		t.Fatalf("got %d, %d bytes, Content-Length %q", code, len(body), hdr.Get("Content-Length"))
	}
	if took < 20*time.Millisecond {
		t.Errorf("reply took %v: not paced", took)
	}
	eventually(t, "reply recorded", func() bool {
		for _, c := range p.state(t).Shares.Clients {
			if c.Name == "d" {
				return c.Replies == 1 && c.Bytes == piece*pieces && c.Standby == 0
			}
		}
		return false
	})
}

// TestShareMetricsStateAndReload: per-client metrics with bounded labels,
// /state, and a reload that changes the shares restarts the manager.
func TestShareMetricsStateAndReload(t *testing.T) {
	_, url := sizedBackend(t, 100)
	cfg := sharesConfig(url, 1e6, 0, "")
	p := startProxy(t, cfg)
	for _, n := range []string{"a", "b"} {
		if code, _, _ := get(t, p.url+"/", map[string]string{share.DefaultClientHeader: n}); code != 200 {
			t.Fatalf("%s: %d", n, code)
		}
	}
	// An unknown client is others (whose share is 0 here: served only
	// from what a–d leave, or rejected).
	get(t, p.url+"/", map[string]string{share.DefaultClientHeader: "zz-unknown"})
	m := p.metricsText(t)
	for _, want := range []string{`sluice_share_measured_bytes_per_second{client="a"}`, `sluice_share_measured_bytes_per_second{client="others"}`,
		`sluice_share_replies_total{client="a"} 1`, `sluice_share_rejections_total{client="a",reason="standby"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(m, "sluice_share"))
		}
	}
	if strings.Contains(m, "zz-unknown") {
		t.Error("an unknown client became a metric label")
	}
	eventually(t, "the manager ticking", func() bool { return p.state(t).Shares.Ticks >= 1 })
	// Reload with another B: a new Shares whose manager runs too.
	must(t, os.WriteFile(p.file, []byte(strings.Replace(cfg, "total_bandwidth: 1e+06", "total_bandwidth: 2MB", 1)), 0o644))
	if code, body := do(t, "POST", p.admin+"/reload", ""); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	st := p.state(t)
	if st.Shares.TotalBandwidth != 2e6 || st.Shares.Ticks != 0 {
		t.Fatalf("after reload: B %v, ticks %d; want a new Shares with B 2e6", st.Shares.TotalBandwidth, st.Shares.Ticks)
	}
	eventually(t, "the new manager ticking", func() bool { return p.state(t).Shares.Ticks >= 1 })
}

func TestShareConfigErrors(t *testing.T) {
	parseFails(t, []badConfig{
		{"shares:\n  clients: [{name: a, share: 10}]\n", "p.yaml:8: shares.total_bandwidth"},
		{"shares:\n  total_bandwidth: 10kb\n", "p.yaml:9: shares.total_bandwidth"},
		{"shares:\n  total_bandwidth: 1MB\n  clients: [{name: a, share: 120}]\n", "shares.clients[0].share"},
		{"shares:\n  total_bandwidth: 1MB\n  reply_buffer: 100\n", "p.yaml:10: shares.reply_buffer"},
		{"shares:\n  total_bandwidth: 1MB\n  alpha: 0.9\n", "p.yaml:10: shares.alpha"},
		{"shares:\n  total_bandwidth: 1MB\n  nope: 1\n", "p.yaml:10: shares.nope: unknown field"},
	})
}

// TestShareRejectionShapedAsGRPC: a gRPC call refused by its client's
// share gets a gRPC status (RESOURCE_EXHAUSTED with the delay as its
// pushback), as a stage's refusal does, not an HTTP 503 its client
// would read as UNAVAILABLE; an HTTP request keeps its 503.
func TestShareRejectionShapedAsGRPC(t *testing.T) {
	err := &share.RejectError{Client: "a", Reason: share.RejectStandby, RetryAfter: 1500 * time.Millisecond}
	call := httptest.NewRequest(http.MethodPost, "/grpc.testing.TestService/EmptyCall", nil)
	call.ProtoMajor, call.ProtoMinor = 2, 0
	call.Header.Set("Content-Type", "application/grpc")
	rec := httptest.NewRecorder()
	shareRejected(rec, call, err)
	res := rec.Result()
	if res.StatusCode != http.StatusOK || res.Header.Get("Grpc-Status") != "8" ||
		res.Header.Get("Grpc-Retry-Pushback-Ms") != "1500" {
		t.Errorf("gRPC call: HTTP %d, grpc-status %q, pushback %q; want 200, 8 (RESOURCE_EXHAUSTED), 1500",
			res.StatusCode, res.Header.Get("Grpc-Status"), res.Header.Get("Grpc-Retry-Pushback-Ms"))
	}
	rec = httptest.NewRecorder()
	shareRejected(rec, httptest.NewRequest(http.MethodGet, "/", nil), err)
	if res := rec.Result(); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "2" {
		t.Errorf("HTTP request: %d Retry-After %q; want 503, 2", res.StatusCode, res.Header.Get("Retry-After"))
	}
}
