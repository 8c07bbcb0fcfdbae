// SPDX-License-Identifier: Apache-2.0

package netprefix

import (
	"net/netip"
	"slices"
)

// Table maps prefixes to values and finds the longest prefix that contains
// an address: one map lookup per distinct prefix length of the address's
// family, longest first (at most 33 for IPv4, 129 for IPv6; in practice a
// handful). The zero Table is empty and ready to use. Insert is for
// building; once built, Match and Get are safe for concurrent use and do
// not allocate.
type Table[V any] struct {
	byPrefix   map[netip.Prefix]V
	len4, len6 []int // distinct prefix lengths, longest first
}

// Insert adds p (as Parse returns it: masked, unmapped) with value v and
// reports true, or, when p is already in the table, changes nothing and
// returns the value it has and false.
func (t *Table[V]) Insert(p netip.Prefix, v V) (V, bool) {
	if old, ok := t.byPrefix[p]; ok {
		return old, false
	}
	if t.byPrefix == nil {
		t.byPrefix = make(map[netip.Prefix]V)
	}
	t.byPrefix[p] = v
	l := &t.len6
	if p.Addr().Is4() {
		l = &t.len4
	}
	if !slices.Contains(*l, p.Bits()) {
		*l = append(*l, p.Bits())
		slices.Sort(*l)
		slices.Reverse(*l)
	}
	return v, true
}

// Len returns the number of prefixes.
func (t *Table[V]) Len() int { return len(t.byPrefix) }

// Match returns the value of the longest prefix containing a, which must
// be unmapped and without a zone (a.Unmap().WithZone("")), and whether
// there is one.
func (t *Table[V]) Match(a netip.Addr) (V, bool) {
	lens := t.len6
	if a.Is4() {
		lens = t.len4
	}
	for _, bits := range lens {
		p, err := a.Prefix(bits)
		if err != nil {
			continue
		}
		if v, ok := t.byPrefix[p]; ok {
			return v, true
		}
	}
	var zero V
	return zero, false
}
