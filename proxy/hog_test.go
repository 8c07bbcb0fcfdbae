// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The proxy cancels the upstream exchange of a request its stage's hog
// rule names, or whose deadline passes, and answers it explicitly: 503
// with Retry-After and a body naming the cause for the hog, 504 for the
// deadline. The backend's handler, which would work a minute, sees its
// request's context end within a second: its remaining work is not done.
func TestProxyCancelsUpstreamAndAnswers(t *testing.T) {
	ended := make(chan time.Time, 2)
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		ended <- time.Now()
	})
	p := startProxy(t, baseConfig(b.URL, `
stages:
  - {name: api, match: {path_prefix: /}, controller: static-concurrency, params: {limit: 10, period: 50ms}, hog: {max_service_time: 300ms}}
`))
	for _, tc := range []struct {
		name, timeout string
		status        int
		body          string
		cut           time.Duration
	}{
		{"hog", "", http.StatusServiceUnavailable, "sluice: request cancelled in service", 300 * time.Millisecond},
		{"deadline", "150m", http.StatusGatewayTimeout, "deadline passed", 150 * time.Millisecond},
	} {
		hdr := map[string]string{}
		if tc.timeout != "" {
			hdr[sluice.TimeoutHeader] = tc.timeout
		}
		start := time.Now()
		code, h, body := get(t, p.url+"/work", hdr)
		var at time.Time
		select {
		case at = <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the backend still works 10 s later", tc.name)
		}
		late := at.Sub(start) - tc.cut
		t.Logf("%s: %d %q Retry-After %q; backend stopped %v after the cut", tc.name, code, strings.TrimSpace(body), h.Get("Retry-After"), late.Round(time.Millisecond))
		if code != tc.status || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, code, body, tc.status, tc.body)
		}
		if tc.name == "hog" && h.Get("Retry-After") == "" {
			t.Errorf("hog: no Retry-After")
		}
		if late > time.Second {
			t.Errorf("%s: the backend's handler stopped %v after the cut, want within 1 s", tc.name, late)
		}
	}
	if m := p.metricsText(t); !strings.Contains(m, `sluice_hog_cancelled_total{reason="max_service_time",stage="api"} 1`) {
		t.Errorf("metrics lack one max_service_time cancellation:\n%s", grepLines(m, "hog"))
	}
}
