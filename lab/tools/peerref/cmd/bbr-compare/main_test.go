// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestMetricsWindowByIntendedTime(t *testing.T) {
	ms := time.Millisecond
	r := &result{from: time.Second, to: 3 * time.Second, recs: []record{
		{intended: 500 * ms, lat: 10 * ms, out: outOK},     // before the window
		{intended: time.Second, lat: 100 * ms, out: outOK}, // good
		{intended: 1500 * ms, lat: 300 * ms, out: outOK},   // answered, too late
		{intended: 2 * time.Second, out: outRejected},      // rejected
		{intended: 2500 * ms, lat: 5 * time.Second, out: outTimeout},
		{intended: 2900 * ms, out: outAborted},                // not offered
		{intended: 3 * time.Second, lat: 10 * ms, out: outOK}, // after the window
	}, samples: []sample{
		{t: 750 * ms, cpu: 100, limit: 2, rejected: 0},
		{t: time.Second, cpu: 200, limit: 3, rejected: 0},
		{t: 2 * time.Second, cpu: 400, limit: 5, rejected: 4},
		{t: 3 * time.Second, cpu: 300, limit: 4, rejected: 4},
	}}
	m := r.metrics()
	if m.offered != 4 || m.goodput != 0.5 {
		t.Errorf("offered %d goodput %v, want 4 and 0.5", m.offered, m.goodput)
	}
	if m.p50 != 100 || m.p99 != 300 {
		t.Errorf("p50 %v p99 %v, want 100 and 300", m.p50, m.p99)
	}
	if m.reject != 0.25 || m.failed != 0.25 {
		t.Errorf("reject %v failed %v, want 0.25 each", m.reject, m.failed)
	}
	if m.cpuFirst != 200 || m.cpuMean != 300 || m.cpuMax != 400 || m.limitMean != 4 {
		t.Errorf("gauge %v/%v/%v limit %v", m.cpuFirst, m.cpuMean, m.cpuMax, m.limitMean)
	}
	if math.Abs(m.shedShare-1.0/3) > 1e-12 {
		t.Errorf("shed share %v, want 1/3", m.shedShare)
	}
}

func TestFmtRatio(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want string
	}{{105, 100, "1.05 ✓"}, {89, 100, "0.89 ✗"}, {0, 0, "both 0 ✓"}, {3, 0, "3 vs 0 ✗"}} {
		if got := fmtRatio(c.a, c.b); got != c.want {
			t.Errorf("fmtRatio(%v, %v) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

func TestBalancerPrefersFewestInFlight(t *testing.T) {
	hit := make([]int, 2)
	hs := []http.Handler{
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit[0]++ }),
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit[1]++ }),
	}
	b := newBalancer(hs)
	b.inFlight[0].Store(3)
	for range 5 {
		b.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	if hit[0] != 0 || hit[1] != 5 {
		t.Errorf("hits %v, want all on the idle server", hit)
	}
	b.inFlight[0].Store(0)
	for range 4 {
		b.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	if hit[0] != 2 || hit[1] != 7 {
		t.Errorf("hits %v, want ties alternated", hit)
	}
}

func TestScheduleFollowsTheAdaptivePlan(t *testing.T) {
	pl := plan{warm: 3 * time.Second, crowd: 10 * time.Second, changeAt: 5 * time.Second, after: 10 * time.Second,
		base: 0.5, crowdX: 10, overloadX: 3}
	a, err := pl.schedule(phases[0], 400)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.At(time.Second); got != 200 {
		t.Errorf("warm-up rate %v", got)
	}
	if got := a.At(3*time.Second + 950*time.Millisecond); got != 4000 {
		t.Errorf("crowd rate after 1 s %v", got)
	}
	b, err := pl.schedule(phases[1], 400)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.At(4 * time.Second); got != 1200 {
		t.Errorf("overload rate %v", got)
	}
	if pl.at(phases[1]) != 8*time.Second || pl.length(phases[1]) != 18*time.Second || pl.length(phases[0]) != 13*time.Second {
		t.Errorf("timing %v %v %v", pl.at(phases[1]), pl.length(phases[1]), pl.length(phases[0]))
	}
}
