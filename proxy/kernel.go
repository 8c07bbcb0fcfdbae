// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net"
	"net/netip"

	"github.com/sluicehq/sluice/internal/netprefix"
	"github.com/sluicehq/sluice/policer/nft"
	"github.com/sluicehq/sluice/proxy/overload"
)

// startKernel puts the connection policer's global rate into the kernel
// (package policer/nft: an nftables table of sluice's own dropping excess
// SYNs to the client listeners addrs) when policer.kernel is auto or on,
// and says once in the log which path is in force. With auto, a kernel
// path that is unavailable (another system, no nf_tables, no
// CAP_NET_ADMIN) leaves the user-space reset at accept; with on it is an
// error. Called by Listen with s.mu held, before anything is served.
func (s *Server) startKernel(addrs []net.Addr) error {
	pc := s.h.gen.Load().cfg.Policer
	if s.ov.pol == nil || pc == nil {
		return nil
	}
	p := s.ov.pol.p
	if pc.Kernel == overload.PolicerKernelOff {
		s.ov.pol.path = "user space (policer.kernel: off)"
		s.log.Info("connection policer: user-space reset at accept", "policer.kernel", pc.Kernel)
		return nil
	}
	var lns []netip.AddrPort
	for _, a := range addrs {
		if ta, ok := a.(*net.TCPAddr); ok {
			lns = append(lns, ta.AddrPort())
		}
	}
	nc := nft.Config{Listeners: lns, Rate: p.Rate(), Burst: p.Burst()}
	// Per-source limits go to the kernel too when each is one bucket per
	// prefix; per-address buckets stay in user space (all of them, so the
	// longest-prefix order holds).
	srcInKernel := len(pc.Sources.Rules) > 0 && pc.Sources.KernelExpressible()
	if srcInKernel {
		for _, r := range pc.Sources.Rules {
			pfx, err := netprefix.Parse(r.Prefix)
			if err != nil { // validated at load
				return fieldErr("policer.sources", "%v", err)
			}
			nc.Sources = append(nc.Sources, nft.Source{Prefix: pfx, Rate: r.Rate, Burst: r.Burst})
		}
	}
	t, err := nft.Open(nc)
	if err == nil {
		if err = p.UseKernel(t, srcInKernel); err != nil {
			_ = t.Close()
		}
	}
	if err != nil {
		if pc.Kernel == overload.PolicerKernelOn {
			return fieldErr("policer.kernel", "on, but the kernel path is unavailable: %v", err)
		}
		s.ov.pol.path = "user space: " + err.Error()
		s.log.Info("connection policer: user-space reset at accept (kernel early discard unavailable)", "policer.kernel", pc.Kernel, "reason", err.Error())
		return nil
	}
	s.kernel = t
	s.ov.pol.path = "kernel: nftables table inet " + t.Name()
	sources := "none"
	switch {
	case srcInKernel:
		sources = "kernel"
	case len(pc.Sources.Rules) > 0 || pc.Sources.Default != nil:
		sources = "user space (per-address buckets)"
	}
	s.log.Info("connection policer: kernel early discard (excess SYNs dropped by nftables)", "table", "inet "+t.Name(),
		"listeners", len(lns), "rate", p.Rate(), "burst", p.Burst(), "sources", sources)
	return nil
}

// stopKernel deletes the policer's nftables table, if any.
func (s *Server) stopKernel() {
	if s.kernel == nil {
		return
	}
	if err := s.kernel.Close(); err != nil {
		s.log.Warn("connection policer: deleting the kernel table", "err", err)
	}
	s.kernel = nil
}
