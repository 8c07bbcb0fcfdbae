// SPDX-License-Identifier: Apache-2.0

package classify

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func hopClassifier(t testing.TB) *Classifier {
	t.Helper()
	c, err := New(Config{
		Rules:          []ClassRule{{Class: 1, Header: &Match{Name: "X-Batch", Trusted: false}}},
		DefaultClass:   0,
		TrustedProxies: mustPrefixes(t, "10.0.0.0/8"),
		Hop: &HopConfig{PriorityHeader: "x-sluice-priority", TenantHeader: sluice.TenantHeader, TimeoutHeader: sluice.TimeoutHeader,
			Classes: []string{"gold", "silver", "bronze"}, MinTimeout: time.Millisecond, MaxTimeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClassifyHop(t *testing.T) {
	c := hopClassifier(t)
	const trusted, client = "10.1.2.3:5000", "192.0.2.7:5000"
	for _, tc := range []struct {
		name      string
		remote    string
		hdr       map[string][]string
		class     int
		priority  string
		tenant    string
		timeout   time.Duration // -1: none
		invalid   HopHeader
		untrusted HopHeader
	}{
		{"nothing", client, nil, 0, "", "", -1, 0, 0},
		{"trusted priority wins over rules", trusted, map[string][]string{"X-Sluice-Priority": {"bronze"}, "X-Batch": {"1"}}, 2, "bronze", "", -1, 0, 0},
		{"criticality", trusted, map[string][]string{"X-Sluice-Priority": {"SHEDDABLE"}}, 2, "SHEDDABLE", "", -1, 0, 0},
		{"untrusted priority: rules", client, map[string][]string{"X-Sluice-Priority": {"gold"}, "X-Batch": {"1"}}, 1, "", "", -1, 0, HopPriority},
		{"untrusted tenant", client, map[string][]string{"X-Sluice-Tenant": {"acme"}}, 0, "", "", -1, 0, HopTenant},
		{"trusted tenant", trusted, map[string][]string{"X-Sluice-Tenant": {"acme"}}, 0, "", "acme", -1, 0, 0},
		{"unknown class", trusted, map[string][]string{"X-Sluice-Priority": {"platinum"}}, 0, "", "", -1, HopPriority, 0},
		{"empty priority", trusted, map[string][]string{"X-Sluice-Priority": {""}}, 0, "", "", -1, HopPriority, 0},
		{"two priority lines", trusted, map[string][]string{"X-Sluice-Priority": {"gold", "bronze"}}, 0, "", "", -1, HopPriority, 0},
		{"list in one line", trusted, map[string][]string{"X-Sluice-Priority": {"gold,bronze"}}, 0, "", "", -1, HopPriority, 0},
		{"bad tenant", trusted, map[string][]string{"X-Sluice-Tenant": {"a b"}}, 0, "", "", -1, HopTenant, 0},
		{"timeout from anyone", client, map[string][]string{"X-Sluice-Timeout": {"250m"}}, 0, "", "", 250 * time.Millisecond, 0, 0},
		{"timeout clamped up", client, map[string][]string{"X-Sluice-Timeout": {"99999999H"}}, 0, "", "", time.Minute, 0, 0},
		{"negative timeout clamped", client, map[string][]string{"X-Sluice-Timeout": {"-5S"}}, 0, "", "", time.Millisecond, 0, 0},
		{"zero timeout clamped", client, map[string][]string{"X-Sluice-Timeout": {"0n"}}, 0, "", "", time.Millisecond, 0, 0},
		{"malformed timeout", client, map[string][]string{"X-Sluice-Timeout": {"5s"}}, 0, "", "", -1, HopTimeout, 0},
		{"two timeout lines", client, map[string][]string{"X-Sluice-Timeout": {"1S", "2S"}}, 0, "", "", -1, HopTimeout, 0},
		{"all at once", trusted, map[string][]string{"X-Sluice-Priority": {"silver"}, "X-Sluice-Tenant": {"t-1"}, "X-Sluice-Timeout": {"3S"}}, 1, "silver", "t-1", 3 * time.Second, 0, 0},
	} {
		r := req("GET", "/", tc.remote, tc.hdr)
		_, class, h := c.ClassifyHop(r)
		timeout := time.Duration(-1)
		if h.HasTimeout {
			timeout = h.Timeout
		}
		if class != tc.class || h.Priority != tc.priority || h.Tenant != tc.tenant || timeout != tc.timeout ||
			h.Invalid != tc.invalid || h.Untrusted != tc.untrusted {
			t.Errorf("%s: class %d, %+v; want class %d priority %q tenant %q timeout %v invalid %b untrusted %b",
				tc.name, class, h, tc.class, tc.priority, tc.tenant, tc.timeout, tc.invalid, tc.untrusted)
		}
	}
	// Without a hop configuration nothing is read.
	plain, _ := New(Config{TrustedProxies: mustPrefixes(t, "10.0.0.0/8")})
	_, class, h := plain.ClassifyHop(req("GET", "/", trusted, map[string][]string{"X-Sluice-Priority": {"x"}}))
	if class != 0 || h != (HopInfo{}) {
		t.Errorf("no hop config: class %d %+v", class, h)
	}
	if _, err := New(Config{Hop: &HopConfig{MinTimeout: time.Second, MaxTimeout: time.Millisecond}}); err == nil {
		t.Error("inverted timeout bounds accepted")
	}
}

// ClassifyHop does not allocate, with every header present.
func TestClassifyHopAllocs(t *testing.T) {
	c := hopClassifier(t)
	r := req("GET", "/", "10.1.2.3:5000", map[string][]string{"X-Sluice-Priority": {"silver"}, "X-Sluice-Tenant": {"t-1"},
		"X-Sluice-Timeout": {"3S"}, "X-Batch": {"1"}})
	if n := testing.AllocsPerRun(100, func() { c.ClassifyHop(r) }); n != 0 {
		t.Fatalf("ClassifyHop allocates %v times", n)
	}
}

// FuzzClassifyHop: any header values, from a trusted or an untrusted
// peer, classify without a panic into a valid class, and an untrusted
// peer's priority and tenant are never believed.
func FuzzClassifyHop(f *testing.F) {
	f.Add("gold", "acme", "250m", true)
	f.Add("CRITICAL_PLUS", "", "-1H", false)
	f.Add("\xff", "a b", "99999999999999999999999S", true)
	c := hopClassifier(f)
	f.Fuzz(func(t *testing.T, prio, tenant, timeout string, trusted bool) {
		remote := "192.0.2.7:1"
		if trusted {
			remote = "10.0.0.1:1"
		}
		r := req("GET", "/", remote, map[string][]string{"X-Sluice-Priority": {prio}, "X-Sluice-Tenant": {tenant}, "X-Sluice-Timeout": {timeout}})
		_, class, h := c.ClassifyHop(r)
		if class < 0 || class > 2 {
			t.Fatalf("class %d", class)
		}
		if !trusted && (h.Priority != "" || h.Tenant != "") {
			t.Fatalf("untrusted peer believed: %+v", h)
		}
		if h.HasTimeout && (h.Timeout < time.Millisecond || h.Timeout > time.Minute) {
			t.Fatalf("timeout %v outside its bounds", h.Timeout)
		}
		if h.Tenant != "" && !sluice.ValidTenant(h.Tenant) {
			t.Fatalf("invalid tenant %q believed", h.Tenant)
		}
	})
}
