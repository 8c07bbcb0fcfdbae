// SPDX-License-Identifier: Apache-2.0

// Package httpx holds the small HTTP helpers sluice's packages share: the
// token grammar of header names and methods, the test for a server-sent
// event stream, and the body handling of a RoundTripper that retries.
package httpx

import "strings"

// IsToken reports whether s is a non-empty HTTP token (RFC 9110 §5.6.2):
// the characters allowed in header names and methods.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// IsEventStream reports whether a Content-Type is text/event-stream
// (parameters and case ignored): a server-sent event stream, which sluice
// treats as long-lived from its first byte. It does not allocate.
func IsEventStream(contentType string) bool {
	if i := strings.IndexByte(contentType, ';'); i >= 0 {
		contentType = contentType[:i]
	}
	return strings.EqualFold(strings.TrimSpace(contentType), "text/event-stream")
}
