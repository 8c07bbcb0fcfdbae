package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stage"
)

const uiToken = "0123456789abcdef-test"

// sseEvent is one event of /ui/events.
type sseEvent struct {
	id   string
	data Sample
}

// openEvents opens /ui/events with the given headers and returns a reader
// of its events and a func that closes it.
func openEvents(t *testing.T, url string, hdr map[string]string) (*http.Response, func() (sseEvent, error)) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	must(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	must(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	next := func() (sseEvent, error) {
		var ev sseEvent
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return ev, err
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
					return ev, err
				}
			case line == "" && ev.id != "":
				return ev, nil
			}
		}
	}
	return resp, next
}

// A token-protected, non-loopback admin listener: the page, its stream and
// every change need the token (401 with a Bearer challenge without it);
// reads stay open; the session cookie lets a browser read but not change.
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
	// Reads stay open, and /config does not give the token away.
	for _, p := range []string{"/state", "/metrics", "/config"} {
		code, _, body := get(t, admin+p, nil)
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
	resp, next := openEvents(t, admin+"/ui/events", session)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("/ui/events with the session cookie: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ev, err := next()
	must(t, err)
	if !ev.data.Token || ev.data.Seq == 0 {
		t.Errorf("first sample: %+v", ev.data)
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

// The event stream replays the kept history, sends each new sample as it
// is taken, resumes after Last-Event-ID (or ?since=), and starts over for
// another process's id. The sampler is stepped by hand here.
func TestUIEventsResume(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, ""))
	h := r.srv.hist
	for range 3 {
		h.sampleNow(r.srv, time.Now())
	}
	_, next := openEvents(t, r.admin+"/ui/events", nil)
	var last sseEvent
	for want := uint64(1); want <= 3; want++ {
		ev, err := next()
		must(t, err)
		if ev.data.Seq != want || ev.id != h.boot+"-"+strconv.FormatUint(want, 10) || ev.data.Boot != h.boot {
			t.Fatalf("event %d: id %q, sample %d of %q", want, ev.id, ev.data.Seq, ev.data.Boot)
		}
		last = ev
	}
	h.sampleNow(r.srv, time.Now()) // a live one
	ev, err := next()
	must(t, err)
	if ev.data.Seq != 4 {
		t.Fatalf("the live sample has seq %d, want 4", ev.data.Seq)
	}
	if len(ev.data.Stages) == 0 || ev.data.Pool.Capacity == 0 {
		t.Errorf("sample without stages or pool: %+v", ev.data)
	}
	// Resume after seq 3: the next event is 4.
	_, next2 := openEvents(t, r.admin+"/ui/events", map[string]string{"Last-Event-ID": last.id})
	ev, err = next2()
	must(t, err)
	if ev.data.Seq != 4 {
		t.Errorf("resumed after 3, got %d", ev.data.Seq)
	}
	_, next3 := openEvents(t, r.admin+"/ui/events?since=otherboot-3", nil)
	ev, err = next3()
	must(t, err)
	if ev.data.Seq != 1 {
		t.Errorf("another process's id: got seq %d, want the whole history from 1", ev.data.Seq)
	}
}

// A page opened late gets the whole kept history through the handler,
// from sealed blocks and the tail, in order and in pieces, then the live
// samples.
func TestUIEventsLongBacklog(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, ""))
	h := r.srv.hist
	now := time.Now()
	taken := HistoryLen + historyBlock + 10
	for i := range taken {
		h.sampleNow(r.srv, now.Add(time.Duration(i)*time.Second))
	}
	_, next := openEvents(t, r.admin+"/ui/events", nil)
	for want := uint64(taken - HistoryLen + 1); want <= uint64(taken); want++ {
		ev, err := next()
		must(t, err)
		if ev.data.Seq != want || ev.id != h.boot+"-"+strconv.FormatUint(want, 10) || len(ev.data.Stages) == 0 {
			t.Fatalf("event for %d: id %q, sample %d with %d stages", want, ev.id, ev.data.Seq, len(ev.data.Stages))
		}
	}
	h.sampleNow(r.srv, now.Add(time.Duration(taken)*time.Second))
	ev, err := next()
	must(t, err)
	if ev.data.Seq != uint64(taken+1) {
		t.Fatalf("the live sample has seq %d, want %d", ev.data.Seq, taken+1)
	}
	// What it holds is exported.
	_, _, body := get(t, r.admin+"/metrics", nil)
	if want := "proxy_ui_history_bytes " + strconv.FormatFloat(h.size(), 'g', -1, 64); !strings.Contains(body, want+"\n") {
		t.Errorf("/metrics lacks %q", want)
	}
}

