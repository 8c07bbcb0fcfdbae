// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/stage"
)

func TestClassifyAndClientIP(t *testing.T) {
	p := build(t, validBase, Options{})
	for _, tc := range []struct {
		name, target, remote string
		hdr                  []string
		stage, class         string
	}{
		{"trusted header", "/api/x", "10.0.0.1:1", []string{"X-Priority", "gold"}, "api", "gold"},
		{"spoofed header", "/api/x", "198.51.100.7:1", []string{"X-Priority", "gold"}, "api", "bronze"},
		{"no stage", "/other", "10.0.0.1:1", nil, ImplicitStage, "bronze"},
	} {
		r := request("GET", tc.target, tc.remote, tc.hdr...)
		st, class := p.Classify(r)
		if st.Name() != tc.stage || p.ClassNames()[class] != tc.class {
			t.Errorf("%s: %s/%s, want %s/%s", tc.name, st.Name(), p.ClassNames()[class], tc.stage, tc.class)
		}
	}
	r := request("GET", "/", "10.0.0.1:1", "X-Forwarded-For", "203.0.113.5, 10.9.9.9")
	if got := p.ClientIP(r).String(); got != "203.0.113.5" || !p.PeerTrusted(r) {
		t.Fatalf("client %s", got)
	}
}

// ReadsRequest says the client's connection is read whenever a class
// rule or a stage's tenant key (client, client-cert) reads it, so that
// grpcsluice fills in the peer's address and certificate for them.
func TestReadsRequestConnection(t *testing.T) {
	for _, c := range []struct {
		src  string
		want bool
	}{
		{"stages: [{name: a, match: {path_prefix: /}}]", false},
		{"stages: [{name: a, match: {path_prefix: /}, tenants: {fair: true, key: path}}]", false},
		{"stages: [{name: a, match: {path_prefix: /}, tenants: {fair: true, key: client}}]", true},
		{"stages: [{name: a, match: {path_prefix: /}, tenants: {fair: true, key: client-cert}}]", true},
		{"classes: {order: [gold, default], rules: [{class: gold, client_cert: {}}]}", true},
	} {
		if _, conn, _ := build(t, c.src, Options{}).ReadsRequest(); conn != c.want {
			t.Errorf("%s: ReadsRequest connection %v, want %v", c.src, conn, c.want)
		}
	}
}

