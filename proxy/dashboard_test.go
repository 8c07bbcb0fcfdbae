// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/proxy/admin"
	"github.com/sluicehq/sluice/proxy/internal/dashboard"
	"github.com/sluicehq/sluice/proxy/internal/proxytest"
	"github.com/sluicehq/sluice/stage"
)

const uiToken = "0123456789abcdef-test"

// uiCookie is the dashboard's session cookie.
const uiCookie = admin.SessionCookie

// openEvents opens /ui/events with the given headers and returns the
// response and a reader of its events.
func openEvents(t *testing.T, url string, hdr map[string]string) (*http.Response, *dashboard.EventReader) {
	t.Helper()
	resp := proxytest.Send(t, client, http.MethodGet, url, nil, hdr)
	return resp, dashboard.NewEventReader(resp.Body)
}

// A token-protected, non-loopback admin listener: the page, its stream,
// every read and every change need the token (401 with a Bearer
// challenge without it); the session cookie lets a browser see the
// dashboard but neither change nor read anything else.
func TestUIAuthPublicListener(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startProxy(t, strings.Replace(baseConfig(be.URL, `stages:
  - name: web
    match: {path_prefix: /}
    controller: seda
    params: {target: 100ms}
`), "admin:\n  addr: 127.0.0.1:0\n", "admin:\n  addr: 0.0.0.0:0\n  allow_public: true\n  token: "+uiToken+"\n", 1))
	if ip := r.srv.AdminAddr().(*net.TCPAddr).IP; !ip.IsUnspecified() {
		t.Fatalf("admin listens on %v, want the unspecified address", ip)
	}
	_, port, _ := net.SplitHostPort(r.srv.AdminAddr().String())
	admin := "http://127.0.0.1:" + port
	bearer := map[string]string{"Authorization": "Bearer " + uiToken}

	for _, tc := range []struct {
		method, path, body string
	}{
		{"GET", "/ui", ""}, {"GET", "/ui/events", ""}, {"GET", "/ui?token=wrong-token-0123456789", ""},
		{"PUT", "/stages/web/target", `{"target":"300ms"}`}, {"PUT", "/shadow", `{"shadow":true}`}, {"POST", "/reload", ""},
		{"GET", "/state", ""}, {"GET", "/metrics", ""}, {"GET", "/config", ""}, {"GET", "/", ""},
	} {
		for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Basic " + uiToken} {
			req, _ := http.NewRequest(tc.method, admin+tc.path, strings.NewReader(tc.body))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := client.Do(req)
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with Authorization %q: %d, WWW-Authenticate %q; want 401 with a Bearer challenge",
					tc.method, tc.path, auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
	// Reads with the token, and /config does not give the token away.
	for _, p := range []string{"/state", "/metrics", "/config"} {
		code, _, body := get(t, admin+p, bearer)
		if code != 200 || strings.Contains(body, uiToken) {
			t.Errorf("GET %s: %d (token in body: %v)", p, code, strings.Contains(body, uiToken))
		}
	}

	// With the token: the page (by header, or once by ?token=, which sets
	// the session cookie), the stream, and a change.
	if code, _, body := get(t, admin+"/ui", bearer); code != 200 || !strings.Contains(body, "uPlot") {
		t.Fatalf("GET /ui with the token: %d", code)
	}
	code, hdr, _ := get(t, admin+"/ui?token="+uiToken, nil)
	cookie := hdr.Get("Set-Cookie")
	if code != 200 || !strings.Contains(cookie, uiCookie+"=") || !strings.Contains(cookie, "HttpOnly") ||
		!strings.Contains(cookie, "SameSite=Strict") || strings.Contains(cookie, uiToken) {
		t.Fatalf("GET /ui?token=: %d, Set-Cookie %q", code, cookie)
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'nonce-") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	session := map[string]string{"Cookie": strings.Split(cookie, ";")[0]}
	if code, _, _ := get(t, admin+"/ui", session); code != 200 {
		t.Errorf("GET /ui with the session cookie: %d", code)
	}
	resp, events := openEvents(t, admin+"/ui/events", session)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("/ui/events with the session cookie: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	_, smp, err := events.Next()
	must(t, err)
	if !smp.Token || smp.Seq == 0 {
		t.Errorf("first sample: %+v", smp)
	}
	// The cookie does not authorize a change; the header does.
	req, _ := http.NewRequest(http.MethodPut, admin+"/stages/web/target", strings.NewReader(`{"target":"300ms"}`))
	req.Header.Set("Cookie", session["Cookie"])
	res, err := client.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("PUT target with only the session cookie: %d, want 401", res.StatusCode)
	}
	if code, _, _ := get(t, admin+"/state", session); code != http.StatusUnauthorized {
		t.Errorf("GET /state with only the session cookie: %d, want 401", code)
	}
	req, _ = http.NewRequest(http.MethodPut, admin+"/stages/web/target", strings.NewReader(`{"target":"300ms"}`))
	req.Header.Set("Authorization", "Bearer "+uiToken)
	res, err = client.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("PUT target with the token: %d", res.StatusCode)
	}
}

// On loopback without a token, nothing needs one.
func TestUILoopbackOpen(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startProxy(t, baseConfig(be.URL, ""))
	code, hdr, body := get(t, r.admin+"/ui", nil)
	if code != 200 || hdr.Get("Set-Cookie") != "" || !strings.Contains(body, `nonce="`) || strings.Contains(body, "{{NONCE}}") {
		t.Fatalf("GET /ui: %d, Set-Cookie %q", code, hdr.Get("Set-Cookie"))
	}
}

// The event stream, wired to the real server: the kept history and each
// new sample as the sampler takes it, with the server's stages and pool.
// (Replay, resumption after Last-Event-ID or ?since=, and another
// process's id: the dashboard's TestEventsFromView.)
func TestUIEventsFromServer(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, ""))
	d := r.srv.dash
	first, _ := d.SampleAt(time.Now())
	_, events := openEvents(t, r.admin+"/ui/events", nil)
	id, smp, err := events.Next()
	must(t, err)
	if smp.Seq != first.Seq || id != first.Boot+"-"+strconv.FormatUint(first.Seq, 10) {
		t.Fatalf("first event: id %q, sample %d; want the kept sample %d", id, smp.Seq, first.Seq)
	}
	d.SampleAt(time.Now()) // a live one
	_, smp, err = events.Next()
	must(t, err)
	if smp.Seq != first.Seq+1 || len(smp.Stages) == 0 || smp.Pool.Capacity == 0 {
		t.Errorf("the live sample: seq %d, %d stages, pool capacity %v", smp.Seq, len(smp.Stages), smp.Pool.Capacity)
	}
	// What the history holds is exported (its value: the dashboard's
	// TestUIEventsLongBacklog).
	_, _, body := get(t, r.admin+"/metrics", nil)
	if !regexp.MustCompile(`(?m)^proxy_ui_history_bytes [1-9]`).MatchString(body) {
		t.Errorf("/metrics lacks proxy_ui_history_bytes")
	}
}

