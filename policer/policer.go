// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gate"
	"github.com/sluicehq/sluice/internal/enum"
)

// Verdict is the policer's decision on one connection.
type Verdict uint8

const (
	// Admitted: the connection passed its source bucket (if any) and took
	// a global token.
	Admitted Verdict = iota
	// RejectedRate: the global bucket was empty.
	RejectedRate
	// RejectedSource: the source's own bucket was empty, or a rule of
	// rate 0 denies the source.
	RejectedSource
)

// String returns "admitted", "rate" or "source", the names used in
// metrics and logs.
func (v Verdict) String() string { return enum.Name(v, verdictNames[:], "Verdict") }

var verdictNames = [...]string{Admitted: "admitted", RejectedRate: "rate", RejectedSource: "source"}

// Policer decides, connection by connection, whether a new connection may
// proceed: the connection policer (TCP SYN policing) of Voigt and
// Gunningberg (docs/algorithms.md §1).
//
// A connection from source address s arriving at t is admitted iff
//
//  1. s's source bucket, if it has one, holds a token (it is taken), and
//  2. the global token bucket (gate.TokenBucket: Burst tokens refilled at
//     Rate per second) holds a token (it is taken).
//
// The global rate is what the controller sets each period (Step, through
// SetRate; see Control); the paper drives it with a PD controller on the
// listen queue (control.VoigtQueue), allowed to increase only while CPU
// utilization is below its reference.
//
// Per-source state is bounded: a prefix rule shared by its whole prefix has
// one bucket; every per-address source (sources.default and per_address
// rules) has one in a table of at most MaxTracked entries. When the table is
// full the least recently seen address's slot is reused. Reusing the slot
// of an address whose bucket has refilled loses nothing (a new bucket is
// full too); reusing one whose bucket was not full forgets that source's
// debt, so a source set larger than MaxTracked cycling faster than its
// buckets refill escapes per-source limits (it still needs global tokens).
// Stats counts both kinds of replacement so this is visible.
//
// Counters are cumulative since New (Stats) and per period (Collect).
// Methods are safe for concurrent use. Admit does not allocate; it takes
// the per-source table's mutex when per-source policing applies to the
// source, and the global bucket's (see gate.TokenBucket for its cost).
type Policer struct {
	bucket  *gate.TokenBucket
	sources *sourceTable // nil when no source is policed individually
	cfg     Config

	offered, admitted, rejRate, rejSource atomic.Uint64
	acceptErrors                          atomic.Uint64
	rejKernel                             atomic.Uint64 // the kernel's last drop count read

	kernel        Kernel // the global bucket in the kernel (UseKernel), or nil
	kernelSources bool   // the per-source limits too

	mu       sync.Mutex // serialises Collect
	last     time.Time
	lastSnap [3]uint64 // offered, admitted, rejected at the last Collect

	// The control loop (control.go): set before the first Step, then
	// read-only; the last step's input under stepMu.
	ctl      Control
	stepMu   sync.Mutex // serialises Step
	lastIn   sluice.Measurements
	guardErr string
	stepped  bool
}

// New validates cfg and returns a policer with a full global bucket whose
// first Collect period starts at now.
func New(cfg Config, now time.Time) (*Policer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := cfg.Sources.compile()
	if err != nil {
		return nil, err
	}
	b, err := gate.NewTokenBucket(cfg.Rate, cfg.Burst)
	if err != nil {
		return nil, fmt.Errorf("policer: %w", err)
	}
	p := &Policer{bucket: b, cfg: cfg, last: now}
	if cfg.Sources.Default != nil || len(cfg.Sources.Rules) > 0 {
		p.sources = newSourceTable(&cfg.Sources, m, now)
	}
	return p, nil
}

// Admit decides on one connection from src arriving at now and counts it.
// Pass the zero netip.Addr when the source is unknown (a Unix socket): only
// the global bucket applies. A connection refused by its source bucket takes
// no global token.
func (p *Policer) Admit(now time.Time, src netip.Addr) Verdict {
	p.offered.Add(1)
	if p.sources != nil && !p.kernelSources && !p.sources.admit(now, src) {
		p.rejSource.Add(1)
		return RejectedSource
	}
	if p.kernel == nil && !p.bucket.AllowAt(now) {
		p.rejRate.Add(1)
		return RejectedRate
	}
	p.admitted.Add(1)
	return Admitted
}

// SetRate changes the global token rate from now on (connections per
// second; finite and ≥ 0, or +Inf). On error the rate is unchanged. This is
// the policer's actuator: Step applies each decision of its controller's
// here. With the global bucket in the kernel (UseKernel) the kernel's rate
// is set too; its error is returned, the user-space rate (shown by Rate)
// being changed already.
func (p *Policer) SetRate(now time.Time, r float64) error {
	if err := p.bucket.SetRateAt(now, r); err != nil {
		return fmt.Errorf("policer: %w", err)
	}
	return p.setKernelRate(r)
}

