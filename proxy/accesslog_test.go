// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/internal/proxytest"
)

// readLines returns the lines of file.
func readLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// waitLines waits until file has n lines.
func waitLines(t *testing.T, file string, n int) []string {
	t.Helper()
	var lines []string
	eventually(t, strconv.Itoa(n)+" access-log lines", func() bool {
		lines = readLines(t, file)
		return len(lines) >= n
	})
	return lines
}

// The JSON access log: one object per request with the decision, its
// reason, the stage, class and tenant, the queue wait, the upstream time,
// status, bytes and duration; the request id is the client's when it
// sent a valid one, else sluice's own, and both the backend and the
// client get it (once, though the backend echoes it).
func TestAccessLogJSON(t *testing.T) {
	const work = 20 * time.Millisecond
	var gotIDs sync.Map
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		gotIDs.Store(r.URL.Path, r.Header.Values("X-Request-Id"))
		w.Header().Set("X-Request-Id", r.Header.Get("X-Request-Id")) // an echo, as many services do
		time.Sleep(work)
		_, _ = io.WriteString(w, "hello")
	})
	file := filepath.Join(t.TempDir(), "access.log")
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: api
    match: {path_prefix: /api/}
    controller: static-rate
    params: {rate: 0.001}
    burst: 2
access_log:
  path: `+file+`
