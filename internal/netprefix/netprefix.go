// SPDX-License-Identifier: Apache-2.0

// Package netprefix is sluice's one parser of client-address settings: the
// CIDR prefixes and single addresses of trusted_proxies, class rules'
// cidrs, client shares and the connection policer's source rules.
package netprefix

import (
	"fmt"
	"net/netip"
	"strings"
)

// Parse parses a CIDR prefix ("10.0.0.0/8", "2001:db8::/32") or a single
// address (a /32 or /128). The rule for every setting of client addresses:
//
//   - host bits set below the prefix length are an error whose message
//     suggests the masked prefix ("10.1.2.3/8: host bits are set; did you
//     mean 10.0.0.0/8?"): a typo there would otherwise widen or shift the
//     range silently;
//   - an IPv4-mapped IPv6 spelling ("::ffff:10.0.0.0/104",
//     "::ffff:10.1.2.3") is taken as the IPv4 prefix it maps, so that a
//     rule matches the address a client connecting over IPv4 shows; a
//     mapped prefix shorter than /96 spans more than the mapped range and
//     has host bits set in its IPv4 part, so it is refused by the first
//     rule;
//   - zones ("fe80::1%eth0") are errors.
func Parse(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, fmt.Errorf("required: an address or a CIDR prefix")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an address or CIDR prefix: %v", err)
		}
		if p.Masked() != p {
			return netip.Prefix{}, fmt.Errorf("host bits are set; did you mean %s?", p.Masked())
		}
		if a := p.Addr(); a.Is4In6() { // masked, so at least /96
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an address or CIDR prefix: %v", err)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zones are not accepted")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
