// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcert"
)

// echoHeaders is a backend that reports the request it got.
func echoHeaders(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Got-Host", r.Host)
	w.Header().Set("X-Got-Path", r.URL.RequestURI())
	for k, v := range r.Header {
		w.Header()["X-Got-"+k] = v
	}
	// hop-by-hop headers in the response must not reach the client
	w.Header().Set("Connection", "X-Resp-Hop")
	w.Header().Set("X-Resp-Hop", "secret")
	w.Header().Set("Keep-Alive", "timeout=5")
	body, _ := io.ReadAll(r.Body)
	_, _ = w.Write(body)
}

func TestForwardedHeadersAndHopByHop(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, `classes:
  trusted_proxies: [10.0.0.0/8]
`))
	req := "GET /a/b?q=1 HTTP/1.1\r\nHost: shop.example\r\n" +
		"X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\n" +
		"Forwarded: for=6.6.6.6\r\nX-Sluice-Quality: 0.1\r\n" +
		"Connection: keep-alive, X-Hop\r\nX-Hop: drop me\r\nKeep-Alive: 300\r\nTE: gzip, trailers\r\n" +
		"Proxy-Connection: keep-alive\r\nX-End: keep me\r\n\r\n"
	resp, _ := rawRoundTrip(t, p.addr, req)
	h := resp.Header
	checks := []struct{ name, got, want string }{
		{"status", resp.Status, "200 OK"},
		{"host preserved", h.Get("X-Got-Host"), "shop.example"},
		{"path and query", h.Get("X-Got-Path"), "/a/b?q=1"},
		// the peer (127.0.0.1) is not trusted: its XFF and X-Forwarded-* are replaced
		{"xff", strings.Join(h.Values("X-Got-X-Forwarded-For"), ","), "127.0.0.1"},
		{"xf-host", h.Get("X-Got-X-Forwarded-Host"), "shop.example"},
		{"xf-proto", h.Get("X-Got-X-Forwarded-Proto"), "http"},
		{"forwarded removed", h.Get("X-Got-Forwarded"), ""},
		{"spoofed quality removed", h.Get("X-Got-X-Sluice-Quality"), ""},
		{"connection-listed removed", h.Get("X-Got-X-Hop"), ""},
		{"keep-alive removed", h.Get("X-Got-Keep-Alive"), ""},
		// TE is hop-by-hop; ReverseProxy forwards only its "trailers" token (gRPC)
		{"te reduced to trailers", h.Get("X-Got-Te"), "trailers"},
		{"proxy-connection removed", h.Get("X-Got-Proxy-Connection"), ""},
		{"end-to-end kept", h.Get("X-Got-X-End"), "keep me"},
		{"response hop removed", h.Get("X-Resp-Hop"), ""},
		{"response keep-alive removed", h.Get("Keep-Alive"), ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestForwardedFromTrustedProxyAppends(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, `classes:
  trusted_proxies: [127.0.0.0/8]
`))
	code, h, _ := get(t, p.url+"/", map[string]string{
		"X-Forwarded-For": "203.0.113.7, 10.1.1.1", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "www.example"})
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	if got := h.Get("X-Got-X-Forwarded-For"); got != "203.0.113.7, 10.1.1.1, 127.0.0.1" {
		t.Errorf("xff %q, want the trusted chain with the peer appended", got)
	}
	if got := h.Get("X-Got-X-Forwarded-Proto"); got != "https" {
		t.Errorf("xf-proto %q, want https kept from the trusted proxy", got)
	}
	if got := h.Get("X-Got-X-Forwarded-Host"); got != "www.example" {
		t.Errorf("xf-host %q, want www.example kept from the trusted proxy", got)
	}
}

