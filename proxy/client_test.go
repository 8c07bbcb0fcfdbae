// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/proxy/guard"
)

// recorder is a backend that records every request it got completely,
// with its body.
type recorder struct {
	mu   sync.Mutex
	got  []string // "METHOD path body"
	errs []string // requests whose body failed to read
}

func (rec *recorder) handler(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	rec.mu.Lock()
	if err != nil {
		rec.errs = append(rec.errs, r.Method+" "+r.URL.Path+": "+err.Error())
	} else {
		rec.got = append(rec.got, r.Method+" "+r.URL.Path+" "+string(b))
	}
	rec.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (rec *recorder) requests() ([]string, []string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.got...), append([]string(nil), rec.errs...)
}

// sendRaw writes req on a new connection, then reads responses until the
// proxy closes it, and returns their statuses.
func sendRaw(t *testing.T, addr, req string) []int {
	t.Helper()
	c, br := rawConn(t, addr)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	var codes []int
	for _, resp := range readResponses(br) {
		codes = append(codes, resp.StatusCode)
	}
	return codes
}

// readResponses reads responses from br, their bodies discarded, until
// one closes the connection or none can be read.
func readResponses(br *bufio.Reader) []*http.Response {
	var out []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out = append(out, resp)
		if resp.Close {
			return out
		}
	}
}

