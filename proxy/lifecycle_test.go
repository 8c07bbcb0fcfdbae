// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestReloadUnderLoadLosesNothing(t *testing.T) {
	be := okBackend(t)
	p := startProxy(t, baseConfig(be.URL, sedaStage))
	orig, err := os.ReadFile(p.file)
	must(t, err)
	variants := []string{
		strings.Replace(string(orig), "target: 1s", "target: 2s", 1),
		// a changed pool: a new Pool (and transport) takes over
		strings.Replace(string(orig), "    - url: "+be.URL+"\n", "    - url: "+be.URL+"\n      max_concurrency: 100\n", 1),
		string(orig) + "  - name: other\n    match: {path_prefix: /other/}\n",
		string(orig),
	}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			path := []string{"/api/a", "/other/b", "/x", "/api/c"}[w]
			for i := 0; i < 5000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get(p.url + path)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, resp.Status+" "+path+": "+strings.TrimSpace(string(body)))
					continue
				}
				ok.Add(1)
			}
		})
	}
	for i := range 8 {
		must(t, os.WriteFile(p.file, []byte(variants[i%len(variants)]), 0o644))
		if err := p.srv.Reload(); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		// let some requests through on each generation
		start := ok.Load()
		eventually(t, "requests under the new config", func() bool { return ok.Load() >= start+100 })
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed across reloads; first: %v", failed.Load(), ok.Load()+failed.Load(), firstErr.Load())
	}
	if st := p.state(t); st.ConfigVersion != 9 {
		t.Errorf("config version %d, want 9", st.ConfigVersion)
	}
}

func TestReloadKeepsUnchangedStageState(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, sedaStage))
	code, _ := do(t, http.MethodPut, p.admin+"/stages/api/target", `{"target":"250ms"}`)
	if code != 200 {
		t.Fatal(code)
	}
	orig, _ := os.ReadFile(p.file)
	must(t, os.WriteFile(p.file, append(orig, "  - name: extra\n    match: {path_prefix: /extra/}\n"...), 0o644))
	must(t, p.srv.Reload())
	// the api stage was reused as is: the target set at run time stays
	if st := p.state(t); st.Stages[0].Target != "250ms" {
		t.Errorf("target after reload %q, want the reused stage's 250ms", st.Stages[0].Target)
	}
}

func TestGracefulDrain(t *testing.T) {
	url, release, arrived := blockingBackend(t)
	p := startProxy(t, baseConfig(url, "drain_timeout: 20s\n"))
	res := goGet(p.url + "/slow")
	eventually(t, "the request at the backend", func() bool { return arrived.Load() == 1 })
	p.cancel() // what SIGTERM does
	// The listener stops accepting while the request is in flight.
	eventually(t, "the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case r := <-p.done:
		t.Fatalf("Serve returned %v before the in-flight request finished", r)
	default:
	}
	release()
	if a := <-res; a.code != 200 || a.body != "ok" || a.err != nil {
		t.Errorf("in-flight request: %d %q (%v)", a.code, a.body, a.err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		p.done <- nil // for the cleanup
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return after the drain")
	}
}

func TestDrainTimeoutClosesWhatIsLeft(t *testing.T) {
	url, _, arrived := blockingBackend(t)
	p := startProxy(t, baseConfig(url, "drain_timeout: 100ms\n"))
	forever := goGet(p.url + "/forever")
	eventually(t, "the request at the backend", func() bool { return arrived.Load() == 1 })
	p.cancel()
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		p.done <- nil
	case <-time.After(testTimeout):
		t.Fatal("Serve did not return after drain_timeout")
	}
	if a := <-forever; a.err == nil {
		t.Error("the request cut at drain_timeout reported success")
	}
}

// stageClass returns the totals of a stage's class from /state.
func stageClass(t *testing.T, p *running, stage, class string) (offered, rejected, shadow, completed, errs uint64) {
	t.Helper()
	for _, s := range p.state(t).Stages {
		if s.Name != stage {
			continue
		}
		for _, c := range s.Classes {
			if c.Name == class {
				return c.Offered, c.Rejected, c.ShadowRejected, c.Completed, c.Errors
			}
		}
	}
	t.Fatalf("no stage %s class %s", stage, class)
	return
}

