// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"strings"
	"testing"
)

func TestSubset(t *testing.T) {
	sluice := []string{"GET /a HTTP/1.1", "POST /b HTTP/1.1"}
	for _, c := range []struct {
		a, b []string
		want bool
	}{
		{nil, sluice, true},
		{[]string{"GET /a HTTP/1.0"}, sluice, true},            // the version does not matter
		{[]string{"TRUNCATED POST /b HTTP/1.1"}, sluice, true}, // nor a truncated record
		{[]string{"GET /hidden HTTP/1.1"}, sluice, false},      // a request the strict parser never sent
		{sluice, nil, false},
	} {
		if got := subset(c.a, c.b); got != c.want {
			t.Errorf("subset(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestFormatting(t *testing.T) {
	if got := fwd(nil); got != "nothing" {
		t.Errorf("fwd(nil) = %q", got)
	}
	if got := fwd([]string{"GET /a|b\r\n", strings.Repeat("x", 50)}); got != `GET /a\|b\r\n<br>`+strings.Repeat("x", 40)+"…" {
		t.Errorf("fwd: %q", got)
	}
	if got := firstLine("one\ntwo"); got != "one" {
		t.Errorf("firstLine: %q", got)
	}
	if got := firstLine(strings.Repeat("y", 200)); len(got) != 160+len("…") {
		t.Errorf("firstLine of a long line: %d bytes", len(got))
	}
	opt.seda = "--controller seda --target-p90 200ms"
	for mode, want := range map[string][]string{"default": nil, "seda": {"--controller", "seda", "--target-p90", "200ms"},
		"--controller bbr": {"--controller", "bbr"}} {
		if got := modeArgs(mode); !slices.Equal(got, want) {
			t.Errorf("modeArgs(%q) = %q, want %q", mode, got, want)
		}
	}
}
