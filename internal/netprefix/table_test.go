// SPDX-License-Identifier: Apache-2.0

package netprefix

import (
	"net/netip"
	"testing"
)

func TestTableLongestMatch(t *testing.T) {
	var tb Table[string]
	if _, ok := tb.Match(netip.MustParseAddr("10.1.2.3")); ok {
		t.Fatal("the zero Table matched")
	}
	for p, v := range map[string]string{"10.0.0.0/8": "ten", "10.1.0.0/16": "ten-one", "10.1.2.3": "host",
		"0.0.0.0/0": "any4", "2001:db8::/32": "doc", "2001:db8:1::/48": "doc1"} {
		pf, err := Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tb.Insert(pf, v); !ok {
			t.Fatalf("Insert(%s) refused", p)
		}
	}
	if old, ok := tb.Insert(netip.MustParsePrefix("10.0.0.0/8"), "again"); ok || old != "ten" || tb.Len() != 6 {
		t.Errorf("a second 10.0.0.0/8: %q %v (len %d), want the first value kept", old, ok, tb.Len())
	}
	for a, want := range map[string]string{"10.1.2.3": "host", "10.1.9.9": "ten-one", "10.200.0.1": "ten", "192.0.2.1": "any4",
		"2001:db8:1::5": "doc1", "2001:db8:2::5": "doc", "2001:db9::1": ""} {
		got, ok := tb.Match(netip.MustParseAddr(a))
		if got != want || ok != (want != "") {
			t.Errorf("Match(%s) = %q %v, want %q", a, got, ok, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { tb.Match(netip.MustParseAddr("10.1.9.9")) }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
}