func TestRequestBodyAndBasePath(t *testing.T) {
	be := backend(t, echoHeaders)
	cfg := withBackend(`listeners:
  - addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
backends:
  preserve_host: false
  servers:
    - url: BACKEND/base
`, be.URL)
	p := startProxy(t, cfg)
	body := strings.Repeat("0123456789", 10000)
	resp, err := client.Post(p.url+"/x", "text/plain", strings.NewReader(body))
	must(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != body {
		t.Errorf("body of %d bytes came back as %d bytes", len(body), len(got))
	}
	if p := resp.Header.Get("X-Got-Path"); p != "/base/x" {
		t.Errorf("path %q, want /base/x", p)
	}
	if h := resp.Header.Get("X-Got-Host"); h != strings.TrimPrefix(be.URL, "http://") {
		t.Errorf("host %q, want the backend's with preserve_host: false", h)
	}
}

// heldStream is a backend that answers with first, flushed, and holds
// the response open until release is closed, then writes rest (or until
// the client goes).
func heldStream(t *testing.T, contentType, first, rest string) (be *httptest.Server, release chan struct{}) {
	release = make(chan struct{})
	be = backend(t, func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		_, _ = io.WriteString(w, first)
		http.NewResponseController(w).Flush()
		select {
		case <-release:
			_, _ = io.WriteString(w, rest)
		case <-r.Context().Done():
		}
	})
	return be, release
}

