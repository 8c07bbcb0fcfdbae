// SPDX-License-Identifier: Apache-2.0

package admin

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The admin API's body and query parsers: never a panic; what they accept
// is valid, strict JSON with nothing after it, and says the same when
// encoded again; their errors quote at most a clipped value.

// refused reports whether a parser refused its input (err is not nil),
// and fails t when the error is longer than most bytes.
func refused(t *testing.T, err error, most int) bool {
	t.Helper()
	if err != nil && len(err.Error()) > most {
		t.Fatalf("error of %d bytes", len(err.Error()))
	}
	return err != nil
}

func FuzzTargetBody(f *testing.F) {
	for _, s := range []string{`{"target":"300ms"}`, `{"target":"1h"}`, `{}`, `{"target":300}`, `{"target":"1s"} x`,
		`{"target":"1s"}{"target":"2s"}`, `{"target":"1s","x":1}`, ``, `null`, `{"target":null}`, `[`, `{"target":"-1s"}`,
		`{"target":"9999999999h"}`, `{"TARGET":"1s"}`, strings.Repeat("[", 5000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseTargetBody(b)
		if refused(t, err, 400) {
			return
		}
		if d <= 0 || !json.Valid(b) {
			t.Fatalf("accepted %q as %v", b, d)
		}
		again, _ := json.Marshal(map[string]string{"target": d.String()})
		if d2, err := parseTargetBody(again); err != nil || d2 != d {
			t.Fatalf("%q: %v, then %s: %v %v", b, d, again, d2, err)
		}
	})
}

func FuzzShadowBody(f *testing.F) {
	for _, s := range []string{`{"shadow":true}`, `{"shadow":false}`, `{}`, `{"shadow":1}`, `{"shadow":"true"}`,
		`{"shadow":true} {}`, `{"shadow":true,"x":0}`, ``, `null`, `{"shadow":null}`, ` {"shadow" : false } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		on, err := parseShadowBody(b)
		if refused(t, err, 400) {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted %q", b)
		}
		var v struct{ Shadow *bool }
		if json.Unmarshal(b, &v) != nil || v.Shadow == nil || *v.Shadow != on {
			t.Fatalf("%q read as %v", b, on)
		}
	})
}

func FuzzDecisions(f *testing.F) {
	for _, s := range []string{"", "0", "10", "1000", "1001", "-1", "x", "+5", "05", "1e3", strings.Repeat("9", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseDecisions(s)
		if refused(t, err, 200) {
			return
		}
		if n < 0 || n > MaxStateDecisions {
			t.Fatalf("%q read as %d", s, n)
		}
		if s == "" && n != DefaultStateDecisions {
			t.Fatalf("no value read as %d", n)
		}
		if k, err := strconv.Atoi(s); s != "" && (err != nil || k != n) {
			t.Fatalf("%q read as %d", s, n)
		}
	})
}

// The parsers' answers on the cases the admin API documents.
func TestAdminBodyParsers(t *testing.T) {
	if d, err := parseTargetBody([]byte(`{"target":"300ms"}`)); err != nil || d != 300*time.Millisecond {
		t.Errorf("target: %v %v", d, err)
	}
	for _, b := range []string{`{"target":"1s"} x`, `{"target":"1s"}{}`, `{"target":"1s","x":1}`, `{"target":"0s"}`} {
		if _, err := parseTargetBody([]byte(b)); err == nil {
			t.Errorf("target %s accepted", b)
		}
	}
	if on, err := parseShadowBody([]byte(" {\"shadow\": false}\n")); err != nil || on {
		t.Errorf("shadow: %v %v", on, err)
	}
	if _, err := parseShadowBody([]byte(`{"shadow":true} trailing`)); err == nil {
		t.Error("shadow with trailing data accepted")
	}
	if _, err := parseDecisions(strings.Repeat("9", 1000)); err == nil || len(err.Error()) > 200 {
		t.Errorf("a long decisions value: %v", err)
	}
}
