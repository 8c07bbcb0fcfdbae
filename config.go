package sluice

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// FieldError is the one configuration error of every sluice package: the
// setting's YAML path (from the top of the section being validated, then
// placed under its parents' paths with Under), what is wrong with it, and
// its 1-based line in the YAML source when known.
type FieldError struct {
	// Path is the YAML path, e.g. "backends.servers[1].url" or "target".
	Path string
	// Msg says what is wrong, quoting the bad value.
	Msg string
	// Line is the setting's line in the source, 0 when unknown.
	Line int
}

// Error returns "path: message".
func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// FieldErrorf returns a *FieldError at path with a formatted message.
func FieldErrorf(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// InvalidField returns "path: value is invalid: want" as a *FieldError;
// want says what a valid value looks like.
func InvalidField(path string, value any, want string) *FieldError {
	return &FieldError{Path: path, Msg: fmt.Sprintf("%v is invalid: %s", value, want)}
}

// FieldPath returns the path of the *FieldError in err's chain, or "".
func FieldPath(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Path
	}
	return ""
}

// Under places a *FieldError at the top of err's chain under prefix
// ("params" and "target" give "params.target"; an index path such as
// "[2].url" is appended as is) and returns it; any other error is wrapped
// as a *FieldError at prefix. A nil err stays nil.
func Under(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		return &FieldError{Path: prefix, Msg: err.Error()}
	}
	out := *fe
	switch {
	case prefix == "":
	case out.Path == "":
		out.Path = prefix
	case strings.HasPrefix(out.Path, "["):
		out.Path = prefix + out.Path
	default:
		out.Path = prefix + "." + out.Path
	}
	return &out
}

// ParsePrefix parses a CIDR ("10.0.0.0/8", "2001:db8::/32") or a single
// address (a /32 or /128), the form every sluice setting of client
// addresses takes. Host bits and zones are errors (the message suggests
// the masked prefix), and an IPv4-mapped IPv6 form ("::ffff:10.0.0.0/104")
// is taken as the IPv4 prefix it maps, so that a rule matches the address
// a client connecting over IPv4 shows.
func ParsePrefix(s string) (netip.Prefix, error) {
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
