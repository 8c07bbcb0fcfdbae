package reliability

import (
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