// Rate returns the global token rate in connections per second.
func (p *Policer) Rate() float64 { return p.bucket.Rate() }

// Burst returns the global bucket size in connections.
func (p *Policer) Burst() int { return p.bucket.Burst() }

// Config returns the configuration the policer was built from (Rate is the
// initial rate; see Rate for the current one).
func (p *Policer) Config() Config { return p.cfg }

// noteAcceptError counts an error returned by an inner listener.
func (p *Policer) noteAcceptError() { p.acceptErrors.Add(1) }

// Stats is a snapshot of a policer's counters, cumulative since New.
type Stats struct {
	// Rate is the current global rate in connections per second and Burst
	// the global bucket size.
	Rate  float64
	Burst int
	// Offered is the number of connections decided (the paper's hits);
	// Offered = Admitted + RejectedRate + RejectedSource + RejectedKernel,
	// up to connections being decided while the snapshot is taken.
	Offered        uint64
	Admitted       uint64
	RejectedRate   uint64
	RejectedSource uint64
	// RejectedKernel is the number of connection requests (SYNs,
	// retransmissions included) the kernel dropped (UseKernel), by the
	// global limit or a per-source one; zero without. KernelError is the error of reading it, "" for none.
	RejectedKernel uint64
	KernelError    string
	// AcceptErrors is the number of errors the inner listeners returned
	// from Accept (returned unchanged to the caller).
	AcceptErrors uint64
	// TrackedSources is the number of per-address buckets held, at most
	// MaxTracked. Evictions counts slot reuses of the per-address table;
	// LossyEvictions those whose bucket was not full (see Policer).
	TrackedSources int
	MaxTracked     int
	Evictions      uint64
	LossyEvictions uint64
}

// Rejected returns RejectedRate + RejectedSource + RejectedKernel.
func (s Stats) Rejected() uint64 { return s.RejectedRate + s.RejectedSource + s.RejectedKernel }

// Stats returns the cumulative counters.
func (p *Policer) Stats() Stats {
	s := Stats{
		Rate:           p.Rate(),
		Burst:          p.Burst(),
		Offered:        p.offered.Load(),
		Admitted:       p.admitted.Load(),
		RejectedRate:   p.rejRate.Load(),
		RejectedSource: p.rejSource.Load(),
		AcceptErrors:   p.acceptErrors.Load(),
	}
	if p.kernel != nil {
		k, err := p.kernelDropped()
		if err != nil {
			s.KernelError = err.Error()
		}
		s.RejectedKernel = k
		s.Offered += k
	}
	if p.sources != nil && p.sources.tats != nil {
		s.TrackedSources, s.Evictions, s.LossyEvictions = p.sources.stats()
		s.MaxTracked = p.sources.tats.Cap()
	}
	return s
}

// Collect ends the current period at now and returns what the policer saw
// in it, for the connection-policer controller:
//
//   - Elapsed = now − the previous Collect's now (or New's), zero if now is
//     not after it;
//   - Arrivals = connections offered (the paper's hits), Admitted, and
//     Rejected (every reason; with the kernel path, UseKernel, the SYNs
//     the kernel dropped count in Arrivals and Rejected);
//   - Completed = 0, Samples = 0, MeanRT = P90RT = NaN (the policer sees no
//     responses), Utilization = NaN and Queue = 0: the runner fills
//     Utilization from the CPU sensor and Queue from the backend wait queue.
//
// The counters are read one after the other, so a connection decided while
// Collect runs may have its Arrival in one period and its verdict in the
// next; over a run the sums are exact. Collect is safe for concurrent use.
func (p *Policer) Collect(now time.Time) sluice.Measurements {
	p.mu.Lock()
	defer p.mu.Unlock()
	elapsed := max(now.Sub(p.last), 0)
	p.last = now
	k, _ := p.kernelDropped() // on error: the last count, caught up next period
	cur := [3]uint64{p.offered.Load() + k, p.admitted.Load(), p.rejRate.Load() + p.rejSource.Load() + k}
	d := [3]float64{}
	for i := range cur {
		d[i] = float64(cur[i] - p.lastSnap[i])
	}
	p.lastSnap = cur
	return sluice.Measurements{
		Elapsed:     elapsed,
		Arrivals:    d[0],
		Admitted:    d[1],
		Rejected:    d[2],
		MeanRT:      math.NaN(),
		P90RT:       math.NaN(),
		Utilization: math.NaN(),
	}
}
