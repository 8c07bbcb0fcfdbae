// SPDX-License-Identifier: Apache-2.0

package httpx

import "strings"

// SFString quotes s as a Structured Fields String (RFC 9651 §3.3.3):
// printable ASCII between double quotes, with \ and " escaped; any other
// byte becomes '?'.
func SFString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