// The ring keeps HistoryLen samples: older ones are dropped and a viewer
// asking from before them gets what is kept.
func TestHistoryRing(t *testing.T) {
	h := newHistory()
	for i := 1; i <= HistoryLen+5; i++ {
		h.push([]byte{byte(i)})
	}
	out, from, _, closed := h.since(0)
	if len(out) != HistoryLen || from != 6 || out[0][0] != 6 || closed {
		t.Fatalf("kept %d from %d (first byte %d), closed %v", len(out), from, out[0][0], closed)
	}
	out, from, _, _ = h.since(HistoryLen + 3)
	if len(out) != 2 || from != HistoryLen+4 {
		t.Fatalf("after %d: %d from %d", HistoryLen+3, len(out), from)
	}
	_, _, wake, _ := h.since(HistoryLen + 5)
	h.close()
	select {
	case <-wake:
	default:
		t.Fatal("close did not wake the viewers")
	}
	if _, _, _, closed := h.since(0); !closed {
		t.Fatal("not closed after close")
	}
}

// push stores an encoded sample that carries no decisions.
func (h *history) push(b []byte) { h.pushSample(b, nil) }

// histSample is a sample-sized stand-in that names its own seq, with the
// repetition of real samples (same keys, mostly the same values).
func histSample(seq int) []byte {
	return []byte(`{"seq":` + strconv.Itoa(seq) + `,"stages":[{"name":"default","controller":"auto",` +
		strings.Repeat(`"numbers":{"concurrency.in_flight":7,"limit":12},`, 40) + `"x":` + strconv.Itoa(seq%7) + `}]}`)
}

// Every resume point, across sealed blocks and the uncompressed tail and
// while blocks leave the window, gets exactly the samples after it, each
// labelled with its own seq.
func TestHistoryBlocksResume(t *testing.T) {
	h := newHistory()
	check := func(next int) {
		t.Helper()
		first := max(1, next-HistoryLen)
		// Each edge: the start, the window's first sample, every block
		// boundary, the newest.
		seqs := []int{0, 1, first - 2, first - 1, first, first + 1, next - 2, next - 1}
		for b := 1; b < next; b += historyBlock {
			seqs = append(seqs, b-1, b, b+1)
		}
		for _, seq := range seqs {
			if seq < 0 || seq >= next {
				continue
			}
			out, from, _, _ := h.since(uint64(seq))
			want := max(seq+1, first)
			if int(from) != want || len(out) != next-want {
				t.Fatalf("next %d, since %d: %d samples from %d, want %d from %d", next, seq, len(out), from, next-want, want)
			}
			for i, b := range out {
				if !bytes.Equal(b, histSample(want+i)) {
					t.Fatalf("next %d, since %d: sample %d is %.40q", next, seq, want+i, b)
				}
			}
		}
	}
	next := 1
	for _, upto := range []int{historyBlock, historyBlock + 1, HistoryLen, HistoryLen + 1, HistoryLen + historyBlock + 1, 2*HistoryLen + 7} {
		for ; next <= upto; next++ {
			h.push(histSample(next))
		}
		check(next)
	}
	if n := len(h.blocks); n > HistoryLen/historyBlock {
		t.Errorf("%d blocks kept, want at most %d", n, HistoryLen/historyBlock)
	}
}

// The full history takes a fraction of its samples' size: sealed blocks
// are compressed.
func TestHistoryIsCompressed(t *testing.T) {
	h := newHistory()
	raw := 0
	for i := 1; i <= HistoryLen; i++ {
		b := histSample(i)
		raw += len(b)
		h.push(b)
	}
	held := int(h.size())
	if held == 0 || held*3 > raw {
		t.Errorf("the history holds %d bytes for %d bytes of samples, want under a third", held, raw)
	}
}

