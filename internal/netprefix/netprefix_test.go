// SPDX-License-Identifier: Apache-2.0

package netprefix

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"10.0.0.0/8", "10.0.0.0/8", ""},
		{"10.1.2.3", "10.1.2.3/32", ""},
		{"10.1.2.3/32", "10.1.2.3/32", ""},
		{"2001:db8::/32", "2001:db8::/32", ""},
		{"2001:db8::1", "2001:db8::1/128", ""},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8", ""}, // IPv4-mapped: the IPv4 prefix
		{"::ffff:10.1.2.3", "10.1.2.3/32", ""},
		{"::ffff:0.0.0.0/96", "0.0.0.0/0", ""},
		// Host bits: refused in both families, with the masked prefix.
		{"10.1.2.3/8", "", "host bits are set; did you mean 10.0.0.0/8?"},
		{"2001:db8::1/32", "", "did you mean 2001:db8::/32?"},
		{"::ffff:10.1.2.3/104", "", "did you mean ::ffff:10.0.0.0/104?"},
		{"::ffff:0.0.0.0/95", "", "host bits"},
		{"fe80::1%eth0", "", "zones"},
		{"10.0.0.0/33", "", "not an address or CIDR prefix"},
		{"1.2.3", "", "not an address"},
		{"x/8", "", "not an address"},
		{"nope", "", "not an address"},
		{"", "", "required"},
	} {
		p, err := Parse(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Parse(%q) = %v, %v; want an error with %q", c.in, p, err, c.err)
		case c.err == "" && (err != nil || p.String() != c.want):
			t.Errorf("Parse(%q) = %v, %v; want %s", c.in, p, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "10.1.2.3", "::ffff:10.0.0.0/104", "2001:db8::/32", "fe80::1%eth0", "10.1.2.3/8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		// Accepted: valid, masked, never IPv4-mapped, and it parses back to itself.
		if !p.IsValid() || p.Masked() != p || p.Addr().Is4In6() {
			t.Fatalf("Parse(%q) = %v", s, p)
		}
		if q, err := Parse(p.String()); err != nil || q != p {
			t.Fatalf("Parse(%q) = %v, but Parse(%q) = %v, %v", s, p, p.String(), q, err)
		}
	})
}
