// SPDX-License-Identifier: Apache-2.0

// Package nft moves the connection policer's early discard into the
// kernel, as Voigt and Gunningberg built it ("Handling Multiple Bottlenecks
// in Web Servers Using Adaptive Inbound Controls", docs/algorithms.md §1):
// excess connection requests (TCP SYNs) are dropped by netfilter before the
// server spends anything on them — no handshake, no accept(2), no
// setsockopt(2), no close(2), no conntrack entry.
//
// A Table is an nftables table of sluice's own, family inet, named
// sluice_<pid>_<start>_<n> (the process id, its start time in clock ticks
// since boot from /proc/<pid>/stat, and a counter within the process), so
// that a later process can tell a stale table of a dead process from a
// live one even after the pid is reused (RemoveStale). It holds one base
// chain, "syn", on the prerouting hook at priority raw (−300, before
// conntrack), with one rule per listener, and a regular chain "global":
//
//	syn:    [ip|ip6 daddr <listener address>] | [fib daddr type local]   (unspecified address)
//	        meta l4proto tcp  tcp dport <port>  tcp flags & (syn|ack) == syn
//	        counter name "offered"  goto global   (or goto src, with Config.Sources)
//	global: limit name "rate" (over)  counter name "dropped"  drop
//
// With per-source limits, chain "src" sends a SYN to the chain of the
// longest prefix holding its source address (src_<i>: limit name src_<i>
// (over), counter name "dropped_source", drop; then goto global), and any
// other SYN to global.
//
// The listeners share one named limit object ("rate": Rate packets per
// second, a bucket of Burst packets; the kernel's nft_limit is a token
// bucket: a SYN finding no token is dropped), so the whole listener set is
// policed at Rate, as the user-space policer's global bucket does. A rate
// of 0 drops every SYN; +Inf drops none (the rule only counts).
//
// SetRate replaces the limit object and the rules in one netlink batch (the
// kernel applies it atomically; nft_limit objects cannot be updated in
// place), only when the rate's kernel representation changes. The new
// limit starts with a full bucket: a rate change admits at most Burst
// extra SYNs in its period. The counters are named objects and survive the
// replacement.
//
// Nothing outside the table is read or changed: the chain only drops or
// falls through (it never accepts, so other tables' rules still see every
// packet it lets through). Close deletes the table. A process killed
// before Close leaves its table behind; the next Open (or RemoveStale)
// deletes the tables whose process is gone.
//
// The kernel path needs Linux with nf_tables and CAP_NET_ADMIN; Open
// returns an error wrapping ErrUnsupported otherwise, saying what failed,
// and the caller keeps the user-space reset (package policer).
package nft

import (
	"errors"
	"math"
	"net/netip"
)

// ErrUnsupported is wrapped by the errors of Open when the kernel path is
// not available: another operating system, no nf_tables, or no
// CAP_NET_ADMIN.
var ErrUnsupported = errors.New("kernel early discard unavailable")

// TablePrefix begins the name of every table this package creates; no
// other table is ever touched.
const TablePrefix = "sluice_"

// Config is what a Table polices.
type Config struct {
	// Listeners are the bound addresses of the listeners to police (TCP).
	// An unspecified address (0.0.0.0, ::) polices the port on every local
	// address (of IPv4 only for 0.0.0.0).
	Listeners []netip.AddrPort
	// Rate is the initial rate in SYNs per second: finite and ≥ 0, or
	// +Inf (no limit).
	Rate float64
	// Burst is the limit's bucket in packets (≥ 1).
	Burst int
	// Sources are per-source-prefix limits checked before the global one,
	// the longest matching prefix first: a SYN from a listed prefix must
	// take a token of that prefix's bucket (shared by the prefix), then a
	// global one. Rate 0 drops every SYN from the prefix, +Inf exempts it
	// from per-source policing. A SYN from an unlisted source meets only
	// the global limit.
	Sources []Source
}

// Source is the SYN limit of one source prefix: Rate SYNs per second
// (finite and ≥ 0, or +Inf), a bucket of Burst (≥ 1 for a finite positive
// rate).
type Source struct {
	Prefix netip.Prefix
	Rate   float64
	Burst  int
}

// Counters are a table's packet counters since Open.
type Counters struct {
	// Offered is the number of SYNs that reached the listeners' rules
	// (the paper's hits, retransmitted SYNs included); Dropped those the
	// global limit dropped, DroppedSource those a source prefix's limit
	// dropped.
	Offered, Dropped, DroppedSource uint64
}

// kernelRate returns the limit's rate and unit in the kernel's integer
// representation: packets per second when that rounds to within 0.5 %,
// else per minute, else per hour; ok is false for 0 and +Inf (no limit
// object: drop all, or none).
func kernelRate(r float64) (rate uint64, perSeconds uint64, ok bool) {
	if r <= 0 || math.IsInf(r, 1) || math.IsNaN(r) {
		return 0, 0, false
	}
	for _, unit := range []uint64{1, 60, 3600} {
		v := r * float64(unit)
		n := math.Round(v)
		if n >= 1 && (math.Abs(n-v) <= 0.005*v || unit == 3600) {
			return uint64(n), unit, true
		}
	}
	return 1, 3600, true
}
