// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/httpx"
)

// What travels with a request from one hop to the next: its priority,
// its tenant and its deadline. In-process they travel in the request's
// context (the deadline as the context's own deadline, the priority and
// the tenant as a Hop); between processes, in three request headers that
// every sluice hop reads (believing the priority and the tenant only from
// trusted proxies, classes.trusted_proxies) and sluice's client side
// writes (package client). The headers' names are configurable; these
// are their defaults.
const (
	// PriorityHeader carries the request's priority: a class name of the
	// receiving hop's classes.order, or a criticality (CriticalPlus,
	// Critical, SheddablePlus, Sheddable). See PriorityClass.
	PriorityHeader = "X-Sluice-Priority"
	// TenantHeader carries the request's tenant: an HTTP token (RFC 9110
	// §5.6.2) of at most MaxTenantBytes bytes.
	TenantHeader = "X-Sluice-Tenant"
	// TimeoutHeader carries the time the request has left, in
	// grpc-timeout's encoding (FormatTimeout, ParseTimeout): "250m" is
	// 250 ms.
	TimeoutHeader = "X-Sluice-Timeout"
)

// Google's criticalities (Beyer et al., Site Reliability Engineering,
// O'Reilly 2016, ch. 21 "Handling Overload", "Criticality"), highest
// first. A priority header may carry one instead of a class name; each
// hop maps it onto its own classes (PriorityClass), so hops that name
// their classes differently still agree on the order.
const (
	CriticalPlus  = "CRITICAL_PLUS"
	Critical      = "CRITICAL"
	SheddablePlus = "SHEDDABLE_PLUS"
	Sheddable     = "SHEDDABLE"
)

var criticalities = [...]string{CriticalPlus, Critical, SheddablePlus, Sheddable}

// Limits of the values a hop accepts; longer values are invalid (and
// treated as absent).
const (
	// MaxPriorityBytes is the longest priority value: a class name or a
	// criticality.
	MaxPriorityBytes = 64
	// MaxTenantBytes is the longest tenant value.
	MaxTenantBytes = 128
)

// Hop is what a request carries to the next hop besides its deadline
// (which is the context's own deadline): its priority and its tenant.
// The zero Hop carries nothing.
type Hop struct {
	// Priority names the request's priority as the next hop should read
	// it: a class name or a criticality; "" means none (the receiving
	// hop's default class).
	Priority string
	// Tenant names the request's tenant (who it is done for); "" means
	// none.
	Tenant string
}

// hopKey is the context key of a Hop.
type hopKey struct{}

// WithHop returns a copy of ctx carrying h: what sluice's client side
// (package client) stamps on the calls made with the context. The
// middleware does it for every request it admits that has a priority or a
// tenant.
func WithHop(ctx context.Context, h Hop) context.Context {
	return withValue[hopKey](ctx, h)
}

// HopFrom returns the Hop carried by ctx, or the zero Hop. The request's
// deadline is ctx.Deadline().
func HopFrom(ctx context.Context) Hop {
	h, _ := valueFrom[hopKey, Hop](ctx)
	return h
}

// ValidPriority reports whether p can name a priority: 1 to
// MaxPriorityBytes bytes of letters, digits, '_', '.' and '-' (the
// characters of a class name).
func ValidPriority(p string) bool {
	if p == "" || len(p) > MaxPriorityBytes {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// ValidTenant reports whether t can name a tenant: an HTTP token (RFC
// 9110 §5.6.2) of 1 to MaxTenantBytes bytes.
func ValidTenant(t string) bool { return len(t) <= MaxTenantBytes && httpx.IsToken(t) }

// PriorityClass maps priority p onto classes (class names, highest
// priority first) and returns the class index, or false when p names
// neither a class nor a criticality. A class name matches exactly (class
// names are case-sensitive) and wins over a criticality of the same
// spelling. A criticality (any case) of rank r (CriticalPlus 0, Critical
// 1, SheddablePlus 2, Sheddable 3) maps to class
//
//	round(r·(n − 1)/3),  n = len(classes),
//
// so that CRITICAL_PLUS is always the highest class and SHEDDABLE the
// lowest: with two classes CRITICAL_PLUS and CRITICAL map to the first
// and the sheddable ones to the second; with four, one each. It does not
// allocate.
func PriorityClass(p string, classes []string) (int, bool) {
	if len(classes) == 0 {
		return 0, false
	}
	for i, c := range classes {
		if c == p {
			return i, true
		}
	}
	for r, name := range criticalities {
		if strings.EqualFold(p, name) {
			n := len(classes)
			// r·(n−1)/3 is never a half, so rounding half up is exact.
			return (2*r*(n-1) + 3) / 6, true
		}
	}
	return 0, false
}

// maxTimeoutDigits is the most digits FormatTimeout writes: grpc-timeout
// allows 8, so that gRPC peers read sluice's header as well.
const maxTimeoutDigits = 8

// timeoutUnits are grpc-timeout's units, finest first.
var timeoutUnits = [...]struct {
	c byte
	d time.Duration
}{{'n', time.Nanosecond}, {'u', time.Microsecond}, {'m', time.Millisecond},
	{'S', time.Second}, {'M', time.Minute}, {'H', time.Hour}}

// ParseTimeout parses a timeout in grpc-timeout's encoding (the gRPC
// over HTTP/2 protocol: "TimeoutValue TimeoutUnit"): ASCII digits
// followed by one unit letter, H (hours), M (minutes), S (seconds), m
// (milliseconds), u (microseconds) or n (nanoseconds); "250m" is 250 ms,
// "2S" two seconds. It also accepts a leading '-' (a caller whose budget
// is already spent) and any number of digits, and saturates at the
// largest Duration instead of failing, so that a huge or negative value
// can be clamped to the hop's bounds rather than ignored. Anything else —
// no digit, no or another unit, spaces, a sign other than a leading '-'
// — is invalid (ok false). It does not allocate.
func ParseTimeout(s string) (d time.Duration, ok bool) {
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if len(s) < 2 {
		return 0, false
	}
	var unit time.Duration
	for _, u := range timeoutUnits {
		if u.c == s[len(s)-1] {
			unit = u.d
		}
	}
	if unit == 0 {
		return 0, false
	}
	const limit = math.MaxInt64
	var v int64
	sat := false
	for i := 0; i < len(s)-1; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if !sat {
			if v > (limit-int64(c-'0'))/10 {
				sat = true
			} else {
				v = v*10 + int64(c-'0')
			}
		}
	}
	if sat || v > limit/int64(unit) {
		d = time.Duration(limit)
	} else {
		d = time.Duration(v) * unit
	}
	if neg {
		d = -d
	}
	return d, true
}

// FormatTimeout writes d in grpc-timeout's encoding with at most 8
// digits, in the finest unit that holds it, rounded down (a hop never
// hands the next more time than it has): 250ms is "250000u", 2m30s is
// "150000m". d ≤ 0 is "0n"; durations beyond 99,999,999 hours are written
// as that.
func FormatTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	for _, u := range timeoutUnits {
		if v := d / u.d; v <= 99999999 {
			return formatUint(uint64(v), u.c)
		}
	}
	return "99999999H"
}

// formatUint writes v followed by unit in one allocation.
func formatUint(v uint64, unit byte) string {
	var b [maxTimeoutDigits + 1]byte
	i := len(b) - 1
	b[i] = unit
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}
