// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"fmt"
	"math"
)

// Kernel enforces the policer's global rate in the kernel, before the TCP
// handshake: the paper's early discard proper, where the Listener's reset
// comes after it. package policer/nft's Table is the one implementation
// (nftables, Linux, CAP_NET_ADMIN).
type Kernel interface {
	// SetRate puts a rate in connection requests (SYNs) per second into
	// force (finite and ≥ 0, or +Inf).
	SetRate(rate float64) error
	// Dropped returns the number of SYNs dropped so far (retransmissions
	// included), by the global limit and by per-source limits.
	Dropped() (global, source uint64, err error)
}

// UseKernel moves the global bucket into the kernel: from now on k
// enforces the global rate (SetRate, and Step's decisions, set k's rate
// too), Admit no longer takes global tokens, and the SYNs k drops are
// counted in Stats.RejectedKernel and as offered and rejected in Collect's
// periods. With sources true k enforces the per-source limits as well
// (their prefixes given to it by the caller) and Admit skips them;
// otherwise they stay in user space: a connection the kernel let through
// is still reset by the Listener if its source bucket is empty. It sets
// k's rate to the current one first and returns that error, leaving the
// policer as it was. Call it before the policer serves; it is not safe for
// use concurrent with Admit or Step.
func (p *Policer) UseKernel(k Kernel, sources bool) error {
	if err := k.SetRate(p.Rate()); err != nil {
		return fmt.Errorf("policer: %w", err)
	}
	p.kernel, p.kernelSources = k, sources
	return nil
}

// KernelSources reports whether the per-source limits are enforced in the
// kernel (UseKernel with sources).
func (p *Policer) KernelSources() bool { return p.kernel != nil && p.kernelSources }

// KernelExpressible reports whether c's per-source policing can be
// enforced by a kernel limit per prefix: no per-address buckets (no
// sources.default, no per_address rule), which would need one bucket per
// client address.
func (c *SourceConfig) KernelExpressible() bool {
	if c.Default != nil {
		return false
	}
	for _, r := range c.Rules {
		if r.PerAddress && r.limit().stateful() {
			return false
		}
	}
	return true
}

// InKernel reports whether the global rate is enforced in the kernel
// (UseKernel).
func (p *Policer) InKernel() bool { return p.kernel != nil }

// kernelDropped reads the kernel's drop count; on error the last count
// read stays (and the error is returned).
func (p *Policer) kernelDropped() (uint64, error) {
	if p.kernel == nil {
		return 0, nil
	}
	g, src, err := p.kernel.Dropped()
	if err != nil {
		return p.rejKernel.Load(), err
	}
	n := g + src
	p.rejKernel.Store(n)
	return n, nil
}

// setKernelRate applies r to the kernel, if in use.
func (p *Policer) setKernelRate(r float64) error {
	if p.kernel == nil {
		return nil
	}
	if math.IsNaN(r) {
		return fmt.Errorf("policer: rate NaN")
	}
	if err := p.kernel.SetRate(r); err != nil {
		return fmt.Errorf("policer: kernel: %w", err)
	}
	return nil
}