// uiEveryConfig is the part of a configuration after the backend's URL
// that gives the dashboard every section: a backend max_concurrency of
// 8, a cpu resource rule on stage "cgi" with its sensor, a policer,
// client shares, and the stages cgi (voigt-cpu) and web (seda).
const uiEveryConfig = `      max_concurrency: 8
resources:
  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}}
policer: {rate: 100000, burst: 1000, control: {q_ref: 100}}
shares:
  total_bandwidth: 100MB
  clients: [{name: local, share: 50, cidrs: [127.0.0.1]}]
stages:
  - {name: cgi, match: {path_prefix: /cgi}, controller: voigt-cpu}
  - {name: web, match: {path_prefix: /}, controller: seda, params: {target: 100ms}}
`

// Sealing re-encodes a sample through dashboard.Sample: every field of a
// real one (stages, pool, policer, rules, sensors, shares, decisions)
// survives byte for byte. (That only the named stages lose their
// decisions: the dashboard's TestSampleReencodesExactly.)
func TestSampleReencodesExactly(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, uiEveryConfig))
	now := time.Now()
	var b []byte
	for i := range 3 {
		r.stepPolicy(now.Add(time.Duration(i) * time.Second))
		_, b = r.srv.dash.SampleAt(now.Add(time.Duration(i) * time.Second))
	}
	var smp dashboard.Sample
	must(t, json.Unmarshal(b, &smp))
	if smp.Policer == nil || smp.Shares == nil || len(smp.Resources) == 0 || len(smp.Sensors) == 0 || len(smp.Stages) < 2 ||
		smp.Stages[1].Name != "web" || len(smp.Stages[0].Decisions) == 0 {
		t.Fatalf("the sample lacks a section: %s", b)
	}
	smp.Stages[1].Decisions = []stage.DecisionState{{At: now, Old: 1, New: 0.5, ClassRates: []float64{1, 2}, Quality: 0.5, GateOff: true, Acted: true, Reason: "r"}}
	smp.Policer.Decisions = []stage.DecisionState{{At: now, Reason: "p"}}
	b, err := json.Marshal(&smp)
	must(t, err)
	var again dashboard.Sample
	must(t, json.Unmarshal(b, &again))
	same, err := json.Marshal(&again)
	must(t, err)
	if !bytes.Equal(same, b) {
		t.Fatalf("re-encoded:\n%s\nsent:\n%s", same, b)
	}
}