func TestMalformedBodiesAre400AndNeverReachTheBackend(t *testing.T) {
	for _, buffering := range []bool{true, false} {
		t.Run(fmt.Sprintf("buffering=%v", buffering), func(t *testing.T) {
			rec := &recorder{}
			be := backend(t, rec.handler)
			p := startProxy(t, withBackend(fmt.Sprintf(`listeners:
  - {addr: 127.0.0.1:0, request_buffering: %v}
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: BACKEND}]}
`, buffering), be.URL))
			head := "POST /m HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
			cases := map[string]string{
				"bare LF in chunk line":    "5\nhello\r\n0\r\n\r\n",
				"bare LF after data":       "5\r\nhello\n0\r\n\r\n",
				"18-digit size":            "000000000000000005\r\nhello\r\n0\r\n\r\n",
				"extension abuse":          strings.Repeat("1;"+strings.Repeat("x", 3000)+"\r\nx\r\n", 8) + "0\r\n\r\n",
				"16 f size":                "ffffffffffffffff\r\nhello",
				"not hex":                  "zz\r\nhello\r\n0\r\n\r\n",
				"CR inside the chunk line": "5\r;x\r\nhello\r\n0\r\n\r\n",
			}
			for name, body := range cases {
				codes := sendRaw(t, p.addr, head+body+"GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
				if len(codes) != 1 || codes[0] != 400 {
					t.Errorf("%s: statuses %v, want one 400 and the connection closed", name, codes)
				}
			}
			got, errs := rec.requests()
			if len(got) != 0 {
				t.Errorf("complete requests reached the backend: %q", got)
			}
			if buffering && len(errs) != 0 {
				t.Errorf("with buffering, truncated requests reached the backend: %q", errs)
			}
			m := p.metricsText(t)
			if metricValue(m, "proxy_upstream_errors_total{") > 0 || metricValue(m, `proxy_gateway_errors_total{code="502"}`) > 0 {
				t.Errorf("client faults counted as upstream errors:\n%s", grepLines(m, "proxy_"))
			}
		})
	}
}

func TestSizeLimits(t *testing.T) {
	rec := &recorder{}
	be := backend(t, rec.handler)
	p := startProxy(t, listenerConfig("max_uri_bytes: 100, max_header_line_bytes: 200, max_headers: 10, max_header_bytes: 1000, max_request_body_bytes: 1000", be.URL))
	many := ""
	for i := range 12 {
		many += fmt.Sprintf("X-%d: v\r\n", i)
	}
	cases := []struct {
		name, req string
		status    int
	}{
		{"uri", "GET /" + strings.Repeat("u", 200) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		{"header line", "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("h", 300) + "\r\n\r\n", 431},
		{"header count", "GET / HTTP/1.1\r\nHost: a\r\n" + many + "\r\n", 431},
		{"header block (the guard)", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: "+strings.Repeat("a", 180)+"\r\n", 6) + "\r\n", 431},
		{"header block (net/http, past twice the limit)", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: "+strings.Repeat("a", 150)+"\r\n", 400) + "\r\n", 431},
		{"declared body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n" + strings.Repeat("b", 5000), 413},
		{"chunked body", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + strings.Repeat("b", 2048) + "\r\n0\r\n\r\n", 413},
		{"within limits", "POST /ok HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc", 200},
	}
	for _, c := range cases {
		codes := sendRaw(t, p.addr, c.req)
		if len(codes) != 1 || codes[0] != c.status {
			t.Errorf("%s: statuses %v, want [%d]", c.name, codes, c.status)
		}
	}
	if got, _ := rec.requests(); len(got) != 1 || got[0] != "POST /ok abc" {
		t.Errorf("backend got %q, want only the request within limits", got)
	}
	if m := p.metricsText(t); !strings.Contains(m, `proxy_client_refused_total{reason="header_too_large",status="431"} 1`) {
		t.Errorf("the header block over max_header_bytes is not the guard's:\n%s", grepLines(m, "proxy_client_refused_total"))
	}
}

func TestSlowUploadHoldsNoBackendSlot(t *testing.T) {
	rec := &recorder{}
	be := backend(t, rec.handler)
	// One backend slot and a short queue: a slow upload holding the slot
	// would make the next request a 503 after 500 ms.
	p := startProxy(t, withBackend(`listeners:
  - {addr: 127.0.0.1:0}
admin: {addr: 127.0.0.1:0}
backends:
  servers: [{url: BACKEND, max_concurrency: 1}]
  queue: {max: 10, timeout: 500ms}
`, be.URL))
	slow, br := rawConn(t, p.addr)
	_, err := io.WriteString(slow, "POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
	must(t, err)
	eventually(t, "the upload to start", func() bool { return strings.Contains(p.metricsText(t), "proxy_client_connections_open 1") })
	for i := range 5 {
		if code, _, body := get(t, p.url+"/fast", nil); code != 200 {
			t.Fatalf("request %d beside a slow upload: %d %q", i, code, body)
		}
	}
	_, err = io.WriteString(slow, "defghij")
	must(t, err)
	resp, body := readResponse(t, br)
	if resp.StatusCode != 200 {
		t.Fatalf("the upload: %d %q", resp.StatusCode, body)
	}
	got, _ := rec.requests()
	if len(got) != 6 || got[5] != "POST /slow abcdefghij" {
		t.Errorf("backend got %q", got)
	}
}

func TestBodyTimeoutAndMinRate(t *testing.T) {
	rec := &recorder{}
	be := backend(t, rec.handler)
	for _, buffering := range []bool{true, false} {
		p := startProxy(t, withBackend(fmt.Sprintf(`listeners:
  - {addr: 127.0.0.1:0, read_body_timeout: 300ms, read_body_min_rate: 1000, request_buffering: %v}
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: BACKEND}]}
`, buffering), be.URL))
		// Nothing after the headers: the gap limit.
		c, br := rawConn(t, p.addr)
		_, err := io.WriteString(c, "POST /stall HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab")
		must(t, err)
		if resp, body := readResponse(t, br); resp.StatusCode != 408 || !resp.Close {
			t.Errorf("buffering %v: stalled body: %d close=%v %q, want 408 and close", buffering, resp.StatusCode, resp.Close, body)
		}
		// A byte every 100 ms never hits the gap limit but is far below
		// 1000 B/s: cut off after about 300 ms + 10 B / 1000 B/s.
		c, br = rawConn(t, p.addr)
		_, err = io.WriteString(c, "POST /drip HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
		must(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 100 {
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		if resp, body := readResponse(t, br); resp.StatusCode != 408 {
			t.Errorf("buffering %v: dripping body: %d %q, want 408", buffering, resp.StatusCode, body)
		}
		c.Close()
		<-done
	}
	if got, _ := rec.requests(); len(got) != 0 {
		t.Errorf("timed-out uploads reached the backend complete: %q", got)
	}
}

func TestConnectionCapReclaimsIdleThenResets(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, "max_client_connections: 3\n"))
	// Three idle keep-alive connections fill the cap.
	var idle []net.Conn
	for i := range 3 {
		c, br := rawConn(t, p.addr)
		_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		must(t, err)
		if resp, _ := readResponse(t, br); resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d", i, resp.StatusCode)
		}
		idle = append(idle, c)
	}
	// The server marks a connection idle after it has written the
	// response, so a client can read it first: wait until all three are.
	eventually(t, "three idle connections", func() bool { return p.srv.conns.Idle() == 3 })
	// A new client is served: an idle one is closed to make room.
	if code, _, _ := get(t, p.url+"/", map[string]string{"Connection": "close"}); code != 200 {
		t.Fatalf("new client at the cap: %d", code)
	}
	eventually(t, "the closed client's place to be free", func() bool {
		return strings.Contains(p.metricsText(t), "proxy_client_connections_open 2")
	})
	// Three connections that are not idle (a request header in progress)
	// hold the cap: the next one is reset at accept, while they are
	// younger than StalledHeaderAfter.
	t0 := time.Now()
	for range 3 {
		c, _ := rawConn(t, p.addr)
		_, err := io.WriteString(c, "GET / HTTP/1.1\r\n")
		must(t, err)
	}
	eventually(t, "the cap to be reached by busy connections", func() bool {
		return strings.Contains(p.metricsText(t), "proxy_client_connections_open 3")
	})
	resets := 0
	if time.Since(t0) < guard.StalledHeaderAfter*8/10 {
		c, err := net.Dial("tcp", p.addr) // the reset may already fail the dial
		if err == nil {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(testTimeout))
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			_, err = c.Read(make([]byte, 1))
		}
		if time.Since(t0) < guard.StalledHeaderAfter {
			if err == nil || !(errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")) {
				t.Errorf("over the cap: read %v, want a reset", err)
			}
			resets = 1
		}
	} else {
		t.Log("machine too slow to see the reset before the stalled connections may be reclaimed")
	}
	// Once their headers are stalled, one of them makes room. A
	// connection's age starts when the server's goroutine sees it
	// (StateNew), which on a busy machine can lag the dial by hundreds of
	// milliseconds: a second of margin.
	time.Sleep(time.Until(t0.Add(guard.StalledHeaderAfter + time.Second)))
	if code, _, _ := get(t, p.url+"/", map[string]string{"Connection": "close"}); code != 200 {
		t.Fatalf("new client beside stalled headers at the cap: %d", code)
	}
	m := p.metricsText(t)
	for _, want := range []string{"proxy_client_connections_max 3", "proxy_client_connections_reclaimed_total 4",
		fmt.Sprintf("proxy_client_connections_reset_total %d", resets)} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(m, "proxy_client_connections"))
		}
	}
	// The admin API stays reachable at the cap.
	if code, _, _ := get(t, p.admin+"/state", nil); code != 200 {
		t.Errorf("admin at the cap: %d", code)
	}
	_ = idle
}

func TestSendTimeoutDisconnectsANonReader(t *testing.T) {
	big := strings.Repeat("z", 8<<20)
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, big) })
	p := startProxy(t, listenerConfig("send_timeout: 300ms", be.URL))
	c, _ := rawConn(t, p.addr)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	_, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	must(t, err)
	// Read nothing: the proxy's write blocks, then times out and the
	// request ends, freeing its backend slot.
	eventually(t, "the non-reading client's request to end", func() bool { return p.state(t).InFlight == 0 && p.state(t).Backends.InFlight == 0 })
}

