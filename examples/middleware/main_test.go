// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/policy"
)

// start runs the example service in-process on 127.0.0.1 and returns its
// base URL; the service stops (and must stop cleanly) at the end of the
// test.
func start(t *testing.T, src string) string {
	t.Helper()
	cfg, err := policy.Parse("policy.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, ln, *cfg, time.Millisecond, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("service did not stop")
		}
	})
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestDefaultPolicyServes(t *testing.T) {
	base := start(t, string(defaultPolicy))
	code, _, body := get(t, base+"/search?q=go")
	var res struct {
		Quality float64
		Results int
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || code != 200 || res.Quality != 1 || res.Results != 10 {
		t.Fatalf("search: %d %q", code, body)
	}
	if code, _, body := get(t, base+"/orders"); code != 200 || !strings.Contains(body, "ok") {
		t.Fatalf("orders: %d %q", code, body)
	}
	_, _, metrics := get(t, base+"/metrics")
	for _, want := range []string{`sluice_requests_total{class="interactive",outcome="offered",stage="search"}`,
		`sluice_quality{stage="search"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	code, _, state := get(t, base+"/state")
	if code != 200 || !strings.Contains(state, `"name":"orders"`) {
		t.Fatalf("state: %d %.200s", code, state)
	}
}

// With a rate of one request per 1000 s and a bucket of one, the second
// request is rejected with 503, Retry-After and (asked for) JSON; the
// batch class is limited separately from the interactive one.
func TestRejection(t *testing.T) {
	base := start(t, strings.Replace(string(defaultPolicy), "params: {target: 200ms, nreq: 50}",
		"burst: 1\n    params: {target: 200ms, nreq: 50, initial_rate: 0.001, rate_min: 0.001}", 1))
	if code, _, body := get(t, base+"/orders"); code != 200 {
		t.Fatalf("first: %d %q", code, body)
	}
	code, hdr, body := get(t, base+"/orders", "Accept", "application/json")
	var j struct {
		Error, Stage, Class string
		RetryAfter          int `json:"retry_after_s"`
	}
	if err := json.Unmarshal([]byte(body), &j); err != nil || code != 503 || hdr.Get("Retry-After") == "" ||
		j.Error != "overloaded" || j.Stage != "orders" || j.Class != "interactive" || j.RetryAfter < 1 || j.RetryAfter > 3 {
		t.Fatalf("second: %d %v %q", code, hdr, body)
	}
	if code, _, _ := get(t, base+"/orders", "X-Batch", "1"); code != 200 {
		t.Fatalf("batch class shares the interactive bucket: %d", code)
	}
	if code, _, body := get(t, base+"/orders", "X-Batch", "1"); code != 503 || !strings.Contains(body, "orders") {
		t.Fatalf("batch: %d %q", code, body)
	}
	// Unmatched paths go to the implicit stage, which admits everything.
	if code, _, _ := get(t, base+"/nothing"); code != 404 {
		t.Fatalf("unmatched: %d", code)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for src, want := range map[string]string{
		"stages: [{name: a, controller: nope}]": "policy.yaml:1: stages[0].controller",
		"stagez: []":                            `policy.yaml:1: stagez: unknown field "stagez"`,
	} {
		if _, err := policy.Parse("policy.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", src, err)
		}
	}
}
