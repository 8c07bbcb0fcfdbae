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
	// included).
	Dropped() (uint64, error)
}

// UseKernel moves the global bucket into the kernel: from now on k
// enforces the global rate (SetRate, and Step's decisions, set k's rate
// too), Admit no longer takes global tokens (per-source buckets stay in
// user space: a connection the kernel let through is still reset by the
// Listener if its source bucket is empty), and the SYNs k drops are
// counted in Stats.RejectedKernel and as offered and rejected in Collect's
// periods. It sets k's rate to the current one first and returns that
// error, leaving the policer as it was. Call it before the policer
// serves; it is not safe for use concurrent with Admit or Step.
func (p *Policer) UseKernel(k Kernel) error {
	if err := k.SetRate(p.Rate()); err != nil {
		return fmt.Errorf("policer: %w", err)
	}
	p.kernel = k
	return nil
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
	n, err := p.kernel.Dropped()
	if err != nil {
		return p.rejKernel.Load(), err
	}
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