`))
	type answer struct {
		code int
		ids  []string
	}
	do := func(path string, hdr map[string]string) answer {
		code, h, _ := get(t, p.url+path, hdr)
		return answer{code, h.Values("X-Request-Id")}
	}
	kept := do("/api/kept", map[string]string{"X-Request-Id": "client-id-7", "X-Sluice-Tenant": "acme", "Referer": "http://ref.example/"})
	made := do("/api/made", map[string]string{"X-Request-Id": "bad id with spaces"})
	refused := do("/api/refused", nil)
	if kept.code != 200 || made.code != 200 || refused.code != 503 {
		t.Fatalf("statuses %d %d %d, want 200 200 503", kept.code, made.code, refused.code)
	}
	if len(kept.ids) != 1 || kept.ids[0] != "client-id-7" {
		t.Errorf("client got request ids %q, want its own once", kept.ids)
	}
	if len(made.ids) != 1 || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(made.ids[0]) {
		t.Errorf("client got request ids %q, want one of sluice's (32 hex digits) for an invalid one", made.ids)
	}
	if len(refused.ids) != 1 || refused.ids[0] == made.ids[0] {
		t.Errorf("the refused request got ids %q", refused.ids)
	}
	for path, want := range map[string]string{"/api/kept": "client-id-7", "/api/made": made.ids[0]} {
		if v, _ := gotIDs.Load(path); len(v.([]string)) != 1 || v.([]string)[0] != want {
			t.Errorf("backend got X-Request-Id %q for %s, want %q", v, path, want)
		}
	}
	byURI := map[string]map[string]any{}
	for _, line := range waitLines(t, file, 3) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		byURI[rec["uri"].(string)] = rec
	}
	k, m, r := byURI["/api/kept"], byURI["/api/made"], byURI["/api/refused"]
	if k == nil || m == nil || r == nil {
		t.Fatalf("lines %v", byURI)
	}
	for _, c := range []struct {
		rec  map[string]any
		want map[string]any
	}{
		{k, map[string]any{"request_id": "client-id-7", "status": 200.0, "bytes": 5.0, "decision": "admit", "reason": "", "stage": "api",
			"class": "default", "tenant": "", "method": "GET", "proto": "HTTP/1.1", "client": "127.0.0.1", "backend": be.URL,
			"referer": "http://ref.example/", "user_agent": "Go-http-client/1.1"}},
		{m, map[string]any{"request_id": made.ids[0], "status": 200.0, "decision": "admit"}},
		{r, map[string]any{"request_id": refused.ids[0], "status": 503.0, "decision": "reject", "reason": "shed", "stage": "api",
			"upstream_s": 0.0, "backend": ""}},
	} {
		for key, want := range c.want {
			if c.rec[key] != want {
				t.Errorf("%s: %s = %v, want %v", c.rec["uri"], key, c.rec[key], want)
			}
		}
	}
	for _, rec := range []map[string]any{k, m} {
		up, dur, wait := rec["upstream_s"].(float64), rec["duration_s"].(float64), rec["queue_wait_s"].(float64)
		if up < work.Seconds() || dur < up || wait < 0 || wait > up {
			t.Errorf("%s: upstream %vs, duration %vs, queue wait %vs", rec["uri"], up, dur, wait)
		}
		if _, err := time.Parse(time.RFC3339Nano, rec["time"].(string)); err != nil {
			t.Errorf("time %q: %v", rec["time"], err)
		}
	}
}

// combinedRE is nginx's combined format:
// $remote_addr - $remote_user [$time_local] "$request" $status
// $body_bytes_sent "$http_referer" "$http_user_agent", then anything.
var combinedRE = regexp.MustCompile(`^(\S+) - (\S+) \[(\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] "((?:[^"\\]|\\.)*)" (\d{3}) (\d+) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"(.*)$`)

// The combined format parses as nginx's combined, escapes what it must
// as nginx does, and appends sluice's fields as key=value.
func TestAccessLogCombined(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello!") })
	file := filepath.Join(t.TempDir(), "access.log")
	p := startProxy(t, baseConfig(be.URL, "access_log: {format: combined, path: "+file+"}\n"))
	if code, _, _ := get(t, p.url+"/a?b=1", map[string]string{"User-Agent": `agent "quoted" \ é`, "X-Request-Id": "r-1"}); code != 200 {
		t.Fatalf("request: %d", code)
	}
	line := waitLines(t, file, 1)[0]
	m := combinedRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("not nginx's combined format: %q", line)
	}
	if ts, err := time.Parse("02/Jan/2006:15:04:05 -0700", m[3]); err != nil || time.Since(ts) > time.Minute {
		t.Errorf("time_local %q: %v", m[3], err)
	}
	for i, want := range map[int]string{1: "127.0.0.1", 2: "-", 4: "GET /a?b=1 HTTP/1.1", 5: "200", 6: "6", 7: "-",
		8: `agent \x22quoted\x22 \x5C \xC3\xA9`} {
		if m[i] != want {
			t.Errorf("field %d = %q, want %q (line %q)", i, m[i], want, line)
		}
	}
	extra := map[string]string{}
	for _, kv := range strings.Fields(m[9]) {
		k, v, _ := strings.Cut(kv, "=")
		extra[k] = v
	}
	for k, want := range map[string]string{"request_id": "r-1", "decision": "admit", "reason": "-", "stage": "default",
		"class": "default", "tenant": `"-"`} {
		if extra[k] != want {
			t.Errorf("%s=%q, want %q (line %q)", k, extra[k], want, line)
		}
	}
	for _, k := range []string{"queue_wait_s", "upstream_s", "duration_s"} {
		if v, err := strconv.ParseFloat(extra[k], 64); err != nil || v < 0 {
			t.Errorf("%s=%q", k, extra[k])
		}
	}
}

// A 10x crowd of rejections cannot fill a disk: 100,000 refused requests
// in a few seconds write at most rejected_per_second lines a second (per
// reason) and count every other in sluice_access_log_dropped_total; lines
// written and requests dropped add up to the requests exactly.
func TestAccessLogCrowdOfRejections(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	file := filepath.Join(t.TempDir(), "access.log")
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: api
    match: {path_prefix: /}
    controller: static-rate
    params: {rate: 0.001}
    burst: 1
access_log: {path: `+file+`, rejected_per_second: 10}
`))
	const requests, workers = 100_000, 4
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			for range requests / workers {
				p.srv.h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	a := p.srv.h.alog
	accounted := func() uint64 {
		n := a.written.Load()
		for d := range numDropReasons {
			n += a.counts[d].Load()
		}
		return n
	}
	eventually(t, "every request written or dropped", func() bool { return accounted() == requests })
	lines := readLines(t, file)
	written := uint64(len(lines))
	// One admitted request (the bucket's token), and per second at most
	// 10 refusals (shed) plus the bucket's burst of 10.
	bound := uint64(1 + 10*(math.Ceil(elapsed.Seconds())+1))
	t.Logf("%d requests in %v: %d lines, %d dropped (rejections_limited)", requests, elapsed, written, a.counts[dropRejectionsLimited].Load())
	if written > bound || written < 11 {
		t.Errorf("%d lines in %v, want 11 to %d", written, elapsed, bound)
	}
	if got := testutil.ToFloat64(a.lines); uint64(got) != written {
		t.Errorf("sluice_access_log_lines_total %v, file has %d lines", got, written)
	}
	dropped := uint64(testutil.ToFloat64(a.vec.WithLabelValues("rejections_limited")))
	if written+dropped != requests {
		t.Errorf("%d lines + %d dropped = %d, want %d requests", written, dropped, written+dropped, requests)
	}
	admitted := 0
	for _, l := range lines {
		switch {
		case strings.Contains(l, `"decision":"admit"`):
			admitted++
		case !strings.Contains(l, `"decision":"reject","reason":"shed"`):
			t.Fatalf("line %q: want a rejection", l)
		}
	}
	if admitted != 1 {
		t.Errorf("%d admitted requests logged, want 1", admitted)
	}
}