// Rates come from the totals over the control periods that ended between
// two samples, in a manually stepped proxy.
func TestHistoryRates(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, apiRateStage))
	d := r.srv.dash
	t0 := time.Now().Add(time.Hour) // past the first period, whatever the clock did
	r.stepPolicy(t0)
	d.SampleAt(t0)
	for range 30 {
		code, _, _ := get(t, r.url+"/x", nil)
		if code != 200 {
			t.Fatalf("GET: %d", code)
		}
	}
	// A client has its answer a moment before the proxy is done with
	// the request: wait for the proxy.
	eventually(t, "the proxy to finish the requests", func() bool { return r.srv.h.active.Load() == 0 })
	t1 := t0.Add(2 * time.Second)
	r.stepPolicy(t1)
	s, _ := d.SampleAt(t1.Add(100 * time.Millisecond))
	var c dashboard.SampleClass
	for _, st := range s.Stages {
		if st.Name == "api" {
			c = st.Classes[0]
			if st.Setting != 100000 || st.Kind != "rate" || st.Unit != "req/s" {
				t.Errorf("stage: %+v", st)
			}
		}
	}
	if c.Totals.Offered != 30 || c.Totals.Completed != 30 {
		t.Fatalf("totals %+v, want 30 offered and completed", c.Totals)
	}
	if c.Rates.Offered != 15 || c.Rates.Completed != 15 {
		t.Errorf("rates %+v, want 15/s (30 over the 2 s between the period ends)", c.Rates)
	}
	if c.Last["offered"] != 30 || c.Last["elapsed_ms"] <= 0 {
		t.Errorf("last period numbers %v", c.Last)
	}
	// No period ended since: the rates stand.
	s, _ = d.SampleAt(t1.Add(time.Second))
	for _, st := range s.Stages {
		if st.Name == "api" && st.Classes[0].Rates.Offered != 15 {
			t.Errorf("rates after a sample without a period: %+v", st.Classes[0].Rates)
		}
	}
}

// PUT /shadow: validated like the target endpoint; it turns shadow mode on
// in a new configuration version, visible in /state and /config.
func TestUIShadowEndpoint(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startProxy(t, baseConfig(be.URL, ""))
	put := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, r.admin+"/shadow", strings.NewReader(body))
		resp, err := client.Do(req)
		must(t, err)
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		b, _ := json.Marshal(m)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ body, want string }{
		{``, "body must be JSON"}, {`{}`, "shadow is required"}, {`{"shadow":"yes"}`, "body must be JSON"},
		{`{"shadow":true,"x":1}`, `unknown field`},
	} {
		if code, body := put(tc.body); code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("PUT /shadow %q: %d %s, want 400 with %q", tc.body, code, body, tc.want)
		}
	}
	v0 := r.state(t).ConfigVersion
	if code, body := put(`{"shadow":true}`); code != 200 || !strings.Contains(body, `"old":false`) || !strings.Contains(body, `"shadow":true`) {
		t.Fatalf("PUT /shadow true: %d %s", code, body)
	}
	st := r.state(t)
	if !st.Shadow || st.ConfigVersion != v0+1 || !st.Stages[0].Shadow {
		t.Fatalf("after shadow on: shadow %v, version %d (was %d), stage shadow %v", st.Shadow, st.ConfigVersion, v0, st.Stages[0].Shadow)
	}
	if _, _, cfg := get(t, r.admin+"/config", nil); !strings.Contains(cfg, "shadow: true") {
		t.Errorf("/config does not show shadow: true")
	}
	// The same value again changes nothing.
	if code, _ := put(`{"shadow":true}`); code != 200 || r.state(t).ConfigVersion != v0+1 {
		t.Errorf("repeating shadow true made a new version")
	}
	if code, _ := put(`{"shadow":false}`); code != 200 || r.state(t).Shadow {
		t.Errorf("shadow false did not apply")
	}
}

