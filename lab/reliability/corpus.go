// SPDX-License-Identifier: Apache-2.0

// Package reliability is sluice's reliability suite: a raw-socket
// request-smuggling corpus, backend faults, slow clients, connection
// exhaustion, reload under load, recovery after a backend stall and a
// soak, run against real sockets and real processes.
//
// The short forms are the package's tests (go test ./reliability, part of
// make test). The long forms — slowhttptest attacks, 25,000 connections,
// a 40-second backend stall under 300 req/s, a 10-minute soak, and the
// same tests in front of nginx for comparison — are the command
// ./reliability/cmd/sluice-reliability, run by make reliability
// (scripts/reliability.sh); docs/reliability.md has their results.
package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Case is one raw request stream sent on a fresh connection.
//
// Paths are written with the placeholder {p}, replaced by a prefix of
// the case's own (/c07) so that what reaches the backend can be told
// apart. Want lists what a correct HTTP/1.1 parser (RFC 9112, strict)
// forwards: the client's own valid requests before the first faulty one,
// each as "METHOD path body". A proxy passes a case when what reaches the
// backend is a subset of Want (refusing more is allowed; Exact cases —
// plain valid traffic — must be forwarded completely), when no answer is
// a 502 or 504, and, for a Malformed body, when the faulty request is
// answered 400. Requests whose path contains "smuggled" are an
// attacker's hidden requests: they are never in Want.
type Case struct {
	Name      string
	Raw       string
	Want      []string
	Exact     bool  // every request in Want must reach the backend
	Malformed bool  // a malformed request body: its answer must be 400
	Statuses  []int // when set, exactly these answers, in order (1xx included)
}

// CL+TE with a hidden request in its body: the classic smuggling shape,
// pipelined behind the request that once turned the scanner off.
const clte = "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 43\r\nTransfer-Encoding: chunked\r\n\r\n" +
	"0\r\n\r\nGET {p}/smuggled HTTP/1.1\r\nHost: a\r\n\r\n"

// te and chunked start a chunked POST to path.
func te(path string) string {
	return "POST {p}" + path + " HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
}

func get(path string) string { return "GET {p}" + path + " HTTP/1.1\r\nHost: a\r\n\r\n" }

// expectPost is a POST that expects 100-continue and sends its 5-byte
// body at once, without waiting for the 100.
func expectPost(path string) string {
	return "POST {p}" + path + " HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"
}

// getClose is get with Connection: close: the answer ends the
// connection, so a case that ends with it needs no quiet wait.
func getClose(path string) string {
	return "GET {p}" + path + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
}

// ExpectCases are the cases of a POST with "Expect: 100-continue" whose
// body is sent at once, with a pipelined GET behind it: exactly one 100,
// then the two answers. Before the proxy answered the expectation itself,
// the backend's 100 was passed on after the proxy's own (always with
// request buffering; without it, now and then, when the standard
// transport's writer started the body before its reader had forwarded the
// backend's 100). Part of Corpus; TestExpectContinueRepeated runs them
// many times over.
func ExpectCases() []Case {
	return []Case{
		{Name: "expect 100-continue with its body at once, then get", Raw: expectPost("/ok1") + getClose("/ok2"),
			Want: []string{"POST {p}/ok1 hello", "GET {p}/ok2 "}, Exact: true, Statuses: []int{100, 200, 200}},
		{Name: "expect 100-continue with its body at once, then get, three times",
			Raw:   expectPost("/ok1") + get("/ok2") + expectPost("/ok3") + get("/ok4") + expectPost("/ok5") + getClose("/ok6"),
			Want:  []string{"POST {p}/ok1 hello", "GET {p}/ok2 ", "POST {p}/ok3 hello", "GET {p}/ok4 ", "POST {p}/ok5 hello", "GET {p}/ok6 "},
			Exact: true, Statuses: []int{100, 200, 200, 100, 200, 200, 100, 200, 200}},
	}
}

var pad = strings.Repeat(" ", 70)