const tinyRate = `stages:
  - name: api
    match: {path_prefix: /}
    controller: static-rate
    params: {rate: 1, period: 100ms}
    burst: 1
`

func TestRejectionAndShadowMode(t *testing.T) {
	be := backend(t, echoHeaders)
	for _, shadow := range []bool{false, true} {
		extra := tinyRate
		if shadow {
			extra += "shadow: true\n"
		}
		p := startProxy(t, baseConfig(be.URL, extra))
		codes := map[int]int{}
		var retryAfter string
		for range 20 {
			code, h, _ := get(t, p.url+"/", nil)
			codes[code]++
			if code == 503 {
				retryAfter = h.Get("Retry-After")
			}
		}
		if shadow {
			if codes[200] != 20 {
				t.Errorf("shadow: statuses %v, want every request admitted", codes)
			}
			eventually(t, "shadow rejections to be recorded", func() bool {
				_, _, sh, _, _ := stageClass(t, p, "api", "default")
				return sh > 0
			})
			continue
		}
		if codes[503] == 0 || codes[200] == 0 || retryAfter == "" {
			t.Errorf("no shadow: statuses %v, Retry-After %q; want some of each", codes, retryAfter)
		}
		eventually(t, "rejections to be recorded", func() bool {
			_, rej, _, _, _ := stageClass(t, p, "api", "default")
			return rej > 0
		})
	}
}

func TestSpoofedClassHeaderFromUntrustedPeer(t *testing.T) {
	be := backend(t, echoHeaders)
	const classes = `classes:
  order: [gold, bulk]
  trusted_proxies: [TRUSTED]
  rules:
    - class: gold
      header: {name: X-Tier, value: gold}
stages:
  - name: api
    match: {path_prefix: /}
    controller: none
`
	for _, c := range []struct {
		trusted, want string
	}{{"10.0.0.0/8", "bulk"}, {"127.0.0.0/8", "gold"}} {
		p := startProxy(t, baseConfig(be.URL, strings.Replace(classes, "TRUSTED", c.trusted, 1)))
		for range 3 {
			get(t, p.url+"/", map[string]string{"X-Tier": "gold"})
		}
		eventually(t, "the class counts to be collected", func() bool {
			off, _, _, _, _ := stageClass(t, p, "api", c.want)
			return off == 3
		})
		other := map[string]string{"gold": "bulk", "bulk": "gold"}[c.want]
		if off, _, _, _, _ := stageClass(t, p, "api", other); off != 0 {
			t.Errorf("trusted %s: %d requests in class %s", c.trusted, off, other)
		}
	}
}

func TestMeasurementFromArrivalToLastByte(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/err" {
			http.Error(w, "boom", 500)
			return
		}
		_, _ = io.WriteString(w, "part1")
		http.NewResponseController(w).Flush()
		time.Sleep(30 * time.Millisecond) // after the headers: still part of the response time
		_, _ = io.WriteString(w, "part2")
	})
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: ok
    match: {path_prefix: /ok}
    controller: static-rate
    params: {rate: 1000, period: 50ms}
  - name: err
    match: {path_prefix: /err}
    controller: static-rate
    params: {rate: 1000, period: 50ms}
