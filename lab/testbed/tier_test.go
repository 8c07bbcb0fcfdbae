// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/auto"
	"github.com/sluicehq/sluice/lab/retry"
	"github.com/sluicehq/sluice/policy"
)

// nextHop is a scripted next hop: it answers each call with the next
// status of its script (the last one repeats), or waits for the caller to
// leave when the status is 0, and keeps the headers it saw.
type nextHop struct {
	mu      sync.Mutex
	script  []int
	headers []http.Header
	gone    chan struct{}
	srv     *httptest.Server
}

func newNextHop(t *testing.T, script ...int) *nextHop {
	n := &nextHop{script: script, gone: make(chan struct{}, 16)}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		i := len(n.headers)
		n.headers = append(n.headers, r.Header.Clone())
		st := n.script[min(i, len(n.script)-1)]
		n.mu.Unlock()
		if st == 0 {
			<-r.Context().Done()
			n.gone <- struct{}{}
			return
		}
		if st == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(st)
		io.WriteString(w, strconv.Itoa(st))
	}))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *nextHop) calls() []http.Header {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]http.Header(nil), n.headers...)
}

func newTestTier(t *testing.T, cfg TierConfig) *httptest.Server {
	t.Helper()
	tr, err := NewTier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tr)
	t.Cleanup(func() { srv.Close(); tr.Close() })
	return srv
}

func get(t *testing.T, ctx context.Context, url string, h map[string]string) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

// A naive tier retries what a retry can help, each attempt bounded by its
// per-try timeout, relays the last answer (504 when none came), and
// passes on the headers it forwards, and no deadline.
func TestTierNaive(t *testing.T) {
	for _, c := range []struct {
		name   string
		script []int
		want   int
		calls  int
	}{
		{"two 503s, then 200", []int{503, 503, 200}, 200, 3},
		{"always 503", []int{503}, 503, 3},
		{"404 is not retried", []int{404}, 404, 1},
		{"no answer", []int{0}, http.StatusGatewayTimeout, 3},
	} {
		next := newNextHop(t, c.script...)
		cfg := DefaultTierConfig()
		cfg.Next, cfg.Retry.PerTry = next.srv.URL, 30*time.Millisecond
		tier := newTestTier(t, cfg)
		st, _ := get(t, t.Context(), tier.URL+"/item", map[string]string{"X-Sluice-Class": "high", LabDeadlineHeader: "123", "X-Other": "x"})
		calls := next.calls()
		if st != c.want || len(calls) != c.calls {
			t.Errorf("%s: %d after %d calls, want %d after %d", c.name, st, len(calls), c.want, c.calls)
			continue
		}
		h := calls[0]
		if h.Get("X-Sluice-Class") != "high" || h.Get(LabDeadlineHeader) != "123" || h.Get("X-Other") != "" || h.Get(sluice.TimeoutHeader) != "" {
			t.Errorf("%s: the next hop saw %v; want X-Sluice-Class and %s passed on, nothing else", c.name, h, LabDeadlineHeader)
		}
	}
}

