// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCorpusSize(t *testing.T) {
	if n := len(Corpus()); n < 50 {
		t.Fatalf("%d cases, want at least 50", n)
	}
	for _, c := range Corpus() {
		for _, w := range c.Want {
			if strings.Contains(w, "smuggled") {
				t.Errorf("%s: an attacker's request in Want", c.Name)
			}
		}
	}
}

// TestSmugglingCorpus sends every case on its own raw connection through
// sluice to a recording backend: only the client's own valid requests
// reach it, malformed bodies get 400, nothing gets 502.
func TestSmugglingCorpus(t *testing.T) {
	rec, err := NewRecorder()
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	s := startSluice(t, strings.ReplaceAll(`listeners:
  - {addr: 127.0.0.1:0, read_body_timeout: 2s}
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: BACKEND}]}
`, "BACKEND", rec.URL))
	outs, err := RunCorpus(s.addr, Corpus(), rec, 8, 10*time.Second, 300*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if p := o.Problems(); len(p) > 0 {
			t.Errorf("%s: %s (answers %v, backend got %q)", o.Case.Name, strings.Join(p, "; "), o.Statuses, o.Forwarded)
		}
	}
}

// TestExpectContinueRepeated runs the Expect: 100-continue cases (a POST
// whose body is sent at once, a GET pipelined behind it) 200 times each,
// 8 at a time, with and without request buffering: every run gets exactly
// one 100 and then the two answers. The duplicate 100 this guards against
// came, without request buffering, in about 1 of 2,000 runs on a loaded
// machine (a race between the standard transport's writer and reader),
// and with request buffering in every run.
func TestExpectContinueRepeated(t *testing.T) {
	rec, err := NewRecorder()
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	for _, buffering := range []bool{true, false} {
		t.Run(fmt.Sprintf("request_buffering=%v", buffering), func(t *testing.T) {
			s := startSluice(t, strings.NewReplacer("BACKEND", rec.URL, "RB", fmt.Sprint(buffering)).Replace(`listeners:
  - {addr: 127.0.0.1:0, read_body_timeout: 5s, request_buffering: RB}
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: BACKEND}]}
`))
			var cases []Case
			for range 200 {
				cases = append(cases, ExpectCases()...)
			}
			// Each case ends with Connection: close: a generous quiet
			// costs nothing unless an answer is late.
			outs, err := RunCorpus(s.addr, cases, rec, 8, 10*time.Second, 5*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for _, o := range outs {
				if p := o.Problems(); len(p) > 0 {
					if bad++; bad <= 5 {
						t.Errorf("%s: %s (answers %v, backend got %q)", o.Case.Name, strings.Join(p, "; "), o.Statuses, o.Forwarded)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d runs failed", bad, len(outs))
			}
		})
	}
}
