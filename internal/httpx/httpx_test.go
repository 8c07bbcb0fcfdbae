// SPDX-License-Identifier: Apache-2.0

package httpx

import "testing"

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
	if n := testing.AllocsPerRun(100, func() { IsEventStream("Text/Event-Stream; charset=utf-8") }); n != 0 {
		t.Errorf("IsEventStream allocates %v times", n)
	}
}

func TestSFString(t *testing.T) {
	for in, want := range map[string]string{
		"api":       `"api"`,
		`a"b\c`:     `"a\"b\\c"`,
		"tab\there": `"tab?here"`,
		"é":         `"??"`,
	} {
		if got := SFString(in); got != want {
			t.Errorf("SFString(%q) = %s, want %s", in, got, want)
		}
	}
}