// shownDecisions replays samples as the page does: each stage's decisions
// (and the policer's, key "") appended in order, the newest
// uiDecisionsShown kept.
func shownDecisions(t *testing.T, samples [][]byte) (map[string][]string, int) {
	t.Helper()
	shown, carried := map[string][]string{}, 0
	add := func(key string, ds []stage.DecisionState) {
		for _, d := range ds {
			shown[key] = append(shown[key], d.Reason)
			carried++
		}
		if a := shown[key]; len(a) > uiDecisionsShown {
			shown[key] = a[len(a)-uiDecisionsShown:]
		}
	}
	for _, b := range samples {
		var smp Sample
		must(t, json.Unmarshal(b, &smp))
		for _, st := range smp.Stages {
			add(st.Name, st.Decisions)
		}
		if smp.Policer != nil {
			add("", smp.Policer.Decisions)
		}
	}
	return shown, carried
}

// Sealed samples lose only the decisions no viewer shows: from every
// resume point, a viewer ends up showing the same decisions as with every
// sample kept as sent, while the history carries far fewer of them.
func TestHistoryDropsOnlyUnshownDecisions(t *testing.T) {
	h := newHistory()
	var sent [][]byte // every sample as sent, from seq 1
	dec := func(seq, j int, who string) stage.DecisionState {
		return stage.DecisionState{At: time.Unix(int64(seq), int64(j)), Reason: fmt.Sprintf("%s %d.%d", who, seq, j)}
	}
	const n = 4*historyBlock + 17
	for seq := 1; seq <= n; seq++ {
		smp := &Sample{Seq: uint64(seq), Stages: []SampleStage{{Name: "busy"}, {Name: "calm"}}, Policer: &SamplePolicer{}}
		busy := 10 // a busy stage: 10 a second, then quiet, then 2 a second
		switch {
		case seq > 2*historyBlock+20:
			busy = 2
		case seq > historyBlock+30:
			busy = 0
		}
		for j := range busy {
			smp.Stages[0].Decisions = append(smp.Stages[0].Decisions, dec(seq, j, "busy"))
		}
		if seq%7 == 0 {
			smp.Stages[1].Decisions = []stage.DecisionState{dec(seq, 0, "calm")}
		}
		if seq%13 == 0 {
			smp.Policer.Decisions = []stage.DecisionState{dec(seq, 0, "policer")}
		}
		b, err := json.Marshal(smp)
		must(t, err)
		sent = append(sent, b)
		h.pushSample(b, decisionCounts(smp))
	}
	_, all := shownDecisions(t, sent)
	for _, seq := range []int{0, 1, 30, historyBlock - 1, historyBlock + 29, historyBlock + 31, 2 * historyBlock, 3*historyBlock + 5, n - 2} {
		out, from, _, _ := h.since(uint64(seq))
		if int(from) != seq+1 || len(out) != n-seq {
			t.Fatalf("since %d: %d samples from %d", seq, len(out), from)
		}
		got, carried := shownDecisions(t, out)
		want, _ := shownDecisions(t, sent[seq:])
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("since %d: the page would show\n%v\nwant\n%v", seq, got, want)
		}
		if seq == 0 && carried*3 > all {
			t.Errorf("the history carries %d of the %d decisions sent, want under a third", carried, all)
		}
	}
}

// The page keeps the newest uiDecisionsShown decisions per stage, the
// number sealing relies on to drop older ones.
func TestPageShowsUIDecisionsShown(t *testing.T) {
	page, err := uiFiles.ReadFile("ui/index.html")
	must(t, err)
	m := regexp.MustCompile(`a\.length > (\d+)\) a\.splice`).FindAllSubmatch(page, -1)
	if len(m) != 2 {
		t.Fatalf("the page's decision lists: %d found, want 2 (stages and policer)", len(m))
	}
	for _, x := range m {
		if string(x[1]) != strconv.Itoa(uiDecisionsShown) {
			t.Errorf("the page keeps %s decisions, uiDecisionsShown is %d", x[1], uiDecisionsShown)
		}
	}
}

// uiEverySection is the part of a configuration, after the backend's
// max_concurrency, that gives the dashboard every section beside the
// stages: a cpu resource rule on a stage "cgi" with its sensor, a policer
// and client shares.
const uiEverySection = `resources:
  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}}
policer: {rate: 100000, burst: 1000, control: {q_ref: 100}}
shares:
  total_bandwidth: 100MB
  clients: [{name: local, share: 50, cidrs: [127.0.0.1]}]
`

