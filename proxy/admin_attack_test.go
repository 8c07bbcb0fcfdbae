// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/internal/testkit"
	"github.com/sluicehq/sluice/proxy/admin"
)

// attackRequests is how many unauthenticated requests the attack test
// sends: 10,000, or a quarter of that under the race detector, which
// makes each one about ten times as costly (the races it looks for need
// concurrency, not volume).
var attackRequests = map[bool]int{false: 10_000, true: 2_500}[raceEnabled]

// adminState is what a request could change: the configuration version,
// shadow, every stage's target, the reload and target-change counts.
type adminState struct {
	version       uint64
	shadow        bool
	targets       string
	reloadsOK     float64
	reloadsErr    float64
	targetChanges int
}

func adminStateOf(s *Server) adminState {
	st := s.State(0)
	var targets []string
	for _, g := range st.Stages {
		targets = append(targets, g.Name+"="+g.Target)
	}
	return adminState{version: st.ConfigVersion, shadow: st.Shadow, targets: strings.Join(targets, ","),
		reloadsOK: testutil.ToFloat64(s.m.reloads.WithLabelValues("ok")), reloadsErr: testutil.ToFloat64(s.m.reloads.WithLabelValues("error")),
		targetChanges: testutil.CollectAndCount(s.m.targetChanges)}
}

// attackRequest is one unauthenticated request: a route of the table
// (or a path near one), any method, a bad credential, any body.
func attackRequest(r *rand.Rand, base string, routes []admin.Route, cookie string) (*http.Request, string) {
	rt := routes[r.IntN(len(routes))]
	path := strings.ReplaceAll(strings.ReplaceAll(rt.Path, "{name}", "api"), "{$}", "")
	switch r.IntN(8) {
	case 0:
		path += []string{"x", "/", "/../shadow", "%2e%2e/reload", "?token=wrong-token-0123456789", "?format=json&decisions=-1"}[r.IntN(6)]
	case 1:
		path = []string{"//shadow", "/SHADOW", "/stages/api%2Ftarget", "/stages//target", "/debug/pprof/cmdline", "/ui/../reload", "/ui?token="}[r.IntN(7)]
	}
	method := rt.Methods[r.IntN(len(rt.Methods))]
	if r.IntN(3) == 0 {
		method = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND", "TRACE"}[r.IntN(9)]
	}
	var body io.Reader
	what := "no body"
	switch r.IntN(6) {
	case 0:
		body, what = strings.NewReader(`{"shadow":true}`), "a valid shadow body"
	case 1:
		body, what = strings.NewReader(`{"target":"1ms"}`), "a valid target body"
	case 2:
		junk := make([]byte, r.IntN(512))
		for i := range junk {
			junk[i] = byte(r.UintN(256))
		}
		body, what = bytes.NewReader(junk), "junk"
	case 3:
		body, what = bytes.NewReader(bytes.Repeat([]byte("{"), MaxAdminBodyBytes+1+r.IntN(3*MaxAdminBodyBytes))), "an oversized body"
	case 4:
		// No length: sent chunked.
		body, what = io.MultiReader(strings.NewReader(`{"shadow":`), bytes.NewReader(bytes.Repeat([]byte(" "), 2*MaxAdminBodyBytes)), strings.NewReader(`true}`)), "an oversized chunked body"
	}
	req, _ := http.NewRequest(method, base+path, body)
	wrong := "wrong-token-0123456789abcdef"
	switch r.IntN(9) {
	case 0:
		req.Header.Set("Authorization", "Bearer "+wrong)
	case 1:
		req.Header.Set("Authorization", "Bearer "+canaryToken[:len(canaryToken)-1])
	case 2:
		req.Header.Set("Authorization", "Bearer "+canaryToken+"x")
	case 3:
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+wrong)))
	case 4:
		req.Header.Set("Authorization", "Bearer "+cookie) // the cookie's value is no token
	case 5:
		req.Header.Set("Cookie", admin.SessionCookie+"="+strings.Repeat("0", 64))
	case 6:
		req.Header.Set("Cookie", admin.SessionCookie+"="+wrong+"; "+admin.SessionCookie+"=")
	case 7:
		if rt.Auth != admin.AuthUI && !strings.HasPrefix(path, "/ui") {
			// The real dashboard cookie, where it is no credential.
			req.Header.Set("Cookie", admin.SessionCookie+"="+cookie)
		}
	}
	return req, fmt.Sprintf("%s %s with %s, Authorization %q, Cookie %q", method, path, what, req.Header.Get("Authorization"), req.Header.Get("Cookie"))
}

