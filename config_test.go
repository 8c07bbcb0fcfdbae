package sluice

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParsePrefix(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"10.0.0.0/8", "10.0.0.0/8", ""},
		{"10.1.2.3", "10.1.2.3/32", ""},
		{"2001:db8::/32", "2001:db8::/32", ""},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8", ""}, // IPv4-mapped: the IPv4 prefix
		{"::ffff:10.1.2.3", "10.1.2.3/32", ""},
		{"10.1.2.3/8", "", "did you mean 10.0.0.0/8"},
		{"fe80::1%eth0", "", "zones"},
		{"nope", "", "not an address"},
		{"", "", "required"},
	} {
		p, err := ParsePrefix(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParsePrefix(%q) = %v, %v; want an error with %q", c.in, p, err, c.err)
		case c.err == "" && (err != nil || p.String() != c.want):
			t.Errorf("ParsePrefix(%q) = %v, %v; want %s", c.in, p, err, c.want)
		}
	}
}

func TestIsTokenAndEventStream(t *testing.T) {
	for s, want := range map[string]bool{"X-Sluice-Class": true, "GET": true, "a b": false, "": false, "é": false, "x:y": false} {
		if IsToken(s) != want {
			t.Errorf("IsToken(%q) = %v", s, !want)
		}
	}
	for ct, want := range map[string]bool{"text/event-stream": true, "Text/Event-Stream; charset=utf-8": true,
		" text/event-stream ": true, "text/html": false, "": false, "text/event-streams": false} {
		if IsEventStream(ct) != want {
			t.Errorf("IsEventStream(%q) = %v", ct, !want)
		}
	}
}

func TestFieldErrors(t *testing.T) {
	e := InvalidField("target", "-1s", "must be positive")
	if e.Error() != "target: -1s is invalid: must be positive" {
		t.Errorf("InvalidField: %q", e.Error())
	}
	nested := Under("stages[0]", Under("params", e))
	if FieldPath(nested) != "stages[0].params.target" || nested.Error() != "stages[0].params.target: -1s is invalid: must be positive" {
		t.Errorf("Under: %q (path %q)", nested.Error(), FieldPath(nested))
	}
	if got := FieldPath(Under("servers", FieldErrorf("[1].url", "bad"))); got != "servers[1].url" {
		t.Errorf("index path: %q", got)
	}
	if got := Under("x", errors.New("plain")); FieldPath(got) != "x" || got.Error() != "x: plain" {
		t.Errorf("a plain error: %v", got)
	}
	if Under("x", nil) != nil {
		t.Error("Under(nil) is not nil")
	}
	if FieldPath(fmt.Errorf("wrapped: %w", e)) != "target" {
		t.Error("FieldPath does not unwrap")
	}
}