// A stage whose controller cut its rate keeps it across a reload that
// does not change it; a changed stage starts over.
func TestReloadReusesUnchangedStages(t *testing.T) {
	const cfg = `
stages:
  - name: api
    match: {path_prefix: /api/}
    controller: seda
    params: {target: 100ms, nreq: 5, initial_rate: 100}
  - name: img
    match: {path_prefix: /img/}
    controller: static-rate
    params: {rate: 50}
`
	p1 := build(t, cfg, Options{Now: t0})
	api := p1.Stage("api")
	for i := 0; i < 5; i++ {
		tk, err := api.Enter(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		tk.Finish(tk.Arrival().Add(time.Second), stage.Outcome{OK: true}) // 10× the target
	}
	p1.Step(time.Now())
	cut := api.State(0).Setting
	if cut >= 100 {
		t.Fatalf("rate not cut: %v", cut)
	}
	decisions := p1.Decisions(api)
	if decisions == 0 {
		t.Fatal("no decision counted")
	}

	p2 := build(t, strings.Replace(cfg, "rate: 50", "rate: 60", 1), Options{Previous: p1})
	if p2.Stage("api") != api || p2.Stage("api").State(0).Setting != cut || p2.Decisions(api) != decisions {
		t.Fatal("unchanged stage not reused with its state")
	}
	if p2.Stage("img") == p1.Stage("img") || p2.Stage("img").State(0).Setting != 60 {
		t.Fatal("changed stage reused")
	}
	if p2.Stage(ImplicitStage) != p1.Stage(ImplicitStage) {
		t.Fatal("implicit stage not reused")
	}
	// A parameter change, a class change or shadow mode rebuild the stage.
	for _, changed := range []string{
		strings.Replace(cfg, "nreq: 5", "nreq: 6", 1),
		"classes: {order: [a, b]}\n" + cfg,
		"shadow: true\n" + cfg,
	} {
		if p3 := build(t, changed, Options{Previous: p2}); p3.Stage("api") == api {
			t.Fatalf("stage reused after change:\n%s", changed)
		}
	}
}

// Stream releases the concurrency slot at once; Done afterwards releases
// nothing more, records a completion and no sample.
func TestAdmissionStreamReleasesSlot(t *testing.T) {
	p := build(t, `
stages:
  - name: ws
    controller: static-concurrency
    params: {limit: 1}
    queue: {max: 1, timeout: 1ms}
`, Options{Now: t0})
	st := p.Stage("ws")
	inFlight := func() int { return st.State(0).InFlightLimited.InFlight }
	r := request("GET", "/", "192.0.2.1:1")
	a1, err := p.Admit(r)
	if err != nil || inFlight() != 1 {
		t.Fatalf("admit: %v, in flight %d", err, inFlight())
	}
	if _, err := p.Admit(r); !errors.Is(err, sluice.ErrRejected) || !Is(err) {
		t.Fatalf("second request while the slot is held: %v", err)
	}
	a1.Stream()
	a1.Stream()
	if inFlight() != 0 {
		t.Fatalf("in flight after Stream: %d", inFlight())
	}
	a2, err := p.Admit(r)
	if err != nil {
		t.Fatalf("slot not free after Stream: %v", err)
	}
	a1.Done(sluice.Success)
	if inFlight() != 1 {
		t.Fatalf("Done after Stream released a slot: in flight %d", inFlight())
	}
	a2.Done(sluice.Failure)
	if inFlight() != 0 {
		t.Fatalf("in flight %d", inFlight())
	}
	p.Step(time.Now().Add(2 * time.Second))
	tot := st.Totals(0)
	if tot.Completed != 2 || tot.Errors != 1 || tot.Admitted != 2 || tot.Rejected != 1 || tot.Last.Samples != 0 {
		t.Fatalf("totals %+v last %+v", tot, tot.Last)
	}
}

// A client that gives up while queued gets its context's error, not a
// rejection.
func TestAdmitContextError(t *testing.T) {
	p := build(t, `
stages: [{name: q, controller: static-concurrency, params: {limit: 1}, queue: {max: 4, timeout: 1h}}]`, Options{})
	a, err := p.Admit(request("GET", "/", "192.0.2.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := request("GET", "/", "192.0.2.1:1").WithContext(ctx)
	if _, err := p.Admit(r); !errors.Is(err, context.Canceled) || Is(err) {
		t.Fatalf("got %v", err)
	}
	a.Done(sluice.Success)
}

func TestReject(t *testing.T) {
	p := build(t, validBase, Options{})
	for _, tc := range []struct {
		name, method, accept, ctype string
		json, body                  bool
	}{
		{"text", "GET", "", "text/plain; charset=utf-8", false, true},
		{"browser", "GET", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "text/plain; charset=utf-8", false, true},
		{"json", "GET", "application/json", "application/json", true, true},
		{"axios", "POST", "application/json, text/plain, */*", "application/json", true, true},
		{"head", "HEAD", "", "text/plain; charset=utf-8", false, false},
	} {
		w := httptest.NewRecorder()
		r := request(tc.method, "/api/items", "198.51.100.1:1", "X-Priority", "gold")
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		p.Reject(w, r, sluice.ErrRejected)
		if w.Code != 503 || w.Header().Get("Retry-After") != "1" || w.Header().Get("Content-Type") != tc.ctype {
			t.Fatalf("%s: %d %v", tc.name, w.Code, w.Header())
		}
		if !tc.body {
			if w.Body.Len() != 0 {
				t.Fatalf("%s: body %q", tc.name, w.Body)
			}
			continue
		}
		if w.Header().Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
			t.Fatalf("%s: Content-Length %s for %d bytes", tc.name, w.Header().Get("Content-Length"), w.Body.Len())
		}
		if tc.json {
			var got struct {
				Error, Stage, Class string
				RetryAfter          int `json:"retry_after_s"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Error != "overloaded" || got.Stage != "api" || got.Class != "bronze" || got.RetryAfter != 1 {
				t.Fatalf("%s: %+v", tc.name, got)
			}
		} else if want := "503 overloaded: stage api is shedding load; retry after 1 s"; trimLines(w.Body.Bytes()) != want {
			t.Fatalf("%s: body %q", tc.name, w.Body)
		}
	}
}

func TestRejectTemplateStatusAndJitter(t *testing.T) {
	const cfg = `
reject:
  status: 429
  retry_after: 1500ms
  retry_jitter: 3s
  content_type: text/html
  body: "<p>{{.Stage}}/{{.Class}} busy, retry in {{.RetryAfter}}s</p>"
`
	draws := func(seed uint64) []string {
		p := build(t, cfg, Options{Rand: rand.New(rand.NewPCG(seed, 1))})
		var out []string
		for i := 0; i < 50; i++ {
			w := httptest.NewRecorder()
			p.Reject(w, request("GET", "/", "192.0.2.1:1"), sluice.ErrRejected)
			ra := w.Header().Get("Retry-After")
			if w.Code != 429 || w.Header().Get("Content-Type") != "text/html" ||
				w.Body.String() != "<p>default/default busy, retry in "+ra+"s</p>" {
				t.Fatalf("%d %v %q", w.Code, w.Header(), w.Body)
			}
			out = append(out, ra)
		}
		return out
	}
	a, b := draws(7), draws(7)
	seen := map[string]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different Retry-After sequence")
		}
		n, _ := strconv.Atoi(a[i])
		if n < 2 || n > 5 { // ⌈1.5 s + [0, 3] s⌉
			t.Fatalf("Retry-After %d outside [2, 5]", n)
		}
		seen[a[i]] = true
	}
	if len(seen) < 3 {
		t.Fatalf("jitter produced only %v", seen)
	}
}

func TestPrefersJSON(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		text   string
		want   bool
	}{
		{nil, "text/plain", false},
		{[]string{"*/*"}, "text/plain", false},
		{[]string{"application/json"}, "text/plain", true},
		{[]string{"application/*"}, "text/plain", true},
		{[]string{"application/json;q=0"}, "text/plain", false},
		{[]string{"text/plain;q=0.5, application/json;q=0.6"}, "text/plain", true},
		{[]string{"text/plain, application/json;q=0.9"}, "text/plain", false},
		{[]string{"text/html", "application/json"}, "text/html", false},
		{[]string{"application/json, */*;q=0.1"}, "text/html", true},
		{[]string{"text/*, application/json"}, "text/html", true},
		{[]string{"text/plain, application/json"}, "text/plain", false},
		{[]string{"Application/JSON; Q=1"}, "text/plain", true},
		{[]string{",,;,application/json;q=x"}, "text/plain", true},
	} {
		if got := prefersJSON(tc.accept, tc.text); got != tc.want {
			t.Errorf("%q vs %s: %v", tc.accept, tc.text, got)
		}
	}
}

func TestCollector(t *testing.T) {
	p := build(t, `
classes: {order: [gold, bronze]}
stages:
  - name: api
    controller: static-rate
    params: {rate: 1}
    burst: 1
`, Options{Now: t0})
	r := request("GET", "/", "192.0.2.1:1")
	a, err := p.Admit(r)
	if err != nil {
		t.Fatal(err)
	}
	a.Done(sluice.Success)
	if _, err := p.Admit(r); !Is(err) {
		t.Fatalf("burst 1 at 1/s admitted twice: %v", err)
	}
	p.Step(time.Now().Add(time.Second))
	const want = `
# HELP sluice_requests_total Requests per stage, class and outcome: offered, admitted, rejected, shadow_rejected (would have been rejected; shadow mode admitted them), completed, error; deadline: the part of rejected refused because the request's deadline passed or would pass before service; fair_evicted: the part of rejected evicted from the queue under fair queueing among tenants for a tenant behind them in virtual time (both counted at once, the others at each control period).
# TYPE sluice_requests_total counter
sluice_requests_total{class="bronze",outcome="admitted",stage="api"} 1
sluice_requests_total{class="bronze",outcome="completed",stage="api"} 1
sluice_requests_total{class="bronze",outcome="deadline",stage="api"} 0
sluice_requests_total{class="bronze",outcome="fair_evicted",stage="api"} 0
sluice_requests_total{class="bronze",outcome="error",stage="api"} 0
sluice_requests_total{class="bronze",outcome="offered",stage="api"} 2
sluice_requests_total{class="bronze",outcome="rejected",stage="api"} 1
sluice_requests_total{class="bronze",outcome="shadow_rejected",stage="api"} 0
sluice_requests_total{class="gold",outcome="admitted",stage="api"} 0
sluice_requests_total{class="gold",outcome="completed",stage="api"} 0
sluice_requests_total{class="gold",outcome="deadline",stage="api"} 0
sluice_requests_total{class="gold",outcome="fair_evicted",stage="api"} 0
sluice_requests_total{class="gold",outcome="error",stage="api"} 0
sluice_requests_total{class="gold",outcome="offered",stage="api"} 0
sluice_requests_total{class="gold",outcome="rejected",stage="api"} 0
sluice_requests_total{class="gold",outcome="shadow_rejected",stage="api"} 0
sluice_requests_total{class="bronze",outcome="admitted",stage="default"} 0
sluice_requests_total{class="bronze",outcome="completed",stage="default"} 0
sluice_requests_total{class="bronze",outcome="deadline",stage="default"} 0
sluice_requests_total{class="bronze",outcome="fair_evicted",stage="default"} 0
sluice_requests_total{class="bronze",outcome="error",stage="default"} 0
sluice_requests_total{class="bronze",outcome="offered",stage="default"} 0
sluice_requests_total{class="bronze",outcome="rejected",stage="default"} 0
sluice_requests_total{class="bronze",outcome="shadow_rejected",stage="default"} 0
sluice_requests_total{class="gold",outcome="admitted",stage="default"} 0
sluice_requests_total{class="gold",outcome="completed",stage="default"} 0
sluice_requests_total{class="gold",outcome="deadline",stage="default"} 0
sluice_requests_total{class="gold",outcome="fair_evicted",stage="default"} 0
sluice_requests_total{class="gold",outcome="error",stage="default"} 0
sluice_requests_total{class="gold",outcome="offered",stage="default"} 0
sluice_requests_total{class="gold",outcome="rejected",stage="default"} 0
sluice_requests_total{class="gold",outcome="shadow_rejected",stage="default"} 0
# HELP sluice_gate_setting The gate setting in force for the class, in the unit of its kind (rate: req/s, drop_probability, concurrency: requests, quality: level, none: 0).
# TYPE sluice_gate_setting gauge
sluice_gate_setting{class="bronze",kind="rate",stage="api"} 1
sluice_gate_setting{class="gold",kind="rate",stage="api"} 1
sluice_gate_setting{class="bronze",kind="none",stage="default"} 0
sluice_gate_setting{class="gold",kind="none",stage="default"} 0
# HELP sluice_quality Quality level in (0, 1] a degrading stage hands to its backend (1 = full service).
# TYPE sluice_quality gauge
sluice_quality{stage="api"} 1
sluice_quality{stage="default"} 1
# HELP sluice_gate_off 1 when the stage's admission control is switched off (every request admitted), 0 otherwise.
# TYPE sluice_gate_off gauge
sluice_gate_off{stage="api"} 0
sluice_gate_off{stage="default"} 1
# HELP sluice_controller_decisions_total Controller steps taken by the stage.
# TYPE sluice_controller_decisions_total counter
sluice_controller_decisions_total{stage="api"} 1
sluice_controller_decisions_total{stage="default"} 1
`
	c := p.Collector()
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "sluice_requests_total", "sluice_gate_setting",
		"sluice_quality", "sluice_gate_off", "sluice_controller_decisions_total"); err != nil {
		t.Fatal(err)
	}
	// Two stages (api, the implicit default) and two classes: 2×2×3
	// request-duration series.
	if n := testutil.CollectAndCount(c, "sluice_request_duration_seconds"); n != 12 {
		t.Fatalf("%d request-duration series", n)
	}
	if problems, err := testutil.CollectAndLint(c, "sluice_requests_total", "sluice_request_duration_seconds",
		"sluice_upstream_duration_seconds", "sluice_queue_wait_seconds",
		"sluice_gate_setting", "sluice_quality", "sluice_gate_off", "sluice_controller_decisions_total"); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	var current *Policy
	swap := CollectorFor(func() *Policy { return current })
	if testutil.CollectAndCount(swap) != 0 {
		t.Fatal("nil policy has metrics")
	}
	current = p
	if testutil.CollectAndCount(swap) == 0 {
		t.Fatal("no metrics after swap")
	}
}

// Shadow mode admits what the gate would reject and counts it.
func TestShadowAdmitsAndCounts(t *testing.T) {
	p := build(t, `
shadow: true
stages: [{name: api, controller: static-rate, params: {rate: 1}, burst: 1}]
`, Options{})
	for i := 0; i < 5; i++ {
		a, err := p.Admit(request("GET", "/", "192.0.2.1:1"))
		if err != nil {
			t.Fatalf("shadow mode rejected: %v", err)
		}
		a.Done(sluice.Success)
	}
	p.Step(time.Now().Add(time.Second))
	if tot := p.Stage("api").Totals(0); tot.Admitted != 5 || tot.ShadowRejected != 4 || tot.Rejected != 0 {
		t.Fatalf("totals %+v", tot)
	}
	if !p.Shadow() || !p.Stage("api").State(0).Shadow {
		t.Fatal("shadow not reported")
	}
}

// Admit allocates nothing for a request that has nothing to carry to the
// next hop (one class, no hop headers), and one context when it has (its
// class in a policy of several).
func TestAdmitDoesNotAllocate(t *testing.T) {
	for _, c := range []struct {
		yaml   string
		allocs float64
	}{
		{strings.Replace(validBase, "{target: 200ms}", "{target: 200ms}\n    burst: 1000000", 1), 1},
		{"stages: [{name: api, match: {path_prefix: /api/}, controller: static-rate, params: {rate: 1e9}}]", 0},
	} {
		p := build(t, c.yaml, Options{})
		r := request("GET", "/api/x", "10.0.0.1:1", "X-Priority", "gold")
		if n := testing.AllocsPerRun(1000, func() {
			a, err := p.Admit(r)
			if err != nil {
				t.Fatal(err)
			}
			a.Done(sluice.Success)
		}); n > c.allocs {
			t.Fatalf("Admit+Done: %v allocs, want %v", n, c.allocs)
		}
	}
}

// Retry-After is computed from the rejecting stage's state and bounded to
// [retry_after, retry_after_max]: a static rate of 0.2/s has its next
// token 5 s away, one of 0.01/s 100 s away (capped), one of 4/s 250 ms
// away (raised to the least value).
func TestRejectRetryAfterFromStage(t *testing.T) {
	for _, tc := range []struct {
		rate  string
		extra string
		want  string
	}{
		{"0.2", "", "5"},
		{"0.01", "", "30"},
		{"0.01", "\nreject: {retry_after_max: 1m}", "60"},
		{"0.01", "\nreject: {retry_after: 2s, retry_after_max: 2s}", "2"},
		{"4", "", "1"},
	} {
		p := build(t, "stages: [{name: s, controller: static-rate, params: {rate: "+tc.rate+"}, burst: 1}]"+tc.extra, Options{})
		r := request("GET", "/", "192.0.2.1:1")
		a, err := p.Admit(r)
		if err != nil {
			t.Fatalf("rate %s: first request: %v", tc.rate, err)
		}
		a.Done(sluice.Success)
		_, err = p.Admit(r)
		if !Is(err) {
			t.Fatalf("rate %s: second request: %v, want a rejection", tc.rate, err)
		}
		w := httptest.NewRecorder()
		p.Reject(w, r, err)
		if got := w.Header().Get("Retry-After"); got != tc.want {
			t.Errorf("rate %s%s: Retry-After %q, want %q", tc.rate, tc.extra, got, tc.want)
		}
	}
}

// A static-rate stage with ratelimit_headers advertises its bucket in the
// IETF fields (draft-ietf-httpapi-ratelimit-headers-10), on admitted
// answers and rejections, with values from the gate's state.
func TestRateLimitHeaders(t *testing.T) {
	p := build(t, `
stages:
  - {name: api, match: {path_prefix: /api/}, controller: static-rate, params: {rate: 2}, burst: 4, ratelimit_headers: true}
  - {name: other, match: {path_prefix: /y}, controller: static-rate, params: {rate: 2}, burst: 4}`, Options{})
	st := p.Stage("api")
	h := okHandler(t, p)
	for i := range 4 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request("GET", "/api/x", "192.0.2.1:1"))
		if w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
		q, _ := st.Quota(time.Now())
		// Whole tokens left and seconds to a full bucket, as the gate has them.
		wantR := int(math.Floor(q.Tokens))
		wantT := int(math.Ceil((4 - q.Tokens) / 2))
		if got := w.Header().Get("RateLimit-Policy"); got != `"api";q=4;w=2` {
			t.Errorf("request %d: RateLimit-Policy %q", i, got)
		}
		// The gate refills between the answer and the check: allow one
		// token's worth of drift, not more.
		got := w.Header().Get("RateLimit")
		var r, tt int
		if _, err := fmt.Sscanf(got, `"api";r=%d;t=%d`, &r, &tt); err != nil {
			t.Fatalf("request %d: RateLimit %q: %v", i, got, err)
		}
		if r != 3-i || (r != wantR && r != wantR-1) || (tt != wantT && tt != wantT+1) || tt < 1 {
			t.Errorf("request %d: RateLimit %q; gate now holds %.3f tokens (r %d, t %d)", i, got, q.Tokens, wantR, wantT)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, request("GET", "/api/x", "192.0.2.1:1"))
	if w.Code != 503 || w.Header().Get("RateLimit") != `"api";r=0;t=2` || w.Header().Get("RateLimit-Policy") != `"api";q=4;w=2` {
		t.Errorf("rejection: %d RateLimit %q Policy %q", w.Code, w.Header().Get("RateLimit"), w.Header().Get("RateLimit-Policy"))
	}
	// A stage without the option sends neither field.
	w = httptest.NewRecorder()
	h.ServeHTTP(w, request("GET", "/y", "192.0.2.1:1"))
	if w.Header().Get("RateLimit") != "" || w.Header().Get("RateLimit-Policy") != "" {
		t.Errorf("stage without ratelimit_headers: %v", w.Header())
	}
}

func okHandler(t *testing.T, p *Policy) http.Handler {
	t.Helper()
	return sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
}