// A naive tier's call ends when its caller leaves: the next hop sees its
// request's context end.
func TestTierCallerGone(t *testing.T) {
	next := newNextHop(t, 0)
	cfg := DefaultTierConfig()
	cfg.Next = next.srv.URL
	tier := newTestTier(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	get(t, ctx, tier.URL+"/item", nil)
	select {
	case <-next.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the next hop's request did not end when the tier's caller left")
	}
	if n := len(next.calls()); n != 1 {
		t.Errorf("%d calls, want 1: nothing is retried for a caller that left", n)
	}
}

func chainPolicy(t *testing.T) policy.Config {
	t.Helper()
	slo := auto.DefaultConfig()
	slo.SLO = 250 * time.Millisecond
	st := policy.StageConfig{Name: "chain", Match: policy.MatchConfig{PathPrefix: "/"}, Control: &slo}
	cfg := policy.Config{Classes: policy.ClassesConfig{Order: []string{"high", "low"}, Default: "low",
		Rules:          []policy.ClassRule{{Class: "high", Header: &policy.HeaderMatch{Name: "X-Sluice-Class", Value: "high", Trust: "any"}}},
		TrustedProxies: []string{"127.0.0.1"}}, Stages: []policy.StageConfig{st}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A sluice tier admits through its policy and calls through sluice's
// client side: the deadline (what is left of it) and the priority
// travel on, a request whose deadline has passed never reaches the next
// hop, and a 503 whose Retry-After outlasts the deadline is not retried.
func TestTierSluice(t *testing.T) {
	next := newNextHop(t, 200, 503)
	cfg := DefaultTierConfig()
	cfg.Next, cfg.Mode, cfg.Policy = next.srv.URL, TierSluice, chainPolicy(t)
	tier := newTestTier(t, cfg)
	st, _ := get(t, t.Context(), tier.URL+"/item", map[string]string{"X-Sluice-Class": "high", sluice.TimeoutHeader: "500m"})
	calls := next.calls()
	if st != 200 || len(calls) != 1 {
		t.Fatalf("%d after %d calls, want 200 after 1", st, len(calls))
	}
	left, ok := sluice.ParseTimeout(calls[0].Get(sluice.TimeoutHeader))
	if !ok || left <= 0 || left > 500*time.Millisecond || calls[0].Get(sluice.PriorityHeader) != "high" {
		t.Errorf("the next hop saw timeout %q (%v, %v) and priority %q; want what is left of 500ms and high",
			calls[0].Get(sluice.TimeoutHeader), left, ok, calls[0].Get(sluice.PriorityHeader))
	}
	st, h := get(t, t.Context(), tier.URL+"/item", map[string]string{sluice.TimeoutHeader: "500m"})
	if n := len(next.calls()); st != 503 || h.Get("Retry-After") != "1" || n != 2 {
		t.Errorf("503 from the next hop: %d (Retry-After %q) after %d calls in all, want 503, 1, 2", st, h.Get("Retry-After"), n)
	}
	st, _ = get(t, t.Context(), tier.URL+"/item", map[string]string{sluice.TimeoutHeader: "0m"})
	if n := len(next.calls()); st != 503 || n != 2 {
		t.Errorf("a request out of time: %d after %d calls in all, want 503 and no new call", st, n)
	}
}

func TestTierConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*TierConfig)
		want string
	}{
		{"no next", func(c *TierConfig) { c.Next = "" }, "next"},
		{"public next", func(c *TierConfig) { c.Next = "http://192.0.2.1:80" }, "next"},
		{"mode", func(c *TierConfig) { c.Mode = "hedged" }, "mode"},
		{"retry", func(c *TierConfig) { c.Retry.MaxAttempts = 99 }, "max_attempts"},
	} {
		cfg := DefaultTierConfig()
		cfg.Next = "http://127.0.0.1:1"
		c.mod(&cfg)
		if _, err := NewTier(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	for _, m := range retry.Kinds {
		cfg := DefaultTierConfig()
		cfg.Next, cfg.Mode = "http://127.0.0.1:1", string(m)
		tr, err := NewTier(cfg)
		if err != nil {
			t.Errorf("mode %s: %v", m, err)
			continue
		}
		tr.Close()
	}
}

// The queue keeps a record of every request, its user's deadline and
// whether its caller had gone, and its capacity is changed at run time
// through POST /_scale and /_workers.
func TestQueueRecordsAndScale(t *testing.T) {
	cfg := queueCfg(1, DisciplineFIFO, "det:20ms")
	cfg.Record, cfg.Control = true, true
	q := newTestQueue(t, cfg)
	srv := httptest.NewServer(q)
	defer srv.Close()
	post := func(pathQuery string) int {
		resp, err := http.Post(srv.URL+pathQuery, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("/_scale?factor=3"); st != 200 || math3(q.Capacity()) != math3(50.0/3) {
		t.Fatalf("POST /_scale?factor=3: %d, capacity %v; want 200, 16.7", st, q.Capacity())
	}
	if st := post("/_workers?n=3"); st != 200 || math3(q.Capacity()) != math3(50.0) {
		t.Fatalf("POST /_workers?n=3: %d, capacity %v; want 200, 50", st, q.Capacity())
	}
	if st := post("/_workers?n=1"); st != 200 || math3(q.Capacity()) != math3(50.0/3) {
		t.Fatalf("POST /_workers?n=1: %d, capacity %v; want 200, 16.7", st, q.Capacity())
	}
	for _, bad := range []string{"/_scale?factor=0", "/_scale?factor=x", "/_scale", "/_workers?n=0", "/_workers?n=x", "/_workers"} {
		if st := post(bad); st != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", bad, st)
		}
	}
	for _, p := range []string{"/_scale?factor=2", "/_workers?n=2"} {
		if st, _ := get(t, t.Context(), srv.URL+p, nil); st != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d, want 405", p, st)
		}
	}
	dl := time.Now().Add(time.Minute)
	if st, _ := get(t, t.Context(), srv.URL+"/x", map[string]string{LabDeadlineHeader: strconv.FormatInt(dl.UnixNano(), 10)}); st != 200 {
		t.Fatalf("request: %d", st)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	get(t, ctx, srv.URL+"/x", nil) // gives up before its 60 ms of service end
	var recs []QueueRecord
	for range 100 {
		if recs = q.Records(); len(recs) == 2 && !recs[1].Finish.IsZero() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	r0, r1 := recs[0], recs[1]
	if r0.Demand != 0.06 || !r0.UserDeadline.Equal(time.Unix(0, dl.UnixNano())) || r0.Gone || !r0.Finish.After(r0.Arrival) {
		t.Errorf("first record %+v: want demand 0.06 (scaled), the deadline sent, not gone, finished", r0)
	}
	if !r1.Gone || !r1.UserDeadline.IsZero() {
		t.Errorf("second record %+v: want gone, no deadline", r1)
	}
	resp, err := http.Get(srv.URL + "/_records")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	back, err := ParseQueueRecords(resp.Body)
	if err != nil || len(back) != 2 || back[0].Demand != r0.Demand || !back[0].Arrival.Equal(r0.Arrival) || !back[1].Gone {
		t.Errorf("/_records read back %+v, %v; want the records", back, err)
	}
	if st := q.Stats(); st.Requests != 2 {
		t.Errorf("stats count %d requests, want 2: /_scale and /_records are not load", st.Requests)
	}
}

func math3(v float64) int { return int(v*1000 + 0.5) }

// With FreeGone, the handler of a request whose client has gone returns
// at once, answering nothing, and its work is still done and recorded.
func TestQueueFreeGone(t *testing.T) {
	cfg := queueCfg(1, DisciplineFIFO, "det:200ms")
	cfg.Record, cfg.FreeGone = true, true
	q := newTestQueue(t, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/x", nil)
	w := httptest.NewRecorder()
	done := make(chan struct{})
	start := time.Now()
	go func() { q.ServeHTTP(w, req); close(done) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(150 * time.Millisecond):
		t.Fatal("the handler did not return when its client left")
	}
	if w.Body.Len() != 0 {
		t.Errorf("answered %q to a client that left", w.Body.String())
	}
	var recs []QueueRecord
	for range 100 {
		if recs = q.Records(); len(recs) == 1 && !recs[0].Finish.IsZero() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(recs) != 1 || !recs[0].Gone || recs[0].Finish.Sub(start) < 190*time.Millisecond {
		t.Errorf("records %+v: want the work done (finished ~200ms after the start) for a client that had gone", recs)
	}
}