func TestGarbageBackendIsNotEchoed(t *testing.T) {
	backendAddr := rawBackend(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 4096))
		_, _ = io.WriteString(c, "SECRET-INTERNAL-TOKEN garbage \x00\x01 not http\r\n\r\n")
	})
	p := startProxy(t, baseConfig("http://"+backendAddr, ""))
	code, _, body := get(t, p.url+"/", nil)
	if code != 502 || strings.Contains(body, "SECRET") || strings.Contains(body, "garbage") || !strings.Contains(body, "invalid HTTP response") {
		t.Errorf("got %d %q, want a 502 naming an invalid response without the backend's bytes", code, body)
	}
	if m := p.metricsText(t); !strings.Contains(m, `cause="protocol"`) {
		t.Errorf("metrics lack the protocol cause:\n%s", grepLines(m, "proxy_upstream"))
	}
}

// TestTLSHTTP1IsScanned: HTTP/1.1 over TLS gets the same smuggling check
// as plaintext, keeps its TLS state (X-Forwarded-Proto https), and
// HTTP/2 is still negotiated (TestHTTP2OverTLS).
func TestTLSHTTP1IsScanned(t *testing.T) {
	rec := &recorder{}
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Got-Proto", r.Header.Get("X-Forwarded-Proto"))
		rec.handler(w, r)
	})
	certFile, keyFile, pool := localhostCert(t)
	p := startProxy(t, tlsListenerConfig(certFile, keyFile, be.URL))
	send := func(req string) []string {
		c, err := tls.Dial("tcp", p.addr, &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}})
		must(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(testTimeout))
		_, err = io.WriteString(c, req)
		must(t, err)
		var out []string
		for _, resp := range readResponses(bufio.NewReader(c)) {
			out = append(out, fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("X-Got-Proto")))
		}
		return out
	}
	if got := send("GET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"); len(got) != 1 || got[0] != "200 https" {
		t.Errorf("plain request over TLS: %q, want [200 https]", got)
	}
	smuggle := map[string]string{
		"CL.TE":           "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n",
		"HTTP/1.0 and TE": "POST /x HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n21\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n\r\n0\r\n\r\n",
	}
	for name, req := range smuggle {
		if got := send(req); len(got) != 1 || !strings.HasPrefix(got[0], "400") {
			t.Errorf("%s over TLS: %q, want one 400", name, got)
		}
	}
	if got, _ := rec.requests(); len(got) != 1 || got[0] != "GET /ok " {
		t.Errorf("backend got %q, want only GET /ok", got)
	}
}

