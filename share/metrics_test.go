// SPDX-License-Identifier: Apache-2.0

package share

import (
	"encoding/json"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSnapshotAndCollector(t *testing.T) {
	// B = 1000, a has 40 % (b_a = 400), others 60 % (b_o = 600).
	cfg := DefaultConfig()
	cfg.TotalBandwidth = 1000
	cfg.StandbyLimit = 1
	cfg.Clients = []ClientConfig{{Name: "a", Share: 40, CIDRs: []string{"10.0.0.0/8"}}}
	s := mustNew(t, cfg)
	a := id(t, s, "a")
	// avg_a = 50 < 400 and a active: unsatisfied.
	// d_a = 2·400 − 50 = 750; delay/KB = (1/750 − 1/1000)·1000 = 1/3 s.
	// d_o = 2·600 − 0 = 1200 > Â: delay/KB = 0.
	setAvg(t, s, "a", 50)
	r, err := s.Begin(t0, a) // holds a's only standby slot
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(t0, a); err == nil {
		t.Fatal("second Begin with standby_limit 1 was admitted")
	}
	if _, err := r.Delay(t0, 3000); err != nil { // last delay = 1 s
		t.Fatal(err)
	}

	snap := s.Snapshot()
	ca, co := snap.Clients[0], snap.Clients[1]
	if ca.Name != "a" || co.Name != OthersName || co.Share != 60 || co.Allocation != 600 {
		t.Fatalf("clients %+v %+v", ca, co)
	}
	if ca.Measured != 50 || ca.Available != 750 || math.Abs(ca.DelayPerKB-1.0/3) > 1e-12 ||
		math.Abs(ca.LastDelay-1) > 1e-9 || ca.Standby != 1 || !ca.Active || ca.RejectionsTotal() != 1 {
		t.Fatalf("a: %+v", ca)
	}
	if co.Available != 1200 || co.DelayPerKB != 0 || !snap.Unsatisfied || snap.MaxMeasured != 1000 || snap.Utilized != 50 {
		t.Fatalf("others %+v, snapshot %+v", co, snap)
	}
	if _, err := json.Marshal(snap); err != nil {
		t.Fatalf("snapshot is not JSON-encodable: %v", err)
	}

	reg := prometheus.NewPedanticRegistry()
	if _, err := Register(reg, s); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP sluice_share_available_bytes_per_second Available bandwidth d_i as computed at scrape time (0: requests are rejected).
# TYPE sluice_share_available_bytes_per_second gauge
sluice_share_available_bytes_per_second{client="a"} 750
sluice_share_available_bytes_per_second{client="others"} 1200
# HELP sluice_share_measured_bytes_per_second Measured bandwidth avg_i (EWMA of bytes/response time per reply).
# TYPE sluice_share_measured_bytes_per_second gauge
sluice_share_measured_bytes_per_second{client="a"} 50
sluice_share_measured_bytes_per_second{client="others"} 0
# HELP sluice_share_rejections_total Rejected requests by reason (standby, no_bandwidth, max_delay).
# TYPE sluice_share_rejections_total counter
sluice_share_rejections_total{client="a",reason="max_delay"} 0
sluice_share_rejections_total{client="a",reason="no_bandwidth"} 0
sluice_share_rejections_total{client="a",reason="standby"} 1
sluice_share_rejections_total{client="others",reason="max_delay"} 0
sluice_share_rejections_total{client="others",reason="no_bandwidth"} 0
sluice_share_rejections_total{client="others",reason="standby"} 0
# HELP sluice_share_standby Standby slots in use (requests waiting in the share mechanism).
# TYPE sluice_share_standby gauge
sluice_share_standby{client="a"} 1
sluice_share_standby{client="others"} 0
# HELP sluice_share_allocation_ratio Configured share of the total bandwidth B, as a fraction.
# TYPE sluice_share_allocation_ratio gauge
sluice_share_allocation_ratio{client="a"} 0.4
sluice_share_allocation_ratio{client="others"} 0.6
# HELP sluice_share_max_measured_bytes_per_second Maximum measured bandwidth Â = max(Â, sum of avg_j).
# TYPE sluice_share_max_measured_bytes_per_second gauge
sluice_share_max_measured_bytes_per_second 1000
# HELP sluice_share_unsatisfied 1 when some active client is below its allocation, else 0.
# TYPE sluice_share_unsatisfied gauge
sluice_share_unsatisfied 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sluice_share_available_bytes_per_second", "sluice_share_measured_bytes_per_second",
		"sluice_share_rejections_total", "sluice_share_standby", "sluice_share_allocation_ratio",
		"sluice_share_max_measured_bytes_per_second", "sluice_share_unsatisfied"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(`
# HELP sluice_share_last_delay_seconds Last delay computed for the client.
# TYPE sluice_share_last_delay_seconds gauge
sluice_share_last_delay_seconds{client="a"} 1
sluice_share_last_delay_seconds{client="others"} 0
`), "sluice_share_last_delay_seconds"); err != nil {
		t.Fatal(err)
	}

	// The label set stays bounded: a flood of unknown addresses adds no
	// series.
	before := testutil.CollectAndCount(NewCollector(s))
	for i := range 10000 {
		c := s.Matcher().MatchAddr(netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)}))
		if rr, err := s.Begin(t0, c); err == nil {
			rr.Done(t0, 100)
		}
	}
	if after := testutil.CollectAndCount(NewCollector(s)); after != before {
		t.Fatalf("series grew from %d to %d", before, after)
	}
	if n := testutil.CollectAndCount(NewCollector(s), "sluice_share_measured_bytes_per_second"); n != 2 {
		t.Fatalf("%d measured series, want 2 (a, others)", n)
	}
	r.Release()
}

func TestCollectorRejectingClientDelayIsInf(t *testing.T) {
	s := mustNew(t, testConfig()) // others has share 0
	// a active with avg 50 < 100: unsatisfied. Idle b, c, d have avg 0 <
	// b_i, so d_i = 2·b_i: 400, 600, 800, and the delay per KB is
	// 1000/d − 1: 1.5, 0.6667, 0.25 s; d_a = 150 gives 5.6667 s. others
	// (b = 0) gets d = 0: +Inf.
	setAvg(t, s, "a", 50)
	o := s.Snapshot().Clients[s.Others()]
	if !o.Rejecting || o.Available != 0 {
		t.Fatalf("others %+v, want rejecting", o)
	}
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(`
# HELP sluice_share_delay_per_kb_seconds Delay a 1000-byte reply would get at scrape time, (1/d_i - 1/Â)*1000; +Inf when d_i = 0.
# TYPE sluice_share_delay_per_kb_seconds gauge
sluice_share_delay_per_kb_seconds{client="a"} 5.666666666666667
sluice_share_delay_per_kb_seconds{client="b"} 1.5
sluice_share_delay_per_kb_seconds{client="c"} 0.6666666666666667
sluice_share_delay_per_kb_seconds{client="d"} 0.25
sluice_share_delay_per_kb_seconds{client="others"} +Inf
`), "sluice_share_delay_per_kb_seconds"); err != nil {
		t.Fatal(err)
	}
}