func TestStreamingFlushesPassThrough(t *testing.T) {
	be, release := heldStream(t, "", "first\n", "second\n")
	p := startProxy(t, baseConfig(be.URL, ""))
	resp, err := client.Get(p.url + "/stream")
	must(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The first line must arrive while the backend still holds the
	// response open: the proxy flushed it.
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	line, err = br.ReadString('\n')
	if err != nil || line != "second\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
}

func TestEventStreamIsLongLived(t *testing.T) {
	be, release := heldStream(t, "text/event-stream", "data: hello\n\n", "")
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: events
    match: {path_prefix: /events}
    controller: static-concurrency
    params: {limit: 1}
    queue: {max: 0, timeout: 1s}
`))
	resp, err := client.Get(p.url + "/events")
	must(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: hello\n" {
		t.Fatalf("event %q, %v", line, err)
	}
	// While the stream is open it holds no slot: the stage's limit of 1
	// still admits another stream, and the pool counts it as a stream.
	eventually(t, "the stream to be counted", func() bool {
		st := p.state(t)
		return st.Streams == 1 && st.Backends.InFlight == 0
	})
	resp2, err := client.Get(p.url + "/events")
	must(t, err)
	if resp2.StatusCode != 200 {
		t.Errorf("second stream: status %d, want 200 (the first must not hold the slot)", resp2.StatusCode)
	}
	close(release)
	_, _ = io.Copy(io.Discard, resp2.Body)
	resp2.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	eventually(t, "streams to end", func() bool { return p.state(t).Streams == 0 })
	st := p.state(t)
	for _, s := range st.Stages {
		if s.Name != "events" {
			continue
		}
		if s.InFlightLimited == nil || s.InFlightLimited.InFlight != 0 {
			t.Errorf("stage concurrency after streams: %+v", s.InFlightLimited)
		}
	}
}

func TestLongLivedBeyondStageLimit(t *testing.T) {
	be, release := heldStream(t, "", "tick\n", "")
	p := startProxy(t, baseConfig(be.URL, `stages:
  - name: slow
    match: {path_prefix: /}
    long_lived: 50ms
`))
	resp, err := client.Get(p.url + "/")
	must(t, err)
	defer resp.Body.Close()
	// After long_lived the response no longer holds its pool slot.
	eventually(t, "the response to become a stream", func() bool {
		st := p.state(t)
		return st.Streams == 1 && st.Backends.InFlight == 0 && st.Backends.Servers[0].InFlight == 0
	})
	close(release)
	_, _ = io.Copy(io.Discard, resp.Body)
	eventually(t, "the stream to end", func() bool { return p.state(t).Streams == 0 })
}

func TestWebSocketUpgradeEcho(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "no upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		// echo every byte back until the client closes
		buf := make([]byte, 1024)
		for {
			n, err := brw.Read(buf)
			if n > 0 {
				if _, werr := conn.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	p := startProxy(t, baseConfig(be.URL, ""))
	c, br := rawConn(t, p.addr)
	_, err := io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	must(t, err)
	resp, err := http.ReadResponse(br, nil)
	must(t, err)
	if resp.StatusCode != 101 {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	// Bytes after the upgrade are not HTTP; they include what would be a
	// smuggling shape if they were scanned.
	for _, msg := range []string{"hello", "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"} {
		_, err = io.WriteString(c, msg)
		must(t, err)
		got := make([]byte, len(msg))
		_, err = io.ReadFull(br, got)
		must(t, err)
		if string(got) != msg {
			t.Fatalf("echo %q, want %q", got, msg)
		}
	}
	eventually(t, "the upgrade to count as a stream", func() bool {
		st := p.state(t)
		return st.Streams == 1 && st.Backends.InFlight == 0
	})
	// An upgraded connection is never buffered (buffering is on by
	// default): no buffer memory, no file, no buffered response.
	if b := p.state(t).ResponseBuffering; !b.Enabled || b.MemoryBytes != 0 || b.Files != 0 {
		t.Errorf("response buffers during the upgrade: %+v", b)
	}
	m := p.metricsText(t)
	for _, want := range []string{`proxy_responses_buffered_total{where="memory"} 0`, `proxy_responses_buffered_total{where="disk"} 0`} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "proxy_response"))
		}
	}
	c.Close()
	eventually(t, "the upgraded connection to end", func() bool { return p.state(t).Streams == 0 })
}

func TestBadGatewayAndTimeoutBodies(t *testing.T) {
	// a port with nothing listening
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	dead := "http://" + ln.Addr().String()
	ln.Close()

	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	slow := backend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	closer := backend(t, func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	cases := []struct {
		name, url, extra string
		status           int
		body             string
	}{
		{"unreachable", dead, "", 502, "backend unreachable"},
		{"closed", closer.URL, "", 502, "closed the connection"},
		{"header timeout", slow.URL, "  timeouts: {response_header: 100ms}\n", 504, "no response headers"},
		{"overall timeout", slow.URL, "  timeouts: {overall: 100ms}\n", 504, "no complete response"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startProxy(t, baseConfig(c.url, c.extra))
			code, _, body := get(t, p.url+"/", nil)
			if code != c.status || !strings.Contains(body, c.body) || !strings.HasPrefix(body, "sluice: ") {
				t.Errorf("got %d %q, want %d with %q", code, body, c.status, c.body)
			}
			m := p.metricsText(t)
			if !strings.Contains(m, fmt.Sprintf(`proxy_gateway_errors_total{code="%d"} 1`, c.status)) {
				t.Errorf("metrics lack the %d count:\n%s", c.status, grepLines(m, "proxy_gateway"))
			}
			if !strings.Contains(m, `proxy_upstream_errors_total{backend="`+c.url+`"`) {
				t.Errorf("metrics lack the upstream error:\n%s", grepLines(m, "proxy_upstream"))
			}
		})
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestSmugglingShapesRejected(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, ""))
	cases := []struct {
		name   string
		req    string
		status int
	}{
		{"cl and te", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"te and cl", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 6\r\n\r\n0\r\n\r\n", 400},
		{"duplicate differing cl", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", 400},
		{"unsupported te", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
		{"space before colon", "GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 0\r\n\r\n", 400},
		{"options star", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 200},
		{"chunked ok", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, br := rawConn(t, p.addr)
			_, err := io.WriteString(conn, c.req)
			must(t, err)
			resp, body := readResponse(t, br)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%q), want %d", resp.StatusCode, body, c.status)
			}
			if c.status == 200 {
				if c.name == "chunked ok" && body != "abc" {
					t.Errorf("chunked body %q, want abc", body)
				}
				return
			}
			// the connection is closed: nothing smuggled is answered
			if _, err := http.ReadResponse(br, nil); err == nil {
				t.Errorf("a second response followed the %d", c.status)
			}
		})
	}
	if m := p.metricsText(t); !strings.Contains(m, "proxy_smuggling_rejected_total 3") {
		t.Errorf("smuggling counter:\n%s", grepLines(m, "smuggling"))
	}
}

func TestPipelinedRequestsKeepFraming(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, baseConfig(be.URL, ""))
	conn, br := rawConn(t, p.addr)
	reqs := "POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" +
		"POST /2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nGET \r\n0\r\n\r\n" +
		"GET /3 HTTP/1.1\r\nHost: a\r\n\r\n" +
		"POST /4 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	_, err := io.WriteString(conn, reqs)
	must(t, err)
	want := []struct {
		status int
		path   string
	}{{200, "/1"}, {200, "/2"}, {200, "/3"}, {400, ""}}
	for i, w := range want {
		resp, _ := readResponse(t, br)
		if resp.StatusCode != w.status || resp.Header.Get("X-Got-Path") != w.path {
			t.Errorf("response %d: %d %q, want %d %q", i+1, resp.StatusCode, resp.Header.Get("X-Got-Path"), w.status, w.path)
		}
	}
}

// TestExpectContinueAnsweredOnce: a POST with "Expect: 100-continue"
// whose body comes at once, with a GET pipelined behind it, gets one 100
// (the proxy's own, sent when it reads the body) and then both answers;
// the backend is not asked to continue (it would send a second 100).
// With and without request buffering.
func TestExpectContinueAnsweredOnce(t *testing.T) {
	for _, buffering := range []bool{true, false} {
		t.Run(fmt.Sprintf("request_buffering=%v", buffering), func(t *testing.T) {
			be := backend(t, echoHeaders)
			p := startProxy(t, withBackend(fmt.Sprintf(`listeners:
  - {addr: 127.0.0.1:0, request_buffering: %v}
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: BACKEND}]}
`, buffering), be.URL))
			for i := range 20 {
				conn, br := rawConn(t, p.addr)
				_, err := io.WriteString(conn, "POST /1 HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"+
					"GET /2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
				must(t, err)
				var got []int
				for {
					resp, body := readResponse(t, br)
					got = append(got, resp.StatusCode)
					if e := resp.Header.Get("X-Got-Expect"); e != "" {
						t.Errorf("run %d: the backend got Expect: %s", i, e)
					}
					if resp.StatusCode == 200 && resp.Header.Get("X-Got-Path") == "/1" && body != "hello" {
						t.Errorf("run %d: the backend got body %q", i, body)
					}
					if resp.Close || len(got) > 4 {
						break
					}
				}
				if fmt.Sprint(got) != "[100 200 200]" {
					t.Fatalf("run %d: answers %v, want [100 200 200]", i, got)
				}
				conn.Close()
			}
		})
	}
}

// localhostCert writes a server certificate (serverLeaf) signed by a new
// test CA and returns the file names and a pool that trusts the CA.
func localhostCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	ca := testcert.NewCA(t, "sluice test CA")
	certFile, keyFile = serverLeaf(t, ca, "sluice test").Write(t, t.TempDir(), "server")
	return certFile, keyFile, ca.Pool()
}

func TestHTTP2OverTLS(t *testing.T) {
	be := backend(t, echoHeaders)
	certFile, keyFile, pool := localhostCert(t)
	p := startProxy(t, tlsListenerConfig(certFile, keyFile, be.URL))
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: testTimeout}
	resp, err := c.Get("https://" + p.addr + "/h2")
	must(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", resp.Proto)
	}
	if resp.StatusCode != 200 || resp.Header.Get("X-Got-X-Forwarded-Proto") != "https" {
		t.Errorf("status %d, X-Forwarded-Proto %q", resp.StatusCode, resp.Header.Get("X-Got-X-Forwarded-Proto"))
	}
}

func TestPoolQueueTimeoutIs503(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	cfg := baseConfig(be.URL, "      max_concurrency: 1\n  queue: {max: 1, timeout: 50ms}\n")
	p := startProxy(t, cfg)
	first := goGet(p.url + "/hold")
	eventually(t, "the first request to hold the only slot", func() bool { return p.state(t).Backends.InFlight == 1 })
	code, h, body := get(t, p.url+"/wait", nil)
	if code != 503 || h.Get("Retry-After") == "" || !strings.Contains(body, "backend pool saturated") {
		t.Errorf("queued request: %d %q Retry-After %q", code, body, h.Get("Retry-After"))
	}
	once.Do(func() { close(release) })
	if a := <-first; a.code != 200 {
		t.Errorf("first request: %d (%v)", a.code, a.err)
	}
	m := p.metricsText(t)
	if !strings.Contains(m, `proxy_pool_rejected_total{cause="queue_timeout"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(m, "proxy_pool"))
	}
	if st := p.state(t); st.Backends.Queue.TimedOut != 1 {
		t.Errorf("state queue: %+v", st.Backends.Queue)
	}
}