// The sampler and every viewer's stream end with the server: no goroutine
// is left behind.
func TestUISamplerNoLeak(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	base, viewers0 := runtime.NumGoroutine(), dashboard.Viewers()
	c, err := Parse("leak.yaml", []byte(baseConfig(be.URL, "")))
	must(t, err)
	srv, err := New(c, Options{Logger: testLogger(t)})
	must(t, err)
	must(t, srv.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	admin := "http://" + srv.AdminAddr().String()
	tr := &http.Transport{}
	cl := &http.Client{Transport: tr, Timeout: testTimeout}
	var bodies []*bufio.Reader
	for range 5 {
		resp, err := cl.Get(admin + "/ui/events")
		must(t, err)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, br)
	}
	if n := dashboard.Viewers() - viewers0; n != 5 {
		t.Errorf("%d viewers counted, want 5", n)
	}
	cancel()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return with 5 viewers open")
	}
	for _, br := range bodies { // every stream ends
		for {
			if _, err := br.ReadString('\n'); err != nil {
				break
			}
		}
	}
	tr.CloseIdleConnections()
	eventually(t, "the viewers to be counted out", func() bool { return dashboard.Viewers() == viewers0 })
	eventually(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= base+2 })
}

// The dashboard's view of the server is /state's readings as typed
// values: the same stages, pool, policer, rules, sensors and shares, with
// each stage's objective and floor; the types it converts keep /state's
// JSON names, which the page shows.
func TestDashViewIsState(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, uiEveryConfig))
	now := time.Now()
	r.stepPolicy(now)
	doc := r.srv.State(3)
	st := dashView{r.srv}.State(3)
	if st.ConfigVersion != doc.ConfigVersion || st.Shadow != doc.Shadow || st.Token || len(st.Stages) != len(doc.Stages) ||
		st.Policer == nil || len(st.Resources) != len(doc.Resources) || len(st.Sensors) != len(doc.Sensors) || st.Shares == nil {
		t.Fatalf("view %+v\nof /state %+v", st, doc)
	}
	for i, s := range st.Stages {
		if !reflect.DeepEqual(s.State, doc.Stages[i]) {
			t.Errorf("stage %d: %+v, /state has %+v", i, s.State, doc.Stages[i])
		}
	}
	if web := st.Stages[1]; web.Objective != "p90" || web.Floor == nil || *web.Floor != 0.05 {
		t.Errorf("web: objective %q floor %v", web.Objective, web.Floor)
	}
	b := doc.Backends
	if p := st.Pool; p.Capacity != b.Capacity || p.QueueMax != b.Queue.Max || p.QueueTimeout != b.Queue.Timeout ||
		len(p.Servers) != 1 || p.Servers[0].URL != b.Servers[0].URL || p.Servers[0].Limit != 8 {
		t.Errorf("pool %+v, /state has %+v", p, b)
	}
	if p, q := st.Policer, doc.Policer; p.Controller != q.Controller || p.Rate != q.Rate || p.Burst != q.Burst {
		t.Errorf("policer %+v, /state has %+v", p, q)
	}
	if r, q := st.Resources[0], doc.Resources[0]; r.Stage != q.Stage || r.Resource != q.Resource || r.Sensor != q.Sensor || r.Rate != q.Rate {
		t.Errorf("rule %+v, /state has %+v", r, q)
	}
	jsonOf := func(v any) string {
		b, err := json.Marshal(v)
		must(t, err)
		return string(b)
	}
	if a, b := jsonOf(st.Sensors), jsonOf(doc.Sensors); a != b {
		t.Errorf("sensors\n%s\n/state has\n%s", a, b)
	}
}
