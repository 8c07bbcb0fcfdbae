// SPDX-License-Identifier: Apache-2.0

package proxytest

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestEventuallyPollsUntilTheConditionHolds(t *testing.T) {
	n := 0
	Eventually(t, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
}

func TestDialFromUsesTheLocalAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := DialFrom(t, "127.0.0.2", ln.Addr().String())
	if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.2" {
		t.Errorf("connected from %s, want 127.0.0.2", got)
	}
}

func TestSendAndFetchSendTheRequestAsGiven(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-B", "c")
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-A")+" "+string(b))
	}))
	defer srv.Close()
	resp := Send(t, srv.Client(), http.MethodGet, srv.URL+"/p", nil, map[string]string{"X-A": "b"})
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "GET /p b " {
		t.Errorf("Send: body %q (%v), want the request echoed", b, err)
	}
	code, h, body := Fetch(t, srv.Client(), http.MethodPut, srv.URL+"/q", strings.NewReader("x"), nil)
	if code != 200 || h.Get("X-B") != "c" || body != "PUT /q  x" {
		t.Errorf("Fetch: %d %q %q, want 200, the header and the request echoed", code, h.Get("X-B"), body)
	}
}

func TestLogRecorderKeepsLevelMessageAndAttributes(t *testing.T) {
	rec := &LogRecorder{}
	log := slog.New(rec)
	log.Warn("export failed", "endpoint", "http://x", "err", errors.New("400"))
	log.With("ignored", 1).Info("second")
	want := []string{"WARN export failed endpoint=http://x err=400", "INFO second"}
	if got := rec.Messages(); !slices.Equal(got, want) {
		t.Errorf("messages %q, want %q", got, want)
	}
	if got := rec.Find("second"); got != "INFO second" {
		t.Errorf("Find(second) = %q", got)
	}
	if got := rec.Find("absent"); got != "" {
		t.Errorf("Find(absent) = %q, want empty", got)
	}
}
