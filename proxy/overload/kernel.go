// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"net"
	"net/netip"

	"github.com/sluicehq/sluice/internal/netprefix"
	"github.com/sluicehq/sluice/policer/nft"
)

// StartKernel puts the connection policer's global rate into the kernel
// (package policer/nft: an nftables table of sluice's own dropping excess
// SYNs to the client listeners addrs) when pc.Kernel is auto or on, and
// says once in the log which path is in force. With auto, a kernel path
// that is unavailable (another system, no nf_tables, no CAP_NET_ADMIN)
// leaves the user-space reset at accept; with on it is an error. pc is
// the policer section in force (nil: none). The proxy calls it once its
// client listeners are bound, before anything is served; StopKernel
// undoes it.
func (o *Runtime) StartKernel(pc *PolicerConfig, addrs []net.Addr) error {
	if o.pol == nil || pc == nil {
		return nil
	}
	p := o.pol.p
	if pc.Kernel == PolicerKernelOff {
		o.pol.path = "user space (policer.kernel: off)"
		o.log.Info("connection policer: user-space reset at accept", "policer.kernel", pc.Kernel)
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
		if pc.Kernel == PolicerKernelOn {
			return fieldErr("policer.kernel", "on, but the kernel path is unavailable: %v", err)
		}
		o.pol.path = "user space: " + err.Error()
		o.log.Info("connection policer: user-space reset at accept (kernel early discard unavailable)", "policer.kernel", pc.Kernel, "reason", err.Error())
		return nil
	}
	o.kernel = t
	o.pol.path = "kernel: nftables table inet " + t.Name()
	sources := "none"
	switch {
	case srcInKernel:
		sources = "kernel"
	case len(pc.Sources.Rules) > 0 || pc.Sources.Default != nil:
		sources = "user space (per-address buckets)"
	}
	o.log.Info("connection policer: kernel early discard (excess SYNs dropped by nftables)", "table", "inet "+t.Name(),
		"listeners", len(lns), "rate", p.Rate(), "burst", p.Burst(), "sources", sources)
	return nil
}

// StopKernel deletes the policer's nftables table, if any.
func (o *Runtime) StopKernel() {
	if o.kernel == nil {
		return
	}
	if err := o.kernel.Close(); err != nil {
		o.log.Warn("connection policer: deleting the kernel table", "err", err)
	}
	o.kernel = nil
}