`))
	for range 3 {
		get(t, p.url+"/ok", nil)
		if code, _, _ := get(t, p.url+"/err", nil); code != 500 {
			t.Fatalf("/err: %d", code)
		}
	}
	var mean, p90 float64
	eventually(t, "a period with the samples", func() bool {
		for _, s := range p.state(t).Stages {
			if s.Name == "ok" && s.Classes[0].Last != nil && s.Classes[0].Last.Samples > 0 {
				mean, p90 = s.Classes[0].Last.MeanMS, s.Classes[0].Last.P90MS
				return true
			}
		}
		return false
	})
	if mean < 30 || p90 < 30 {
		t.Errorf("response time mean %.1f ms p90 %.1f ms; the body took ≥ 30 ms after the headers", mean, p90)
	}
	eventually(t, "the errors to be counted", func() bool {
		_, _, _, done, errs := stageClass(t, p, "err", "default")
		return done == 3 && errs == 3
	})
	for _, s := range p.state(t).Stages {
		if s.Name == "err" && s.Classes[0].Last != nil && s.Classes[0].Last.Samples != 0 {
			t.Errorf("5xx responses entered the response-time window: %+v", s.Classes[0].Last)
		}
	}
}

func TestOverloadControlLoopSheds(t *testing.T) {
	// A backend with 2 workers of 20 ms (100 req/s) behind a SEDA stage
	// with a 60 ms p90 target, under 24 closed-loop clients for a bounded
	// time: the controller must lower the rate and reject. Margins are
	// generous; no timing is asserted.
	sem := make(chan struct{}, 2)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		time.Sleep(20 * time.Millisecond)
		<-sem
	})
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: api
    match: {path_prefix: /}
    controller: seda
    params:
      target: 60ms
      nreq: 20
      timeout: 200ms
      initial_rate: 1000
`))
	var rejected, admitted atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/", nil)
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 503:
					rejected.Add(1)
					time.Sleep(10 * time.Millisecond)
				case 200:
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	st := p.state(t).Stages[0]
	if rejected.Load() == 0 || admitted.Load() == 0 {
		t.Errorf("admitted %d rejected %d; want both under 2.4× overload", admitted.Load(), rejected.Load())
	}
	if st.Setting >= 1000 {
		t.Errorf("rate setting %v, want below its initial 1000 req/s", st.Setting)
	}
}

func TestServeTwiceAndCheck(t *testing.T) {
	be := backend(t, echoHeaders)
	cfg, err := Parse("c.yaml", []byte(baseConfig(be.URL, "")))
	must(t, err)
	if err := Check(cfg); err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, testOptions(t))
	must(t, err)
	if err := srv.Reload(); err == nil || !strings.Contains(err.Error(), "no configuration file") {
		t.Errorf("Reload without a file: %v", err)
	}
}

func TestBackendReportedUtilization(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sluice-Utilization", "0.5")
		_, _ = io.WriteString(w, "ok")
	})
	p := startProxy(t, baseConfig(be.URL, `utilization:
  source: backend-header
stages:
  - name: cpu
    match: {path_prefix: /}
    controller: voigt-cpu
    params: {period: 50ms}
`))
	for range 5 {
		code, h, _ := get(t, p.url+"/", nil)
		if code != 200 || h.Get("X-Sluice-Utilization") != "" {
			t.Fatalf("status %d, utilization header %q (must be consumed by the proxy)", code, h.Get("X-Sluice-Utilization"))
		}
	}
	eventually(t, "the reported utilization to reach the stage", func() bool {
		for _, s := range p.state(t).Stages {
			if s.Name == "cpu" && s.Classes[0].Last != nil && s.Classes[0].Last.Utilization != nil {
				return *s.Classes[0].Last.Utilization == 0.5
			}
		}
		return false
	})
}

// Through the proxy, a static-rate stage with ratelimit_headers advertises
// its bucket on the backend's answer and on the rejection, and the
// rejection's Retry-After is the time to the next token: 5 s at 0.2/s.
func TestProxyRateLimitHeadersAndRetryAfter(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: api
    match: {path_prefix: /}
    controller: static-rate
    params: {rate: 0.2}
    burst: 1
    ratelimit_headers: true
`))
	code, h, _ := get(t, p.url+"/", nil)
	if code != 200 || h.Get("RateLimit-Policy") != `"api";q=1;w=5` || h.Get("RateLimit") != `"api";r=0;t=5` {
		t.Fatalf("admitted: %d RateLimit-Policy %q RateLimit %q", code, h.Get("RateLimit-Policy"), h.Get("RateLimit"))
	}
	code, h, _ = get(t, p.url+"/", nil)
	if code != 503 || h.Get("Retry-After") != "5" || h.Get("RateLimit") != `"api";r=0;t=5` {
		t.Fatalf("rejected: %d Retry-After %q RateLimit %q", code, h.Get("Retry-After"), h.Get("RateLimit"))
	}
}