// A writer that falls behind drops what its queue cannot hold, counted
// (queue_full); the queued lines are all written.
func TestAccessLogQueueFull(t *testing.T) {
	a := newAccessLog(slog.New(slog.DiscardHandler))
	var out bytes.Buffer
	a.use(nopCloser{&out})
	cfg := &AccessLogConfig{Path: "stdout"}
	cfg.setDefaults()
	zero := 0
	cfg.MaxPerSecond = &zero
	s := newAccessLogSettings(cfg)
	g := &generation{access: s}
	pol, err := policy.New(policy.Config{}, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g.pol = pol
	const n = AccessLogQueue + 500
	now := time.Now()
	for range n {
		ob := &observation{g: g, r: httptest.NewRequest("GET", "/", nil), arrival: now, status: 200}
		a.record(now, s, ob)
	}
	if got := a.counts[dropQueueFull].Load(); got != 500 {
		t.Fatalf("queue_full %d, want 500", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a.run(ctx) // writes what is queued, then returns
	if lines := strings.Count(out.String(), "\n"); lines != AccessLogQueue || a.written.Load() != AccessLogQueue {
		t.Errorf("%d lines written (counted %d), want %d", lines, a.written.Load(), AccessLogQueue)
	}
}

// The sampler keeps an exact fraction of the admitted requests; the caps
// refill at their rate, per reason for refusals.
func TestAccessLogAllow(t *testing.T) {
	cfg := &AccessLogConfig{}
	cfg.setDefaults()
	quarter, perSec, rejPerSec := 0.25, 100, 3
	cfg.Sample, cfg.MaxPerSecond, cfg.RejectedPerSecond = &quarter, &perSec, &rejPerSec
	s := newAccessLogSettings(cfg)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	count := func(now time.Time, n int, why refusal) (kept int, drops map[dropReason]int) {
		drops = map[dropReason]int{}
		for range n {
			if d, ok := s.allow(now, why); ok {
				kept++
			} else {
				drops[d]++
			}
		}
		return kept, drops
	}
	if kept, drops := count(t0, 400, notRefused); kept != 100 || drops[dropSampled] != 300 {
		t.Errorf("sample 0.25 of 400: kept %d, dropped %v", kept, drops)
	}
	if kept, drops := count(t0, 800, notRefused); kept != 0 || drops[dropRateLimited] != 200 || drops[dropSampled] != 600 {
		t.Errorf("past the cap of 100/s: kept %d, dropped %v", kept, drops)
	}
	if kept, _ := count(t0.Add(time.Second), 400, notRefused); kept != 100 {
		t.Errorf("a second later: kept %d, want 100", kept)
	}
	for _, why := range []refusal{refusedShed, refusedPoolQueueFull} {
		if kept, drops := count(t0, 50, why); kept != 3 || drops[dropRejectionsLimited] != 47 {
			t.Errorf("%s: kept %d of 50, dropped %v; want 3 (its own cap)", why, kept, drops)
		}
	}
}

// Every interval with drops, the proxy's log says how many and why; an
// interval without drops says nothing.
func TestAccessLogSummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &proxytest.LogRecorder{}
		a := newAccessLog(slog.New(rec))
		a.use(nopCloser{io.Discard})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.run(ctx); close(done) }()
		a.drop(dropRejectionsLimited)
		a.drop(dropRejectionsLimited)
		a.drop(dropQueueFull)
		time.Sleep(AccessLogSummaryInterval + time.Second)
		synctest.Wait()
		time.Sleep(AccessLogSummaryInterval)
		synctest.Wait()
		cancel()
		<-done
		msgs := rec.Messages()
		if len(msgs) != 1 || !strings.Contains(msgs[0], "rejections_limited=2") || !strings.Contains(msgs[0], "queue_full=1") {
			t.Errorf("summaries %q, want one with rejections_limited=2 and queue_full=1", msgs)
		}
	})
}