// attackRequests unauthenticated requests at every route of the table — every
// method, junk, valid and oversized bodies, bad tokens, cookie tricks —
// against a server with a secret in every secret field: no secret in
// any answer, no 2xx but from the open and public endpoints, and no
// state change.
func TestAdminUnauthenticatedAttack(t *testing.T) {
	be := backend(t, echoHeaders)
	col := newCollector(t)
	cs := newCanarySetup(t)
	text := strings.NewReplacer("BACKEND", be.URL, "COLLECTOR", col.srv.URL, "ADDR", freeClosedAddr(t)).Replace(cs.text)
	text = strings.Replace(text, "  pprof: true\n", "  pprof: true\n  public: [metrics]\n", 1)
	var logs testkit.SyncBuffer
	p := startLogged(t, text, &logs)
	lc := newLeakCheck(t, p.srv.Config())
	resp, _ := call(t, http.MethodGet, p.admin+"/ui?token="+canaryToken, "", nil)
	_, cookie, _ := strings.Cut(strings.Split(resp.Header.Get("Set-Cookie"), ";")[0], "=")
	before := adminStateOf(p.srv)
	routes := p.srv.adm.Routes(true)
	open := map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

	hc := &http.Client{Timeout: testTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 16},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var sent atomic.Int64
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(42, uint64(w)))
			for sent.Add(1) <= int64(attackRequests) {
				req, what := attackRequest(r, p.admin, routes, cookie)
				resp, err := hc.Do(req)
				if err != nil {
					t.Errorf("%s: %v", what, err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lc.check(what, response(resp, body))
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
				if resp.StatusCode < 300 && !(open[req.URL.Path] && (req.Method == http.MethodGet || req.Method == http.MethodHead)) {
					t.Errorf("%s: %d %s", what, resp.StatusCode, body)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if after := adminStateOf(p.srv); after != before {
		t.Errorf("the state changed: before %+v, after %+v", before, after)
	}
	lc.check("the logs", logs.String())
	total := 0
	for _, n := range codes {
		total += n
	}
	if total != attackRequests || codes[http.StatusUnauthorized] < attackRequests/2 {
		t.Errorf("answers by status: %v", codes)
	}
	keys := slices.Sorted(func(yield func(int) bool) {
		for k := range codes {
			if !yield(k) {
				return
			}
		}
	})
	t.Logf("%d requests in %v; answers by status: %v %v", total, elapsed.Round(time.Millisecond), keys, codes)
}

// With the token, a malformed, oversized or misdirected request gets its
// 4xx and changes nothing.
func TestAdminBadInputChangesNothing(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, strings.Replace(baseConfig(be.URL, sedaStage), "admin:\n  addr: 127.0.0.1:0\n",
		"admin:\n  addr: 127.0.0.1:0\n  token: "+oldToken+"\n", 1))
	before := adminStateOf(p.srv)
	big := strings.Repeat(" ", MaxAdminBodyBytes) + `{"shadow":true}`
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"PUT", "/shadow", big, 413},
		{"PUT", "/shadow", `{"shadow":true} {"shadow":false}`, 400},
		{"PUT", "/shadow", `{"shadow":true,"x":1}`, 400},
		{"PUT", "/shadow", `{"shadow":"yes"}`, 400},
		{"PUT", "/stages/api/target", `{"target":"300ms"}x`, 400},
		{"PUT", "/stages/api/target", strings.Repeat(" ", MaxAdminBodyBytes) + `{"target":"300ms"}`, 413},
		{"PUT", "/stages/nosuch/target", `{"target":"300ms"}`, 404},
		{"POST", "/reload", big, 413},
		{"POST", "/shadow", `{"shadow":true}`, 405},
		{"DELETE", "/stages/api/target", ``, 405},
		{"GET", "/state?decisions=1001", ``, 400},
		{"GET", "/state", big, 413},
	} {
		if code, body := doAuth(t, tc.method, p.admin+tc.path, tc.body, oldToken); code != tc.status {
			t.Errorf("%s %s %.40q: %d %s, want %d", tc.method, tc.path, tc.body, code, body, tc.status)
		}
	}
	if after := adminStateOf(p.srv); after != before {
		t.Errorf("the state changed: before %+v, after %+v", before, after)
	}
}