func TestPoolBalancing(t *testing.T) {
	for _, bal := range []string{BalanceRoundRobin, BalanceLeastInFlight} {
		t.Run(bal, func(t *testing.T) {
			var mu sync.Mutex
			hits := map[string]int{}
			var urls []string
			for i := range 3 {
				name := fmt.Sprint(i)
				be := backend(t, func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					hits[name]++
					mu.Unlock()
				})
				urls = append(urls, be.URL)
			}
			p := startProxy(t, fmt.Sprintf(`listeners:
  - addr: 127.0.0.1:0
admin:
  addr: 127.0.0.1:0
backends:
  balance: %s
  servers:
    - url: %s
    - url: %s
    - url: %s
`, bal, urls[0], urls[1], urls[2]))
			for range 30 {
				if code, _, _ := get(t, p.url+"/", nil); code != 200 {
					t.Fatalf("status %d", code)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for i := range 3 {
				n := hits[fmt.Sprint(i)]
				if bal == BalanceRoundRobin && n != 10 {
					t.Errorf("round-robin: server %d got %d of 30", i, n)
				}
				if bal == BalanceLeastInFlight && n == 0 {
					t.Errorf("least-in-flight: server %d got nothing (ties must rotate)", i)
				}
			}
		})
	}
}

func TestPoolRespectsPerServerLimit(t *testing.T) {
	// Unit level: with every slot of a 2+1 pool taken, each server is at
	// its limit and the next Acquire waits.
	cfg := BackendsConfig{Servers: []ServerConfig{{URL: "http://127.0.0.1:1", MaxConcurrency: 2}, {URL: "http://127.0.0.1:2", MaxConcurrency: 1}},
		Balance: BalanceLeastInFlight}
	full := 0
	cfg.Queue.Max = &full
	cfg.Queue.Timeout = time.Second
	cfg.Timeouts.Dial, cfg.Timeouts.ResponseHeader, cfg.MaxIdleConnsPerHost, cfg.IdleConnTimeout = time.Second, time.Second, 1, time.Second
	p, err := NewPool(cfg)
	must(t, err)
	var got []*Backend
	for range 3 {
		b, err := p.Acquire(t.Context())
		must(t, err)
		got = append(got, b)
	}
	if a, b := p.Backends()[0].InFlight(), p.Backends()[1].InFlight(); a != 2 || b != 1 {
		t.Errorf("in flight %d, %d; want 2, 1", a, b)
	}
	if _, err := p.Acquire(t.Context()); err != ErrPoolQueueFull {
		t.Errorf("fourth Acquire: %v, want ErrPoolQueueFull", err)
	}
	for _, b := range got {
		p.Release(b)
	}
	if p.InFlight() != 0 || p.Backends()[0].InFlight() != 0 {
		t.Errorf("after release: %+v", p.State())
	}
}

// Through the proxy: a 103 Early Hints from the backend reaches the
// client before the answer.
func TestProxyForwardsEarlyHints(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		_, _ = io.WriteString(w, "page")
	})
	r := startProxy(t, baseConfig(be.URL, ""))
	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, h.Get("Link"))
		return nil
	}}
	req, err := http.NewRequest("GET", r.url+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "page" || len(hints) != 1 || hints[0] != "</a.css>; rel=preload" {
		t.Fatalf("body %q, hints %q", b, hints)
	}
}