// Sealing re-encodes a sample through Sample: every field of a real one
// (stages, pool, policer, rules, sensors, shares, decisions) survives
// byte for byte, and only the named stages lose their decisions.
func TestSampleReencodesExactly(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, `      max_concurrency: 8
`+uiEverySection+`stages:
  - {name: cgi, match: {path_prefix: /cgi}, controller: voigt-cpu}
  - {name: web, match: {path_prefix: /}, controller: seda, params: {target: 100ms}}
`))
	h := r.srv.hist
	now := time.Now()
	for i := range 3 {
		r.srv.h.gen.Load().pol.Step(now.Add(time.Duration(i) * time.Second))
		h.sampleNow(r.srv, now.Add(time.Duration(i)*time.Second))
	}
	out, _, _, _ := h.since(0)
	b := out[len(out)-1]
	var smp Sample
	must(t, json.Unmarshal(b, &smp))
	if smp.Policer == nil || smp.Shares == nil || len(smp.Resources) == 0 || len(smp.Sensors) == 0 || len(smp.Stages) < 2 ||
		smp.Stages[1].Name != "web" || len(smp.Stages[0].Decisions) == 0 {
		t.Fatalf("the sample lacks a section: %s", b)
	}
	smp.Stages[1].Decisions = []stage.DecisionState{{At: now, Old: 1, New: 0.5, ClassRates: []float64{1, 2}, Quality: 0.5, GateOff: true, Acted: true, Reason: "r"}}
	smp.Policer.Decisions = []stage.DecisionState{{At: now, Reason: "p"}}
	b, err := json.Marshal(&smp)
	must(t, err)
	same, err := withoutDecisions(b, nil)
	must(t, err)
	if !bytes.Equal(same, b) {
		t.Fatalf("re-encoded:\n%s\nsent:\n%s", same, b)
	}
	less, err := withoutDecisions(b, []string{"web"})
	must(t, err)
	var got Sample
	must(t, json.Unmarshal(less, &got))
	if got.Stages[1].Decisions != nil || len(got.Stages[0].Decisions) == 0 || len(got.Policer.Decisions) != 1 {
		t.Fatalf("without web's decisions: %s", less)
	}
}

// Viewers reading while the sampler pushes across block boundaries always
// see consecutive samples labelled with their seq (run with -race).
func TestHistoryConcurrentViewers(t *testing.T) {
	h := newHistory()
	done := make(chan struct{})
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			defer func() { errs <- "" }()
			seq := uint64(0)
			for {
				out, from, wake, closed := h.since(seq)
				for i, b := range out {
					if !bytes.Equal(b, histSample(int(from)+i)) {
						errs <- "sample " + strconv.Itoa(int(from)+i) + " mislabelled"
						return
					}
				}
				if len(out) > 0 {
					seq = from + uint64(len(out)) - 1
				}
				if closed {
					return
				}
				select {
				case <-wake:
				case <-done:
					return
				}
			}
		}()
	}
	for i := 1; i <= 3*HistoryLen; i++ {
		h.push(histSample(i))
	}
	h.close()
	close(done)
	for range 4 {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
}

// Rates come from the totals over the control periods that ended between
// two samples, in a manually stepped proxy.
func TestHistoryRates(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {})
	r := startManual(t, baseConfig(be.URL, `stages:
  - name: api
    match: {path_prefix: /}
    controller: static-rate
    params: {rate: 100000}
`))
	h := r.srv.hist
	step := func(now time.Time) { r.srv.h.gen.Load().pol.Step(now) }
	t0 := time.Now().Add(time.Hour) // past the first period, whatever the clock did
	step(t0)
	h.take(r.srv, t0)
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
	step(t1)
	s := h.take(r.srv, t1.Add(100*time.Millisecond))
	var c SampleClass
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
	s = h.take(r.srv, t1.Add(time.Second))
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
	base, viewers0 := runtime.NumGoroutine(), uiViewers.Load()
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
	if n := uiViewers.Load() - viewers0; n != 5 {
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
	eventually(t, "the viewers to be counted out", func() bool { return uiViewers.Load() == viewers0 })
	eventually(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= base+2 })
}
