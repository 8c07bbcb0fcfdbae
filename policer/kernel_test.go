// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"errors"
	"math"
	"net/netip"
	"testing"
	"time"
)

// fakeKernel records the rates set and reports a drop count.
type fakeKernel struct {
	rates   []float64
	dropped uint64
	err     error
}

func (k *fakeKernel) SetRate(r float64) error {
	if k.err != nil {
		return k.err
	}
	k.rates = append(k.rates, r)
	return nil
}
func (k *fakeKernel) Dropped() (global, source uint64, err error) { return k.dropped, 0, k.err }

func TestUseKernel(t *testing.T) {
	t0 := time.Unix(0, 0)
	p, err := New(Config{Rate: 1, Burst: 1, Sources: SourceConfig{Rules: []SourceRule{{Prefix: "192.0.2.0/24", Rate: 0}}}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{err: errors.New("no")}
	if err := p.UseKernel(k, false); err == nil || p.InKernel() {
		t.Fatal("UseKernel with a failing kernel: accepted")
	}
	k.err = nil
	if err := p.UseKernel(k, false); err != nil || !p.InKernel() {
		t.Fatal(err)
	}
	if len(k.rates) != 1 || k.rates[0] != 1 {
		t.Fatalf("kernel rates %v, want [1] (the rate in force)", k.rates)
	}
	// The global bucket is the kernel's: no user-space rate rejection;
	// source rules still apply.
	for range 5 {
		if v := p.Admit(t0, netip.MustParseAddr("198.51.100.1")); v != Admitted {
			t.Fatalf("verdict %v with the global bucket in the kernel", v)
		}
	}
	if v := p.Admit(t0, netip.MustParseAddr("192.0.2.1")); v != RejectedSource {
		t.Fatalf("denied source: %v", v)
	}
	if err := p.SetRate(t0, 7); err != nil || k.rates[len(k.rates)-1] != 7 || p.Rate() != 7 {
		t.Fatalf("SetRate(7): %v, kernel %v, rate %v", err, k.rates, p.Rate())
	}
	k.dropped = 40
	m := p.Collect(t0.Add(time.Second))
	if m.Arrivals != 46 || m.Rejected != 41 || m.Admitted != 5 {
		t.Fatalf("period %+v: want 46 arrivals, 41 rejected (40 by the kernel), 5 admitted", m)
	}
	st := p.Stats()
	if st.RejectedKernel != 40 || st.Offered != 46 || st.Rejected() != 41 || st.KernelError != "" {
		t.Fatalf("stats %+v", st)
	}
	k.err = errors.New("netlink gone")
	st = p.Stats()
	if st.RejectedKernel != 40 || st.KernelError == "" {
		t.Fatalf("stats on a kernel error %+v: want the last count and the error", st)
	}
	if err := p.SetRate(t0, math.Inf(1)); err == nil {
		t.Fatal("a kernel error of SetRate was not returned")
	}
}

// TestUseKernelSources: with the per-source limits in the kernel, Admit
// applies none; the kernel's source drops count as rejected.
func TestUseKernelSources(t *testing.T) {
	t0 := time.Unix(0, 0)
	cfg := Config{Rate: 1, Burst: 1, Sources: SourceConfig{Rules: []SourceRule{{Prefix: "192.0.2.0/24", Rate: 0}}}}
	if !cfg.Sources.KernelExpressible() {
		t.Fatal("a shared prefix rule is kernel-expressible")
	}
	p, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	k := &srcKernel{}
	if err := p.UseKernel(k, true); err != nil || !p.KernelSources() {
		t.Fatal(err)
	}
	if v := p.Admit(t0, netip.MustParseAddr("192.0.2.1")); v != Admitted {
		t.Fatalf("verdict %v with the source limits in the kernel", v)
	}
	k.src = 3
	if st := p.Stats(); st.RejectedKernel != 3 || st.RejectedSource != 0 {
		t.Fatalf("stats %+v", st)
	}
	for _, c := range []SourceConfig{{Default: &SourceLimit{Rate: 1, Burst: 1}}, {Rules: []SourceRule{{Prefix: "192.0.2.0/24", Rate: 1, Burst: 1, PerAddress: true}}}} {
		if c.KernelExpressible() {
			t.Errorf("%+v: per-address buckets are not kernel-expressible", c)
		}
	}
}

type srcKernel struct{ src uint64 }

func (k *srcKernel) SetRate(float64) error                       { return nil }
func (k *srcKernel) Dropped() (global, source uint64, err error) { return 0, k.src, nil }
