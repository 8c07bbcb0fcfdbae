// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// tenants.key path names a request's tenant by its URL path (a gRPC
// call's full method name), its first 128 bytes.
func TestTenantKeyPath(t *testing.T) {
	p := build(t, `
stages:
  - {name: api, controller: auto, tenants: {fair: true, key: path, cost: service_time}}
`, Options{})
	long := "/" + strings.Repeat("a", 300)
	for _, tc := range []struct{ target, want string }{
		{"/pkg.Search/Query", "/pkg.Search/Query"},
		{"/api/items/7?x=1", "/api/items/7"},
		{long, long[:128]},
	} {
		if got := p.ClassifyRequest(request("POST", tc.target, "192.0.2.1:1"), t0).Tenant; got != tc.want {
			t.Errorf("%s: tenant %q, want %q", tc.target[:min(len(tc.target), 40)], got, tc.want)
		}
	}
}

// With tenants.cost reported, what a handler reports (sluice.ReportCost)
// is what its request costs its tenant: two APIs whose handlers report 10
// and 1 ms (and take no time at all) are estimated at 10 and 1 ms. With
// service_time the same handlers are estimated at their (near zero)
// service times, and the reports are dropped.
func TestReportedCostReachesTheStage(t *testing.T) {
	for _, cost := range []string{"reported", "service_time"} {
		p := build(t, `
stages:
  - {name: api, controller: static-concurrency, params: {limit: 4, period: 100ms}, tenants: {fair: true, key: path, cost: `+cost+`}}
`, Options{})
		took := map[bool]int{}
		h := sluice.Middleware(p)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := time.Millisecond
			if r.URL.Path == "/heavy" {
				c = 10 * time.Millisecond
			}
			took[sluice.ReportCost(r.Context(), c)]++
		}))
		for range 20 {
			for _, path := range []string{"/heavy", "/light"} {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, request("GET", path, "192.0.2.1:1"))
				if w.Code != http.StatusOK {
					t.Fatalf("%s: %d", path, w.Code)
				}
			}
		}
		p.Step(time.Now().Add(time.Second))
		costs := p.Stage("api").State(0).TenantCosts
		t.Logf("%s: reports taken %v, estimates %v", cost, took, costs)
		if cost == "reported" {
			if took[true] != 40 || math.Abs(costs["/heavy"]-0.010) > 1e-9 || math.Abs(costs["/light"]-0.001) > 1e-9 {
				t.Errorf("reported: took %v, estimates %v; want every report taken, /heavy 0.010 and /light 0.001", took, costs)
			}
			continue
		}
		if took[false] != 40 || costs["/heavy"] >= 0.005 {
			t.Errorf("service_time: took %v, estimates %v; want the reports dropped and the service time charged", took, costs)
		}
	}
}

// tenants.slot_share and tenants.deadline_budget reach the stage:
// compiled, the stage's tenants have them, and off (false, 0) by default.
func TestTenantSlotShareAndDeadlineBudget(t *testing.T) {
	for _, tc := range []struct {
		set       string // added to the stage's tenants section
		slotShare bool
		budget    float64
	}{
		{"", false, 0},
		{", slot_share: true", true, 0},
		{", deadline_budget: 2", false, 2},
	} {
		c := parse(t, `
stages:
  - {name: api, controller: auto, tenants: {fair: true, key: path, cost: service_time`+tc.set+`}}
`)
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		cs, _, err := compileStage(&c, 0, map[string]int{})
		if err != nil || cs.fp.tenants.SlotShare != tc.slotShare || cs.fp.tenants.DeadlineBudget != tc.budget {
			t.Errorf("%q: compiled %+v, %v; want slot_share %v, deadline_budget %v", tc.set, cs.fp.tenants, err, tc.slotShare, tc.budget)
		}
	}
}
