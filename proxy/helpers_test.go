// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testconf"
	"github.com/sluicehq/sluice/proxy/internal/proxytest"
)

// testTimeout bounds every wait in these tests; it is generous on
// purpose (machines are noisy) and only reached when something hangs.
const testTimeout = proxytest.Timeout

// running is a proxy started for a test.
type running struct {
	srv    *Server
	url    string // http://addr of the first listener
	addr   string
	admin  string // http://admin addr
	file   string
	cancel context.CancelFunc
	done   chan error
}

// backend starts an httptest server on 127.0.0.1.
func backend(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// okBackend is a backend that answers every request 200 "ok".
func okBackend(t *testing.T) *httptest.Server {
	return backend(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
}

// rawBackend serves each connection to a listener on 127.0.0.1 with
// serve, in a goroutine of its own that closes the connection after,
// until the test ends; it returns the listener's address.
func rawBackend(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// withBackend replaces the BACKEND placeholder of a config text.
func withBackend(cfg, url string) string { return testconf.WithBackend(cfg, url) }

// baseConfig is a minimal config on free ports with the given extra text
// (testconf.Base).
func baseConfig(backendURL, extra string) string { return testconf.Base(backendURL, extra) }

// startProxy writes cfg to a file, loads it and serves it until the test
// ends.
func startProxy(t *testing.T, cfg string) *running {
	t.Helper()
	return startProxyWith(t, cfg, testOptions(t))
}

// startProxyWith is startProxy with opts (its ConfigFile is the file
// written); setup runs on the server before it listens.
func startProxyWith(t *testing.T, cfg string, opts Options, setup ...func(*Server)) *running {
	t.Helper()
	file := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadFile(file)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	opts.ConfigFile = file
	srv, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(srv)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, addr: srv.Addrs()[0].String(), admin: "http://" + srv.AdminAddr().String(),
		file: file, cancel: cancel, done: make(chan error, 1)}
	r.url = "http://" + r.addr
	go func() { r.done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(testTimeout):
			t.Error("Serve did not return after cancel")
		}
	})
	return r
}

// testOptions are the options of a test's server: its log goes to the
// test output (testLogger), its metrics to a registry of its own.
func testOptions(t *testing.T) Options {
	return Options{Logger: testLogger(t), Registerer: prometheus.NewRegistry()}
}

// testLogger logs to the test output at debug level.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// client is an HTTP client with a bound on every request.
var client = &http.Client{Timeout: testTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// get fetches url and returns the status and body.
func get(t *testing.T, url string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	return proxytest.Fetch(t, client, http.MethodGet, url, nil, hdr)
}

// answer is what a request sent by goDo got: its status and body, or
// code 0 and the error when no answer came (err is also the body's read
// error).
type answer struct {
	code int
	body string
	err  error
}

// goDo sends req through client on a goroutine of its own, for a
// request that waits at the backend while the test goes on, and delivers
// its answer, the body read in full.
func goDo(req *http.Request) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- answer{code: resp.StatusCode, body: string(b), err: err}
	}()
	return ch
}

// goGet is goDo of a GET of url.
func goGet(url string) <-chan answer {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		ch := make(chan answer, 1)
		ch <- answer{err: err}
		return ch
	}
	return goDo(req)
}

// badConfig is text added to the base configuration (7 lines) and a part
// of the error its parse must give.
type badConfig struct{ text, want string }

// parseFails parses the base configuration followed by each case's text
// and wants an error that contains the case's want.
func parseFails(t *testing.T, cases []badConfig) {
	t.Helper()
	head := baseConfig("http://127.0.0.1:1", "")
	for _, c := range cases {
		if _, err := Parse("p.yaml", []byte(head+c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v\nwant %q", c.text, err, c.want)
		}
	}
}

// state fetches GET /state.
func (r *running) state(t *testing.T) StateDoc {
	t.Helper()
	code, _, body := get(t, r.admin+"/state?decisions=5", r.bearer())
	if code != 200 {
		t.Fatalf("/state: %d %s", code, body)
	}
	var st StateDoc
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/state: %v\n%s", err, body)
	}
	return st
}

// bearer is the Authorization header of the running admin token (nil
// without one).
func (r *running) bearer() map[string]string {
	if tok := r.srv.Config().Admin.Token; tok.IsSet() {
		return map[string]string{"Authorization": "Bearer " + tok.Reveal()}
	}
	return nil
}

// eventually polls cond until it holds, and fails the test when it has
// not held within testTimeout.
var eventually = proxytest.Eventually

// rawConn opens a TCP connection to addr with a deadline.
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(testTimeout))
	return c, bufio.NewReader(c)
}

// rawRoundTrip writes req on a new connection and reads one response.
func rawRoundTrip(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	c, br := rawConn(t, addr)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return readResponse(t, br)
}

func readResponse(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(b)
}

// listenerConfig is a configuration with one listener, on a free port
// of 127.0.0.1, that has the settings in listener (YAML flow-mapping
// entries: "send_timeout: 300ms, max_headers: 10"), and one backend
// server at backendURL.
func listenerConfig(listener, backendURL string) string {
	return withBackend(`listeners:
  - {addr: 127.0.0.1:0, `+listener+`}
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: BACKEND}]}
`, backendURL)
}

// tlsListenerConfig is listenerConfig of a TLS listener serving the
// certificate and key in certFile and keyFile.
func tlsListenerConfig(certFile, keyFile, backendURL string) string {
	return listenerConfig(fmt.Sprintf("tls: {cert: %s, key: %s}", certFile, keyFile), backendURL)
}

// apiRateStage is a stages section with one static-rate stage, api, on
// every path, at a rate (100000 req/s) no test reaches.
const apiRateStage = `stages:
  - name: api
    match: {path_prefix: /}
    controller: static-rate
    params: {rate: 100000}
`

// stepPolicy runs r's policy for the control period that ends at now: the
// step a proxy started with startManual takes only when the test says.
func (r *running) stepPolicy(now time.Time) { r.srv.h.gen.Load().pol.Step(now) }

// metricsText fetches /metrics.
func (r *running) metricsText(t *testing.T) string {
	t.Helper()
	code, _, body := get(t, r.admin+"/metrics", r.bearer())
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	return body
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
