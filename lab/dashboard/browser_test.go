// SPDX-License-Identifier: Apache-2.0

// Package dashboard tests the proxy's live dashboard (/ui) in a real
// browser: Debian's Chromium driven by chromedp, in the lab so that the
// product module does not depend on a browser driver.
package dashboard

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/stage"
)

// The dashboard in a real browser: Chromium (Debian's package, driven by
// chromedp) opens /ui of a proxy in front of a testbed queue under load,
// waits for the charts to fill, compares the numbers it shows with /state,
// changes a target through the page and sees /state change, checks the
// console, and takes screenshots at 1280×800 and at a phone's 390×844.
//
// `make test` installs Chromium when it is missing (scripts/test-deps.sh)
// and sets SLUICE_REQUIRE_BROWSER, so there the test cannot skip; run by
// hand without Chromium it skips and says why. Under -race it skips: it
// runs in the plain pass and the race detector would only slow Chromium's
// peer, the proxy, without covering more of it than the UI unit tests do.

// chromiumPath finds Chromium, or "".
func chromiumPath() string {
	for _, p := range []string{os.Getenv("SLUICE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := exec.LookPath(p); err == nil {
				return p
			}
		}
	}
	return ""
}

func TestUIBrowser(t *testing.T) {
	if raceEnabled {
		t.Skip("the browser test runs in the pass without -race")
	}
	chrome := chromiumPath()
	if chrome == "" {
		if os.Getenv("SLUICE_REQUIRE_BROWSER") != "" {
			t.Fatal("Chromium is required here (SLUICE_REQUIRE_BROWSER) but /usr/bin/chromium is missing: run scripts/test-deps.sh as root")
		}
		t.Skip("Chromium not found (/usr/bin/chromium): 'make test' installs it; or apt-get install -y chromium")
	}

	// A testbed queue: 2 workers, 4 ms each (500 req/s).
	q, err := testbed.NewQueue(testbed.QueueConfig{Workers: 2, Service: "det:4ms", Discipline: testbed.DisciplineFIFO, Size: 64, Seed: 1})
	must(t, err)
	be := httptest.NewServer(q)
	t.Cleanup(func() { be.Close(); q.Close() })
	// With a token (enforced on loopback too once set), a policer, a cpu
	// resource rule with its sensor and client shares, so that every
	// section of the page renders.
	r := startProxy(t, `listeners:
  - addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
  token: `+uiToken+`
backends:
  servers:
    - url: `+be.URL+`
      max_concurrency: 8
resources:
  - {stage: cgi, resource: cpu, sensor: {source: pool-busy}}
policer: {rate: 100000, burst: 1000, control: {q_ref: 100}}
shares:
  total_bandwidth: 100MB
  clients: [{name: local, share: 50, cidrs: [127.0.0.1]}]
stages:
  - name: cgi
    match: {path_prefix: /cgi}
    controller: voigt-cpu
  - name: api
    match: {path_prefix: /api}
    controller: static-rate
    params: {rate: 60}
  - name: web
    match: {path_prefix: /}
    controller: seda
    params: {target: 100ms, rate_max: 100000, initial_rate: 1000}
`)

	// Load: 100 req/s on /api (the static rate admits 60) and 60 req/s on
	// /, from 16 workers, until the test ends.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	jobs := make(chan string, 64)
	lc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	for range 16 {
		wg.Go(func() {
			for u := range jobs {
				if resp, err := lc.Get(u); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	wg.Go(func() {
		defer close(jobs)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var u string
			switch n % 10 {
			case 0, 1, 2, 3, 4:
				u = r.url + "/api/x"
			case 5, 6, 7:
				u = r.url + "/page"
			default:
				continue
			}
			select {
			case jobs <- u:
			default: // the workers are behind: skip rather than pile up
			}
		}
	})

	// Chromium, headless, offline, with a fresh profile.
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true)}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()

	// Collect the console's errors and warnings (and uncaught exceptions)
	// from the start; the first call starts the browser.
	var mu sync.Mutex
	var consoleErrs []string
	cctx, stopConsole := context.WithCancel(bctx)
	msgs := chromedp.Console(cctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if strings.Contains(m.Text, "400 (Bad Request)") && strings.HasSuffix(m.URL, "/stages/web/target") {
				continue // the invalid target below, on purpose
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				mu.Lock()
				consoleErrs = append(consoleErrs, m.String())
				mu.Unlock()
			}
		}
	}()
	defer func() { stopConsole(); <-consoleDone }()
	tctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	defer cancelT()
	// The token once in the address: the page takes it out of the address
	// bar; a reload without it works by the session cookie.
	must(t, chromedp.Do(tctx, chromedp.Navigate(r.admin+"/ui?token="+uiToken)))
	must(t, chromedp.Do(tctx, chromedp.Navigate(r.admin+"/ui")))
	loc, err := chromedp.Run(tctx, chromedp.Evaluate[string](`location.href + " " + (sessionStorage.getItem("sluice-token") || "")`))
	must(t, err)
	if loc != r.admin+"/ui "+uiToken {
		t.Errorf("after /ui?token=: location and stored token %q, want %q", loc, r.admin+"/ui "+uiToken)
	}

	// stageOf returns a stage's first class (its counters), setting and
	// offered requests per second over its last period.
	stageOf := func(d proxy.StateDoc, name string) (stage.ClassState, float64, float64) {
		for _, st := range d.Stages {
			if st.Name == name {
				c := st.Classes[0]
				ps := 0.0
				if l := c.Last; l != nil && l.Elapsed > 0 {
					ps = l.Offered / l.Elapsed.Seconds()
				}
				return c, st.Setting, ps
			}
		}
		t.Fatalf("no stage %q in /state", name)
		return stage.ClassState{}, 0, 0
	}

	// Wait until every chart shows at least 5 seconds of data.
	_, err = chromedp.Run(tctx, chromedp.Poll[bool](`window.sluiceUI && window.sluiceUI.charts() >= 14 && window.sluiceUI.minPoints() >= 5`,
		chromedp.WithPollingTimeout(40*time.Second)))
	must(t, err)
	hidden, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`["pool", "policer", "resources", "sensors", "shares"].filter((id) => document.getElementById(id).hidden)`))
	must(t, err)
	if len(hidden) > 0 {
		t.Errorf("sections not shown: %v", hidden)
	}
	points, err := chromedp.Run(tctx, chromedp.Evaluate[int](`window.sluiceUI.minPoints()`))
	must(t, err)
	t.Logf("charts hold %d points", points)

	// The numbers shown against /state: counters between a /state read
	// before and one after the page's (whose sample is at most a second
	// old), the static stage's setting and the target exactly. The api
	// stage's last-period rates seen by /state over the 2.5 s
	// before the page is read: the page's rate, taken over the periods
	// that ended between its last two samples, is among them.
	before := r.state(t)
	var periodRates []float64
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, _, ps := stageOf(r.state(t), "api"); ps > 0 {
			periodRates = append(periodRates, ps)
		}
	}
	shown, err := chromedp.Run(tctx, chromedp.Evaluate[map[string]float64](`(() => {
		const out = {};
		for (const st of document.querySelectorAll("section.stage")) {
			const n = st.dataset.stage;
			out[n + ".setting"] = parseFloat(st.querySelector('[data-field="setting"]').dataset.v);
			for (const tr of st.querySelectorAll("tr[data-class]")) {
				for (const td of tr.querySelectorAll("td[data-field]")) {
					const v = td.querySelector("[data-v]");
					if (v && v.dataset.v !== "") out[n + "." + tr.dataset.class + "." + td.dataset.field] = parseFloat(v.dataset.v);
				}
			}
		}
		for (const tr of document.querySelectorAll("tr[data-server]")) {
			out["server.max_concurrency"] = parseFloat(tr.querySelector('[data-field="max_concurrency"] [data-v]').dataset.v);
			out["server.in_flight"] = parseFloat(tr.querySelector('[data-field="in_flight"] [data-v]').dataset.v);
		}
		return out;
	})()`))
	must(t, err)
	after := r.state(t)
	t.Logf("shown: %v", shown)
	for _, name := range []string{"api", "web"} { // cgi sees no traffic
		a, _, _ := stageOf(before, name)
		b, set, _ := stageOf(after, name)
		for _, f := range []struct {
			field  string
			lo, hi uint64
		}{{"offered", a.Offered, b.Offered}, {"admitted", a.Admitted, b.Admitted}, {"rejected", a.Rejected, b.Rejected}, {"completed", a.Completed, b.Completed}} {
			v, ok := shown[name+".default."+f.field]
			if !ok || v < float64(f.lo) || v > float64(f.hi) {
				t.Errorf("stage %s: the page shows %s = %v (present %v), /state had %d before and %d after", name, f.field, v, ok, f.lo, f.hi)
			}
		}
		if name == "api" {
			if shown["api.setting"] != 60 || set != 60 {
				t.Errorf("stage api: setting shown %v, /state %v, want 60", shown["api.setting"], set)
			}
			// Per-second rates: the page's among the last periods' (with
			// a margin for a span of two periods), and offered = admitted
			// + rejected, as in every period of a rate gate.
			lo, hi := slices.Min(append(periodRates, math.Inf(1))), slices.Max(append(periodRates, 0))
			if ps := shown["api.default.offered_ps"]; len(periodRates) == 0 || ps < 0.8*lo || ps > 1.2*hi {
				t.Errorf("stage api: offered per second shown %.1f, /state's last periods ranged over [%.1f, %.1f]", ps, lo, hi)
			}
			o, ad, rj := shown["api.default.offered_ps"], shown["api.default.admitted_ps"], shown["api.default.rejected_ps"]
			if math.Abs(o-ad-rj) > 0.01*o+0.01 {
				t.Errorf("stage api: per second shown offered %.2f ≠ admitted %.2f + rejected %.2f", o, ad, rj)
			}
			if shown["api.default.rejected"] <= 0 {
				t.Errorf("stage api: the page shows no rejection against a static rate of 60 under 100 req/s")
			}
		}
	}
	if shown["server.max_concurrency"] != 8 || shown["server.in_flight"] > 8 {
		t.Errorf("backend shown with in flight %v and limit %v, want limit 8", shown["server.in_flight"], shown["server.max_concurrency"])
	}

	shots := t.ArtifactDir()
	shot := func(name string) {
		buf, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		must(t, err)
		p := filepath.Join(shots, name)
		must(t, os.WriteFile(p, buf, 0o644))
		t.Logf("screenshot: %s", p)
	}
	shot("ui-1280x800.png")

	// Change the web stage's target through the page. The page redraws
	// the stages every period, so a node found by id may be replaced
	// before the next action reaches it ("No node with given id found"):
	// a few attempts, each finding the nodes afresh.
	var setErr error
	for range 5 {
		if setErr = chromedp.Do(tctx, chromedp.SetValue(chromedp.ID("target-web"), "250ms"), chromedp.Click(chromedp.ID("target-set-web"))); setErr == nil {
			break
		}
		t.Logf("setting the target through the page: %v (trying again)", setErr)
	}
	must(t, setErr)
	eventually(t, "/state to show the target set through the page", func() bool {
		for _, st := range r.state(t).Stages {
			if st.Name == "web" {
				return st.Target == "250ms"
			}
		}
		return false
	})
	_, err = chromedp.Run(tctx, chromedp.Poll[bool](`document.querySelector('section[data-stage="web"] [data-field="target"]').textContent === "250ms"`,
		chromedp.WithPollingTimeout(10*time.Second)))
	must(t, err)
	msg, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(`section[data-stage="web"] .tgt-msg`)))
	must(t, err)
	if !strings.Contains(msg, "100ms → 250ms") {
		t.Errorf("the page's message after the change: %q", msg)
	}
	// An invalid target gets the API's own error, and /state keeps 250ms.
	must(t, chromedp.Do(tctx, chromedp.SetValue(chromedp.ID("target-web"), "-5s"), chromedp.Click(chromedp.ID("target-set-web"))))
	_, err = chromedp.Run(tctx, chromedp.Poll[bool](`document.querySelector('section[data-stage="web"] .tgt-msg').classList.contains("err")`,
		chromedp.WithPollingTimeout(10*time.Second)))
	must(t, err)
	msg, err = chromedp.Run(tctx, chromedp.Text(chromedp.CSS(`section[data-stage="web"] .tgt-msg`)))
	must(t, err)
	if !strings.Contains(msg, `target: "-5s" is invalid`) {
		t.Errorf("the page's message for an invalid target: %q", msg)
	}

	// A phone-sized viewport: no horizontal scrolling of the page itself.
	must(t, chromedp.Do(tctx, chromedp.EmulateViewport(390, 844), chromedp.Sleep(1500*time.Millisecond)))
	overflow, err := chromedp.Run(tctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	must(t, err)
	if overflow {
		t.Error("at 390×844 the page is wider than the viewport")
	}
	shot("ui-390x844.png")

	time.Sleep(200 * time.Millisecond) // let the last console messages arrive
	mu.Lock()
	defer mu.Unlock()
	for _, e := range consoleErrs {
		t.Errorf("browser console: %s", e)
	}
}
