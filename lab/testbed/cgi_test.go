// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseWork(t *testing.T) {
	tests := []struct {
		in      string
		want    []PathWork
		wantErr string
	}{
		{in: "/cgi-bin/=200000,/=1000", want: []PathWork{{"/cgi-bin/", 200000}, {"/", 1000}}},
		{in: " /a = 5 ", want: []PathWork{{"/a", 5}}},
		{in: "", wantErr: "empty"},
		{in: "/a", wantErr: "PREFIX=N"},
		{in: "/a=0", wantErr: `N="0"`},
		{in: "/a=x", wantErr: `N="x"`},
		{in: "a=5", wantErr: `prefix "a"`},
		{in: "/a=1,/a=2", wantErr: "twice"},
		{in: "/a=99999999999", wantErr: "1..10000000000"},
	}
	for _, tt := range tests {
		got, err := ParseWork(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseWork(%q) err = %v, want containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseWork(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if back, err := ParseWork(FormatWork(got)); err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("FormatWork round trip of %v = %v, %v", got, back, err)
		}
	}
}

func FuzzParseWork(f *testing.F) {
	for _, s := range []string{"/cgi-bin/=200000,/=1000", "/=1", "", "/a=1,/a=2", "=,=", "/x=-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ws, err := ParseWork(s)
		if err != nil {
			return
		}
		if err := validateWork(ws); err != nil {
			t.Fatalf("ParseWork(%q) returned an invalid list: %v", s, err)
		}
		back, err := ParseWork(FormatWork(ws))
		if err != nil || !reflect.DeepEqual(back, ws) {
			t.Fatalf("round trip of %q: %v, %v", s, back, err)
		}
	})
}

func TestCGI(t *testing.T) {
	cfg := DefaultCGIConfig()
	cfg.Work = []PathWork{{"/cgi-bin/", 40000}, {"/cgi-bin/big/", 160000}, {"/static/", 100}}
	c, err := NewCGI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	defer srv.Close()
	tests := []struct {
		path    string
		quality string
		status  int
		n       int
	}{
		{"/cgi-bin/a", "", 200, 40000},
		{"/cgi-bin/big/a", "", 200, 160000}, // longest prefix wins
		{"/cgi-bin/big/a", "0.25", 200, 40000},
		{"/cgi-bin/a", "0", 200, 4000}, // MinQuality floor
		{"/static/x", "", 200, 100},
		{"/other", "", 404, 0},
		{"/cgi-bin/a", "bad", 400, 0},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest("GET", srv.URL+tt.path, nil)
		if tt.quality != "" {
			req.Header.Set(QualityHeader, tt.quality)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s q=%q: status %d, want %d (%s)", tt.path, tt.quality, resp.StatusCode, tt.status, body)
			continue
		}
		u, err := strconv.ParseFloat(resp.Header.Get(UtilizationHeader), 64)
		if err != nil || u < 0 || u > 1 {
			t.Errorf("%s: utilization %q not in [0,1]", tt.path, resp.Header.Get(UtilizationHeader))
		}
		if tt.status != 200 {
			continue
		}
		if resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Errorf("%s: Content-Length %q for %d bytes", tt.path, resp.Header.Get("Content-Length"), len(body))
		}
		var n int
		var sum float64
		if _, err := fmt.Sscanf(string(body), "n=%d sum=%g", &n, &sum); err != nil {
			t.Fatalf("%s: body %q: %v", tt.path, body, err)
		}
		if n != tt.n || resp.Header.Get("X-Sluice-Work") != strconv.Itoa(tt.n) {
			t.Errorf("%s q=%q: n=%d (header %s), want %d", tt.path, tt.quality, n, resp.Header.Get("X-Sluice-Work"), tt.n)
		}
		// The sum of n uniforms has mean n/2 and deviation sqrt(n/12): the
		// work was really done, n numbers of it.
		if dev := math.Abs(sum - float64(n)/2); dev > 6*math.Sqrt(float64(n)/12) {
			t.Errorf("%s: sum %v of %d numbers is %v from the mean", tt.path, sum, n, dev)
		}
	}
	var meta CGIMeta
	getJSON(t, http.DefaultClient, srv.URL+"/_meta", &meta)
	if meta.Kind != "cgi" || len(meta.Work) != 3 {
		t.Errorf("/_meta = %+v", meta)
	}
	if s := c.Stats(); s.Requests != uint64(len(tests)) || s.Errors != 2 {
		t.Errorf("stats %+v, want %d requests and 2 errors", s, len(tests))
	}
}

func TestCGIConfigValidate(t *testing.T) {
	for _, ws := range [][]PathWork{nil, {{"x", 1}}, {{"/", 0}}, {{"/", 1}, {"/", 2}}} {
		if err := (CGIConfig{Work: ws}).Validate(); err == nil {
			t.Errorf("Validate(%v) = nil, want an error", ws)
		}
	}
	for _, ns := range []float64{-1, math.NaN(), math.Inf(1), 1001} {
		cfg := DefaultCGIConfig()
		cfg.CPUNsPerNumber = ns
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "cpu_ns_per_number") {
			t.Errorf("Validate with cpu_ns_per_number %g = %v, want an error naming the field", ns, err)
		}
	}
}

// TestCGICPUTime checks the CPU-time mode: a request of N numbers at
// 25 ns each runs its thread for at least N × 25 ns of CPU time, where
// summing N numbers takes about 4 ns each (the count mode would stop
// after a sixth of it), and reports the numbers it really summed.
func TestCGICPUTime(t *testing.T) {
	if !CPUTimeSupported {
		t.Skip("no thread CPU clock on " + runtime.GOOS)
	}
	const n, ns = 2000000, 25.0
	cfg := DefaultCGIConfig()
	cfg.Work, cfg.CPUNsPerNumber = []PathWork{{"/", n}}, ns
	c, err := NewCGI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadCPU()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	after, err := threadCPU()
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Duration(n * ns); after-before < want {
		t.Errorf("the request ran its thread for %v of CPU time, want at least %v", after-before, want)
	}
	var got int
	var sum float64
	if _, err := fmt.Sscanf(rec.Body.String(), "n=%d sum=%g", &got, &sum); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	if rec.Header().Get("X-Sluice-Work") != strconv.Itoa(got) || got%burnChunk != 0 {
		t.Errorf("n=%d, X-Sluice-Work %q: want the numbers summed, whole chunks of %d", got, rec.Header().Get("X-Sluice-Work"), burnChunk)
	}
	if dev := math.Abs(sum - float64(got)/2); dev > 6*math.Sqrt(float64(got)/12) {
		t.Errorf("sum %v of %d numbers is %v from the mean", sum, got, dev)
	}
	var meta CGIMeta
	_ = json.Unmarshal(mustMeta(t, c), &meta)
	if meta.CPUNsPerNumber != ns {
		t.Errorf("/_meta cpu_ns_per_number = %g, want %g", meta.CPUNsPerNumber, ns)
	}
}

// mustMeta returns the body of c's /_meta.
func mustMeta(t *testing.T, c *CGI) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("GET", "/_meta", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/_meta: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// BenchmarkSumRandom shows that CGI work is linear in N.
func BenchmarkSumRandom(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				SumRandom(r, n)
			}
		})
	}
}