// Corpus returns the smuggling corpus.
func Corpus() []Case {
	many := ""
	for i := range 10000 {
		many += fmt.Sprintf("X-%d: v\r\n", i)
	}
	return append(ExpectCases(), []Case{
		// Valid traffic, forwarded completely.
		{Name: "get", Raw: get("/ok1"), Want: []string{"GET {p}/ok1 "}, Exact: true},
		{Name: "pipelined gets", Raw: get("/ok1") + get("/ok2") + get("/ok3"),
			Want: []string{"GET {p}/ok1 ", "GET {p}/ok2 ", "GET {p}/ok3 "}, Exact: true},
		{Name: "content-length body then get", Raw: "POST {p}/ok1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" + get("/ok2"),
			Want: []string{"POST {p}/ok1 hello", "GET {p}/ok2 "}, Exact: true},
		{Name: "chunked body then get", Raw: te("/ok1") + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" + get("/ok2"),
			Want: []string{"POST {p}/ok1 hello world", "GET {p}/ok2 "}, Exact: true},
		{Name: "chunk extensions", Raw: te("/ok1") + "5;a=b;c=\"d\"\r\nhello\r\n0;z\r\n\r\n" + get("/ok2"),
			Want: []string{"POST {p}/ok1 hello", "GET {p}/ok2 "}, Exact: true},
		{Name: "uppercase hex chunk size", Raw: te("/ok1") + "A\r\n0123456789\r\n0\r\n\r\n",
			Want: []string{"POST {p}/ok1 0123456789"}, Exact: true},
		{Name: "chunked trailer", Raw: te("/ok1") + "5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n" + get("/ok2"),
			Want: []string{"POST {p}/ok1 hello", "GET {p}/ok2 "}},
		{Name: "http/1.0 with content-length", Raw: "POST {p}/ok1 HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello",
			Want: []string{"POST {p}/ok1 hello"}, Exact: true},
		{Name: "get with a body", Raw: "GET {p}/ok1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc" + get("/ok2"),
			Want: []string{"GET {p}/ok1 abc", "GET {p}/ok2 "}},
		{Name: "bare LF line endings", Raw: "GET {p}/ok1 HTTP/1.1\nHost: a\n\n" + get("/ok2"),
			Want: []string{"GET {p}/ok1 ", "GET {p}/ok2 "}},
		{Name: "content-length with leading zeros", Raw: "POST {p}/ok1 HTTP/1.1\r\nHost: a\r\nContent-Length: 005\r\n\r\nhello",
			Want: []string{"POST {p}/ok1 hello"}},
		{Name: "transfer-encoding uppercase", Raw: "POST {p}/ok1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			Want: []string{"POST {p}/ok1 hello"}},
		{Name: "content-length with a tab", Raw: "POST {p}/ok1 HTTP/1.1\r\nHost: a\r\nContent-Length:\t5\t\r\n\r\nhello",
			Want: []string{"POST {p}/ok1 hello"}},
		{Name: "identical duplicate content-length", Raw: "POST {p}/ok1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
			Want: []string{"POST {p}/ok1 hello"}},

		// The shapes that once turned the scanner off, then CL+TE.
		{Name: "16-digit chunk size, then CL+TE", Raw: te("/ok1") + "0000000000000005\r\nhello\r\n0\r\n\r\n" + clte,
			Want: []string{"POST {p}/ok1 hello"}},
		{Name: "padded transfer-encoding, then CL+TE", Raw: "POST {p}/ok1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked" + pad + "\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + clte,
			Want: []string{"POST {p}/ok1 hello"}},
		{Name: "padded content-length, then CL+TE", Raw: "POST {p}/ok1 HTTP/1.1\r\nHost: a\r\nContent-Length:" + pad + "5" + pad + "\r\n\r\nhello" + clte,
			Want: []string{"POST {p}/ok1 hello"}},
		{Name: "padded chunk-size line, then CL+TE", Raw: te("/ok1") + "5" + pad + "\r\nhello\r\n0\r\n\r\n" + clte, Malformed: true},
		{Name: "long chunk extension, then CL+TE", Raw: te("/ok1") + "5;" + strings.Repeat("e", 200) + "\r\nhello\r\n0\r\n\r\n" + clte,
			Want: []string{"POST {p}/ok1 hello"}},
		{Name: "long header line, then CL+TE", Raw: "GET {p}/ok1 HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("y", 500) + "\r\n\r\n" + clte,
			Want: []string{"GET {p}/ok1 "}},
		{Name: "obs-fold, then CL+TE", Raw: "GET {p}/x HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n" + clte},
		{Name: "30-digit content-length, then CL+TE", Raw: "POST {p}/ok1 HTTP/1.1\r\nHost: a\r\nContent-Length: 000000000000000000000000000005\r\n\r\nhello" + clte,
			Want: []string{"POST {p}/ok1 hello"}},

		// Classic request smuggling.
		{Name: "CL.TE", Raw: clte},
		{Name: "TE.CL", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n" +
			"2c\r\nGET {p}/smuggled HTTP/1.1\r\nHost: a\r\nX: 1234567\r\n0\r\n\r\n"},
		{Name: "CL.TE, content-length 0", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "TE obfuscated: chunked, identity", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked, identity\r\n\r\n" + "0\r\n\r\n" + get("/smuggled")},
		{Name: "TE obfuscated: xchunked", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 40\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "TE obfuscated: space before colon", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "TE obfuscated: leading tab", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "TE obfuscated: vertical tab", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\x0b\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "TE obfuscated: quoted", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: \"chunked\"\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "TE obfuscated: folded", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "TE obfuscated: leading space line", Raw: "POST {p}/x HTTP/1.1\r\n Transfer-Encoding: chunked\r\nHost: a\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "two transfer-encoding headers", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "TE with parameters", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;q=1\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "http/1.0 keep-alive with TE", Raw: "POST {p}/x HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"29\r\nGET {p}/smuggled HTTP/1.1\r\nHost: a\r\n\r\n\r\n0\r\n\r\n"},
		{Name: "http/1.0 with TE and CL", Raw: "POST {p}/x HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/smuggled")},
		{Name: "differing duplicate content-length", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n" + get("/smuggled")},
		{Name: "content-length 5 and 05", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 05\r\n\r\nhello" + get("/smuggled")},
		{Name: "content-length list", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nhello" + get("/smuggled")},
		{Name: "content-length with sign", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello" + get("/smuggled")},
		{Name: "negative content-length", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n" + get("/smuggled")},
		{Name: "hex content-length", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\nhello" + get("/smuggled")},
		{Name: "content-length overflow", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551621\r\n\r\nhello" + get("/smuggled")},
		{Name: "empty content-length", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n" + get("/smuggled")},
		{Name: "content-length space before colon", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length : 44\r\n\r\n" + get("/smuggled")},
		{Name: "bare CR in a header", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nX: y\rContent-Length: 44\r\n\r\n" + get("/smuggled")},
		{Name: "NUL in a header value", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nX: y\x00z\r\nContent-Length: 44\r\n\r\n" + get("/smuggled")},
		{Name: "non-token header name", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent[Length]: 44\r\n\r\n" + get("/smuggled")},
		{Name: "header line without colon", Raw: "POST {p}/x HTTP/1.1\r\nHost: a\r\nContent-Length 44\r\n\r\n" + get("/smuggled")},
		{Name: "extra spaces in the request line", Raw: "GET  {p}/x HTTP/1.1\r\nHost: a\r\n\r\n" + get("/smuggled")},
		{Name: "lower-case protocol", Raw: "GET {p}/x http/1.1\r\nHost: a\r\n\r\n" + get("/smuggled")},
		{Name: "HTTP/2 preface on plaintext", Raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + get("/smuggled")},
		{Name: "HTTP/0.9", Raw: "GET {p}/x HTTP/0.9\r\n\r\n" + get("/smuggled")},

		// Malformed chunked bodies: 400, nothing (or only a complete valid
		// request) upstream.
		{Name: "bare LF in a chunk-size line", Raw: te("/x") + "5\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "bare LF after chunk data", Raw: te("/x") + "5\r\nhello\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "bare CR in a chunk-size line", Raw: te("/x") + "5\r;a\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "17-digit chunk size", Raw: te("/x") + "00000000000000005\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "18-digit chunk size", Raw: te("/x") + "000000000000000005\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "chunk size of 16 f", Raw: te("/x") + "ffffffffffffffff\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "negative chunk size", Raw: te("/x") + "-5\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "hex prefix chunk size", Raw: te("/x") + "0x5\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "empty chunk size", Raw: te("/x") + "\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "chunk data longer than its size", Raw: te("/x") + "3\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "chunk data shorter than its size", Raw: te("/x") + "8\r\nhello\r\n0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "chunk-extension abuse", Raw: te("/x") + strings.Repeat("1;"+strings.Repeat("x", 3000)+"\r\nx\r\n", 8) + "0\r\n\r\n" + get("/smuggled"), Malformed: true},
		{Name: "last chunk without the final CRLF", Raw: te("/x") + "5\r\nhello\r\n0\r\n" + get("/smuggled"), Malformed: true},
		{Name: "bare LF ending the trailer section", Raw: te("/x") + "5\r\nhello\r\n0\r\n\n" + get("/smuggled"), Malformed: true},
		{Name: "folded trailer", Raw: te("/x") + "5\r\nhello\r\n0\r\nX: a\r\n b\r\n\r\n" + get("/smuggled"), Malformed: true},

		// Size limits (nginx: 400 or 414).
		{Name: "200 KB header line", Raw: "GET {p}/x HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("h", 200<<10) + "\r\n\r\n"},
		{Name: "10,000 headers", Raw: "GET {p}/x HTTP/1.1\r\nHost: a\r\n" + many + "\r\n"},
		{Name: "100 KB URL", Raw: "GET {p}/" + strings.Repeat("u", 100<<10) + " HTTP/1.1\r\nHost: a\r\n\r\n"},
	}...)
}

// Outcome is what happened to one case.
type Outcome struct {
	Case      Case
	Prefix    string
	Statuses  []int    // answers in order; 0 for none before the connection ended or went quiet
	Forwarded []string // what reached the backend, "METHOD path body" (TRUNCATED for a body that failed)
}

// Problems returns why o fails its case, or nil.
func (o Outcome) Problems() []string {
	want := map[string]bool{}
	for _, w := range o.Case.Want {
		want[strings.ReplaceAll(w, "{p}", o.Prefix)] = true
	}
	var out []string
	got := map[string]bool{}
	for _, f := range o.Forwarded {
		got[f] = true
		if !want[f] {
			out = append(out, "forwarded "+short(f))
		}
	}
	if o.Case.Exact {
		for w := range want {
			if !got[w] {
				out = append(out, "did not forward "+short(w))
			}
		}
	}
	for _, s := range o.Statuses {
		if s == http.StatusBadGateway || s == http.StatusGatewayTimeout {
			out = append(out, fmt.Sprintf("answered %d", s))
		}
	}
	if o.Case.Malformed && (len(o.Statuses) == 0 || o.Statuses[len(o.Statuses)-1] != http.StatusBadRequest) {
		out = append(out, fmt.Sprintf("malformed body answered %v, want a final 400", o.Statuses))
	}
	if o.Case.Statuses != nil && !slices.Equal(o.Statuses, o.Case.Statuses) {
		out = append(out, fmt.Sprintf("answered %v, want %v", o.Statuses, o.Case.Statuses))
	}
	return out
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Recorder is a backend (net/http on 127.0.0.1) that records every
// request it receives with its whole body, and answers 200 "ok".
type Recorder struct {
	URL string
	srv *http.Server
	ln  net.Listener
	mu  sync.Mutex
	got []string
}

// NewRecorder starts a Recorder.
func NewRecorder() (*Recorder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Recorder{URL: "http://" + ln.Addr().String(), ln: ln}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *Recorder) serve(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	rec := req.Method + " " + req.URL.Path + " " + string(b)
	if err != nil {
		rec = "TRUNCATED " + rec
	}
	r.mu.Lock()
	r.got = append(r.got, rec)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok\n")
}

// Take returns and forgets the requests recorded under prefix.
func (r *Recorder) Take(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out, keep []string
	for _, g := range r.got {
		if i := strings.IndexByte(g, ' '); i >= 0 && strings.HasPrefix(g[i+1:], prefix+"/") ||
			strings.HasPrefix(g, "TRUNCATED ") && strings.Contains(g, " "+prefix+"/") {
			out = append(out, g)
		} else {
			keep = append(keep, g)
		}
	}
	r.got = keep
	return out
}

// Close stops the Recorder.
func (r *Recorder) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.srv.Shutdown(ctx)
}

// RunCase sends c on a new connection to addr, reads the answers until
// the connection ends, or no first answer comes within first, or no
// further one within quiet; then waits settle for the backend to finish
// what it received, and returns the outcome.
func RunCase(addr string, idx int, c Case, rec *Recorder, first, quiet, settle time.Duration) (Outcome, error) {
	prefix := fmt.Sprintf("/c%02d", idx)
	o := Outcome{Case: c, Prefix: prefix}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return o, err
	}
	defer conn.Close()
	raw := strings.ReplaceAll(c.Raw, "{p}", prefix)
	go func() {
		_ = conn.SetWriteDeadline(time.Now().Add(first + 5*time.Second))
		_, _ = io.WriteString(conn, raw) // a proxy may close before reading it all
	}()
	br := bufio.NewReader(conn)
	for {
		wait := quiet
		if len(o.Statuses) == 0 {
			wait = first
		}
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && len(o.Statuses) == 0 {
				o.Statuses = append(o.Statuses, 0)
			}
			break
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		o.Statuses = append(o.Statuses, resp.StatusCode)
		if resp.Close {
			break
		}
	}
	conn.Close()
	time.Sleep(settle)
	o.Forwarded = rec.Take(prefix)
	sort.Strings(o.Forwarded)
	return o, nil
}

// RunCorpus runs every case against addr, workers at a time, and returns
// the outcomes in corpus order.
func RunCorpus(addr string, cases []Case, rec *Recorder, workers int, first, quiet, settle time.Duration) ([]Outcome, error) {
	out := make([]Outcome, len(cases))
	errs := make([]error, len(cases))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for i := range jobs {
				out[i], errs[i] = RunCase(addr, i, cases[i], rec, first, quiet, settle)
			}
		})
	}
	for i := range cases {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out, errors.Join(errs...)
}