// TestRefusalDoesNotWaitForTheBody: a request refused for its body is
// answered and its connection closed at once, even if the client keeps
// dripping the rest of a declared body.
func TestRefusalDoesNotWaitForTheBody(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, listenerConfig("max_request_body_bytes: 10, read_body_timeout: 200ms", be.URL))
	for _, req := range []string{
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nabc",                                             // 413 before reading
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" + strings.Repeat("x", 32) + "\r\n", // 413 while reading
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab",                                                 // 408
	} {
		c, br := rawConn(t, p.addr)
		_, err := io.WriteString(c, req)
		must(t, err)
		resp, _ := readResponse(t, br)
		start := time.Now()
		// The proxy closes the connection without reading what follows.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = br.ReadByte()
		if err == nil || time.Since(start) > 3*time.Second {
			t.Errorf("%d: after the answer: %v after %v, want the connection closed at once", resp.StatusCode, err, time.Since(start))
		}
	}
}

// TestReadTimeoutStillBoundsTheBody: the body deadlines replace the
// connection deadline read_timeout set, so they include it.
func TestReadTimeoutStillBoundsTheBody(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, listenerConfig("read_timeout: 500ms", be.URL))
	c, br := rawConn(t, p.addr)
	_, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab")
	must(t, err)
	start := time.Now()
	resp, _ := readResponse(t, br)
	if resp.StatusCode != 408 || time.Since(start) > 10*time.Second {
		t.Errorf("status %d after %v, want 408 after about read_timeout (not read_body_timeout, 60s)", resp.StatusCode, time.Since(start))
	}
}

// metricValue sums the values of the metrics lines of text that start with
// prefix (0 when there is none).
func metricValue(text, prefix string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i >= 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}
