// SPDX-License-Identifier: Apache-2.0

// Package proxytest holds what the tests of the proxy's packages share:
// waiting for a condition, a slog handler that records what is logged,
// a connection from a chosen loopback address, and an HTTP request whose
// answer the test reads whole or as it comes.
package proxytest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/testkit"
)

// Timeout bounds every wait of these helpers: generous, so that a loaded
// machine does not fail a test that would pass.
const Timeout = 20 * time.Second

// Eventually polls cond every 5ms until it holds, and fails t when it
// has not held within Timeout; what names the awaited condition.
func Eventually(t testkit.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// DialFrom connects to addr over TCP from the local address from (an IP
// address: on loopback, any of 127.0.0.0/8), with Timeout as the
// connection's deadline; the test's cleanup closes it.
func DialFrom(t testkit.TB, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: Timeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(Timeout))
	return c
}

// Send sends a request (method, url, body: nil for none, and the headers
// hdr) through c and returns the response, its body unread; the test's
// cleanup closes the body. A request that gets no answer fails t.
func Send(t testkit.TB, c *http.Client, method, url string, body io.Reader, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Fetch is Send that reads the answer whole: its status, headers and
// body. A body that cannot be read fails t.
func Fetch(t testkit.TB, c *http.Client, method, url string, body io.Reader, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	resp := Send(t, c, method, url, body, hdr)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// LogRecorder is a slog.Handler that keeps every record as one line:
// its level, message and attributes ("WARN message key=value …"). It
// is safe for concurrent use.
type LogRecorder struct {
	mu   sync.Mutex
	msgs []string
}

// Enabled reports true: every level is recorded.
func (r *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// WithAttrs returns r: the attributes of a derived logger are not kept.
func (r *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup returns r: groups are not kept.
func (r *LogRecorder) WithGroup(string) slog.Handler { return r }

// Handle records rec.
func (r *LogRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	r.mu.Lock()
	r.msgs = append(r.msgs, b.String())
	r.mu.Unlock()
	return nil
}

// Messages returns the lines recorded so far.
func (r *LogRecorder) Messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// Find returns the first line recorded that contains sub, or "".
func (r *LogRecorder) Find(sub string) string {
	for _, m := range r.Messages() {
		if strings.Contains(m, sub) {
			return m
		}
	}
	return ""
}
