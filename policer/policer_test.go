// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"math"
	"net/netip"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

func mustNew(t *testing.T, cfg Config) *Policer {
	t.Helper()
	p, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// step is one scripted event on a policer: a connection (want is its
// verdict) or, when setRate is not NaN, a rate change.
type step struct {
	ms      float64
	src     string
	want    Verdict
	setRate float64
}

func conn(ms float64, src string, want Verdict) step {
	return step{ms: ms, src: src, want: want, setRate: math.NaN()}
}
func rate(ms, r float64) step { return step{ms: ms, setRate: r} }

func run(t *testing.T, p *Policer, steps []step) {
	t.Helper()
	for i, s := range steps {
		if !math.IsNaN(s.setRate) {
			if err := p.SetRate(at(s.ms), s.setRate); err != nil {
				t.Fatalf("step %d: SetRate(%v): %v", i, s.setRate, err)
			}
			continue
		}
		var a netip.Addr
		if s.src != "" {
			a = netip.MustParseAddr(s.src)
		}
		if got := p.Admit(at(s.ms), a); got != s.want {
			t.Fatalf("step %d (t=%vms src=%q): Admit = %v, want %v", i, s.ms, s.src, got, s.want)
		}
	}
}

func TestGlobalBucketAndRateChanges(t *testing.T) {
	A, R := Admitted, RejectedRate
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"burst then refill", Config{Rate: 10, Burst: 2}, []step{
			conn(0, "", A), conn(0, "", A), conn(0, "", R), // bucket of 2 at one instant
			conn(50, "", R),  // half a token
			conn(100, "", A), // one token after 1/10 s
			conn(100, "", R),
		}},
		{"raise rate", Config{Rate: 1, Burst: 1}, []step{
			conn(0, "", A), conn(10, "", R),
			rate(10, 1000),    // from now on 1 token per ms
			conn(10.5, "", R), // half a token since the change
			conn(11, "", A),
			conn(12.5, "", A), conn(12.5, "", R),
		}},
		{"lower rate to zero", Config{Rate: 1000, Burst: 3}, []step{
			conn(0, "", A),
			rate(0, 0), // the two tokens left are still spent, then nothing
			conn(1000, "", A), conn(2000, "", A), conn(60000, "", R),
		}},
		{"infinite rate admits all", Config{Rate: math.Inf(1), Burst: 1}, []step{
			conn(0, "", A), conn(0, "", A), conn(0, "", A),
			rate(0, 1), // back to finite: a full bucket of 1
			conn(0, "", A), conn(0, "", R),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { run(t, mustNew(t, tt.cfg), tt.steps) })
	}
}

func TestSetRateRejectsBadRate(t *testing.T) {
	p := mustNew(t, DefaultConfig())
	for _, r := range []float64{math.NaN(), -1, math.Inf(-1)} {
		if err := p.SetRate(t0, r); err == nil {
			t.Errorf("SetRate(%v) = nil, want an error", r)
		}
	}
	if p.Rate() != DefaultRate {
		t.Errorf("Rate after bad SetRate = %v, want unchanged %v", p.Rate(), DefaultRate)
	}
}

func TestCollectAndStats(t *testing.T) {
	cfg := Config{Rate: 10, Burst: 2, Sources: SourceConfig{Rules: []SourceRule{{Prefix: "192.0.2.0/24", Rate: 0}}}}
	p := mustNew(t, cfg)
	run(t, p, []step{
		conn(0, "198.51.100.1", Admitted), conn(0, "198.51.100.1", Admitted), conn(0, "198.51.100.1", RejectedRate),
		conn(0, "192.0.2.9", RejectedSource),
	})
	m := p.Collect(at(1000))
	if m.Elapsed != time.Second || m.Arrivals != 4 || m.Admitted != 2 || m.Rejected != 2 {
		t.Errorf("first Collect = %+v, want Elapsed 1s, 4 arrivals, 2 admitted, 2 rejected", m)
	}
	if !math.IsNaN(m.Utilization) || !math.IsNaN(m.MeanRT) || m.Queue != 0 || m.Completed != 0 {
		t.Errorf("first Collect = %+v, want NaN utilization and response times, zero queue and completions", m)
	}
	run(t, p, []step{conn(1100, "198.51.100.1", Admitted)})
	m = p.Collect(at(1500))
	if m.Elapsed != 500*time.Millisecond || m.Arrivals != 1 || m.Admitted != 1 || m.Rejected != 0 {
		t.Errorf("second Collect = %+v, want Elapsed 500ms, 1 arrival, 1 admitted", m)
	}
	if m := p.Collect(at(1400)); m.Elapsed != 0 || m.Arrivals != 0 {
		t.Errorf("Collect going back in time = %+v, want zero Elapsed and counts", m)
	}
	s := p.Stats()
	want := Stats{Rate: 10, Burst: 2, Offered: 5, Admitted: 3, RejectedRate: 1, RejectedSource: 1}
	if s != want {
		t.Errorf("Stats = %+v, want %+v", s, want)
	}
	if s.Rejected() != 2 {
		t.Errorf("Rejected() = %d, want 2", s.Rejected())
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Admitted: "admitted", RejectedRate: "rate", RejectedSource: "source", 9: "Verdict(9)"} {
		if got := v.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", v, got, want)
		}
	}
}
