// SPDX-License-Identifier: Apache-2.0

package client

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The throttle's scope on a hand-worked trace (K 2, MinRequests 20,
// times given): a destination that shares its capacity among tenants
// accepts every call of tenant light and refuses every call of tenant
// costly, which is over its share. 20 light calls, all accepted, then 60
// costly ones, all refused (or throttled locally: either way a request
// and no accept). Counted per destination, the window holds 80 requests
// and 20 accepts, p = (80 − 2·20)/81 ≈ 0.49 for every call, so the
// caller refuses half of the light calls the destination would take.
// Counted per hop tenant (Scope "hop"), light's window holds 20 and 20,
// p = 0, while costly's holds 60 and 0, p = 60/61: its load stays cut to
// K × its accepts, as the throttle is for.
func TestThrottleScopeHop(t *testing.T) {
	light, costly := sluice.Hop{Tenant: "light"}, sluice.Hop{Tenant: "costly"}
	for _, scope := range []string{ScopeDestination, ScopeHop} {
		cfg := DefaultConfig()
		cfg.Throttle.Scope = scope
		d, err := NewDests(cfg, Options{Rand: rand.New(rand.NewPCG(1, 2))})
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		call := func(hop sluice.Hop, status int) Verdict {
			now = now.Add(time.Millisecond)
			var c LiveCall
			v := d.BeginHop(&c, "dest:80", hop, now, false, time.Time{})
			if v == Send {
				c.Done(now, Result{Status: status})
			}
			return v
		}
		for range 20 {
			if v := call(light, http.StatusOK); v != Send {
				t.Fatalf("%s: a light call before any refusal: verdict %v", scope, v)
			}
		}
		for range 60 {
			call(costly, http.StatusServiceUnavailable)
		}
		pl := d.DestHop("dest:80", light).ThrottleProbability(now)
		pc := d.DestHop("dest:80", costly).ThrottleProbability(now)
		wantL, wantC := 40.0/81, 40.0/81
		if scope == ScopeHop {
			wantL, wantC = 0, 60.0/61
		}
		if !near(pl, wantL) || !near(pc, wantC) {
			t.Fatalf("%s: p light %v, costly %v; want %v, %v", scope, pl, pc, wantL, wantC)
		}
		refused := 0
		for range 100 {
			if call(light, http.StatusOK) != Send {
				refused++
			}
		}
		if (scope == ScopeHop) != (refused == 0) {
			t.Fatalf("%s: %d of 100 light calls refused by the caller", scope, refused)
		}
	}
}

// A scope other than the two is refused, naming the field.
func TestThrottleScopeInvalid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Throttle.Scope = "tenant"
	if _, err := NewDests(cfg, Options{}); err == nil {
		t.Fatal("throttle.scope tenant accepted")
	} else if want := "throttle.scope"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}