// A reload reopens the file: after logrotate moves it away, the lines go
// to a new file at the configured path.
func TestAccessLogReopenOnReload(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {})
	file := filepath.Join(t.TempDir(), "access.log")
	p := startProxy(t, baseConfig(be.URL, "access_log: {path: "+file+"}\n"))
	get(t, p.url+"/before", nil)
	waitLines(t, file, 1)
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	if err := p.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	get(t, p.url+"/after", nil)
	if lines := waitLines(t, file, 1); len(lines) != 1 || !strings.Contains(lines[0], `"uri":"/after"`) {
		t.Errorf("new file: %q", lines)
	}
	if old := readLines(t, file+".1"); len(old) != 1 || !strings.Contains(old[0], `"uri":"/before"`) {
		t.Errorf("moved file: %q", old)
	}
}

// Bad access_log settings fail with file:line and the field; a file that
// cannot be opened fails at start naming access_log.path.
func TestAccessLogConfigErrors(t *testing.T) {
	parseFails(t, []badConfig{
		{"access_log: {format: xml}\n", "p.yaml:8: access_log.format: \"xml\" is invalid"},
		{"access_log:\n  sample: 0\n", "p.yaml:9: access_log.sample: 0 is invalid"},
		{"access_log:\n  max_per_second: -1\n", "p.yaml:9: access_log.max_per_second: -1 is invalid"},
		{"access_log:\n  rejected_per_second: -5\n", "p.yaml:9: access_log.rejected_per_second: -5 is invalid"},
		{"access_log:\n  request_id_header: \"a b\"\n", "p.yaml:9: access_log.request_id_header: \"a b\" is not a header name"},
		{"access_log:\n  paths: stdout\n", "p.yaml:9: access_log.paths: unknown field"},
	})
	head := baseConfig("http://127.0.0.1:1", "")
	cfg, err := Parse("p.yaml", []byte(head+"access_log: {path: "+filepath.Join(t.TempDir(), "no", "such", "dir.log")+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, Options{Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), "access_log.path: open") {
		t.Errorf("unopenable file: %v", err)
	}
}

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{"abc-123": true, "0f": true, strings.Repeat("a", requestIDMax): true,
		"": false, "a b": false, `a"b`: false, `a\b`: false, "é": false, "a\x00": false, strings.Repeat("a", requestIDMax+1): false} {
		if got := validRequestID(id); got != want {
			t.Errorf("validRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}

// An upgrade passes through the access log's writer (it hijacks the
// connection underneath) and is logged with its 101 once it ends.
func TestAccessLogUpgrade(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		line, _ := brw.ReadString('\n')
		_, _ = io.WriteString(conn, line)
	})
	file := filepath.Join(t.TempDir(), "access.log")
	p := startProxy(t, baseConfig(be.URL, "access_log: {path: "+file+"}\n"))
	c, br := rawConn(t, p.addr)
	_, err := io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	must(t, err)
	resp, err := http.ReadResponse(br, nil)
	must(t, err)
	if resp.StatusCode != 101 || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("status %d, request id %q: want 101 with one", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	_, err = io.WriteString(c, "ping\n")
	must(t, err)
	if echo, err := br.ReadString('\n'); err != nil || echo != "ping\n" {
		t.Fatalf("echo %q: %v", echo, err)
	}
	c.Close()
	line := waitLines(t, file, 1)[0]
	if !strings.Contains(line, `"status":101`) || !strings.Contains(line, `"decision":"admit"`) {
		t.Errorf("line %q: want the 101, admitted", line)
	}
}
