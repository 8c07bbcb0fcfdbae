// SPDX-License-Identifier: Apache-2.0

package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// verdicts feeds stream to a ScanConn in pieces of the given size, asks
// for the verdict of each request as soon as its header block is in (as
// the server hands it to a handler) and returns the verdicts of the
// first n requests.
func verdicts(stream string, piece, n int) []string {
	c := &ScanConn{}
	var out []string
	for i := 0; i < len(stream); i += piece {
		c.scan([]byte(stream[i:min(i+piece, len(stream))]))
		for uint64(len(out)) < c.blocks.Load() && len(out) < n {
			out = append(out, c.Next())
		}
	}
	for len(out) < n {
		out = append(out, c.Next())
	}
	return out
}

const getReq = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"

func TestScanVerdicts(t *testing.T) {
	pad := strings.Repeat(" ", 70)
	cases := []struct {
		name   string
		stream string
		want   []string // "" clean, "*" either (a body fault seen in the read that brought the header block refuses the request at once), else a substring of the reason
	}{
		{"clean pipeline", getReq + getReq + getReq, []string{"", "", ""}},
		{"cl body then get", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 30\r\n\r\n" +
			"GET / HTTP/1.1\r\nContent-Length" + // body bytes that look like headers
			getReq, []string{"", ""}},
		{"chunked body then get", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5;ext=1\r\nhello\r\n1D\r\nContent-Length: 1\r\n\r\nxxxxxxxx\r\n0\r\nTrailer: x\r\n\r\n" + getReq,
			[]string{"", ""}},
		{"cl plus te", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			[]string{"both Content-Length and Transfer-Encoding"}},
		{"te plus cl, mixed case", "POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\ncontent-LENGTH: 4\r\n\r\n",
			[]string{"both"}},
		{"good then smuggled", getReq + "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
			[]string{"", "both"}},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n  c\r\n\r\n", []string{"folding"}},
		{"bare LF", "GET / HTTP/1.1\nHost: a\n\n" + getReq, []string{"", ""}},
		{"http/1.0 with long url", "GET /" + strings.Repeat("x", 300) + " HTTP/1.0\r\nContent-Length: 2\r\n\r\nab" + getReq,
			[]string{"", ""}},
		{"identical duplicate cl", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab" + getReq,
			[]string{"several Content-Length"}},
		{"tab in cl", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t2\r\n\r\nab" + getReq, []string{"tab"}},
		{"tab in te", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n" + getReq, []string{"tab"}},
		{"long header line", "GET / HTTP/1.1\r\nX-Long: " + strings.Repeat("y", 5000) + "\r\nHost: a\r\n\r\n" + getReq,
			[]string{"", ""}},
		// Each of these once made the scanner give up for the rest of the
		// connection, letting the pipelined CL+TE request through.
		{"16-digit chunk size then cl+te", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"0000000000000005\r\nhello\r\n0\r\n\r\n" +
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
			[]string{"", "both"}},
		{"padded te then cl+te", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked" + pad + "\r\n\r\n0\r\n\r\n" +
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
			[]string{"", "both"}},
		{"padded cl then cl+te", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length:" + pad + "2" + pad + "\r\n\r\nab" +
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
			[]string{"", "both"}},
		{"padded chunk line then cl+te (RFC 9112 §7.1 has no whitespace there: fail closed)", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5" + pad + "\r\nhello\r\n0;" + strings.Repeat("e", 200) + "\r\n\r\n" +
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
			[]string{"*", "chunk-size line"}},
		{"leading-zero cl then cl+te", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 0000000000000000000000002\r\n\r\nab" +
			"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
			[]string{"", "both"}},
		{"http/1.0 with te", "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + getReq,
			[]string{"HTTP/1.0", "HTTP/1.0"}},
		// Fail closed: a framing the scanner does not follow refuses this
		// request (or, in a body, the next ones).
		{"17-digit chunk size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000005\r\nhello\r\n0\r\n\r\n" + getReq,
			[]string{"*", "16 hex digits"}},
		{"bare LF in chunk line", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n" + getReq,
			[]string{"*", "bare LF"}},
		{"bare LF after chunk data", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n" + getReq,
			[]string{"*", "CRLF"}},
		{"space before extension", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5 ;x\r\nhello\r\n0\r\n\r\n" + getReq,
			[]string{"*", "chunk-size line"}},
		{"trailer line without colon", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nGET /s HTTP/1.1\r\nHost: a\r\n\r\n" + getReq,
			[]string{"*", "trailer"}},
		{"chunked trailer bare LF", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\n" + getReq,
			[]string{"*", "bare LF"}},
		{"te gzip", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", []string{"Transfer-Encoding"}},
		{"two te", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", []string{"Transfer-Encoding"}},
		{"cl with sign", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\nab", []string{"Content-Length"}},
		{"cl 5 and 05", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 05\r\n\r\nhello", []string{"several"}},
		{"bare CR in header", "GET / HTTP/1.1\r\nHost: a\r\nX: a\rTransfer-Encoding: chunked\r\n\r\n", []string{"bare CR"}},
		{"space before colon", "GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 4\r\n\r\n", []string{"malformed header"}},
		{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", []string{"HTTP version"}},
		{"desync: header block not seen", "GET / HTTP/1.1\r\nHost: a\r\n", []string{"framing"}},
	}
	for _, c := range cases {
		for _, piece := range []int{1, 3, 7, 64, 1 << 20} {
			got := verdicts(c.stream, piece, len(c.want))
			for i, w := range c.want {
				if w == "*" {
					continue
				}
				if (w == "") != (got[i] == "") || !strings.Contains(got[i], w) {
					t.Errorf("%s (pieces of %d): request %d verdict %q, want %q", c.name, piece, i+1, got[i], w)
				}
			}
		}
	}
}

func TestScanBodyFault(t *testing.T) {
	c := &ScanConn{}
	c.scan([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"))
	if v := c.Next(); v != "" {
		t.Fatalf("request 1 refused before its body: %q", v)
	}
	if f := c.BodyFault(1); f != "" {
		t.Fatalf("clean body so far, fault %q", f)
	}
	c.scan([]byte("ffffffffffffffff\r\n"))
	if f := c.BodyFault(1); !strings.Contains(f, "out of range") {
		t.Errorf("body fault %q, want the chunk size out of range", f)
	}
}

func TestScanStopsOnUpgrade(t *testing.T) {
	c := &ScanConn{}
	c.scan([]byte("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
	if v := c.Next(); v != "" {
		t.Fatalf("upgrade request refused: %q", v)
	}
	c.Stop()
	if !c.stopped.Load() {
		t.Fatal("stop not recorded")
	}
}

// goFraming parses stream as net/http's server does and returns the
// offset just past each request's header block, in order, up to the
// first request it refuses or whose body fails.
func goFraming(stream []byte) []int {
	rd := bytes.NewReader(stream)
	br := bufio.NewReaderSize(rd, 4096) // the server's read buffer
	var ends []int
	lastPOST := false
	for {
		if lastPOST { // RFC 9112 §2.2 tolerance, as the server has it
			peek, _ := br.Peek(4)
			k := 0
			for k < len(peek) && (peek[k] == '\r' || peek[k] == '\n') {
				k++
			}
			_, _ = br.Discard(k)
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return ends
		}
		if req.ProtoMajor != 1 {
			return ends
		}
		ends = append(ends, len(stream)-rd.Len()-br.Buffered())
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return ends
		}
		lastPOST = req.Method == http.MethodPost
	}
}

// scanFraming feeds stream to the scanner one byte at a time and returns
// the offset just past each header block it counted, and the first
// refused request (0: none).
func scanFraming(stream []byte) ([]int, uint64) {
	c := &ScanConn{}
	var ends []int
	for i := range stream {
		before := c.blocks.Load()
		c.scan(stream[i : i+1])
		if c.blocks.Load() != before {
			ends = append(ends, i+1)
		}
	}
	return ends, c.poisonAt.Load()
}

// checkAgainstGo is the scanner's contract: every request net/http
// would hand to a handler is either one whose header block the scanner
// saw end at the same byte, or refused (it or an earlier one poisoned).
func checkAgainstGo(t *testing.T, stream []byte) {
	t.Helper()
	goEnds := goFraming(stream)
	scEnds, poisonAt := scanFraming(stream)
	for k, end := range goEnds {
		n := uint64(k + 1)
		if poisonAt != 0 && n >= poisonAt {
			return // refused from here on
		}
		if k >= len(scEnds) {
			// The handler would see n > blocks: refused as a desync.
			return
		}
		if scEnds[k] != end {
			t.Fatalf("request %d: net/http's header block ends at byte %d, the scanner's at %d (poisoned at %d)\n%q",
				n, end, scEnds[k], poisonAt, stream)
		}
	}
}

func TestScanAgreesWithNetHTTP(t *testing.T) {
	pad := strings.Repeat(" ", 70)
	streams := []string{
		getReq + getReq,
		"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0\r\n\r\n" + getReq,
		"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length:" + pad + "5\r\n\r\nhello" + getReq,
		"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:" + pad + "chunked" + pad + "\r\n\r\n0\r\n\r\n" + getReq,
		"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b;c=\"d\"\r\nhello\r\n0\r\nX: y\r\n\r\n" + getReq,
		"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab\r\n\r\n" + getReq,
		"POST /a HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + getReq,
		"GET / HTTP/1.1\nHost: a\n\n" + getReq,
		"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\nGET /s HTTP/1.1\r\nHost: a\r\n\r\n",
	}
	for _, s := range streams {
		checkAgainstGo(t, []byte(s))
	}
}

// FuzzScan checks the scanner's contract against net/http on arbitrary
// streams, fed in pieces of any size.
func FuzzScan(f *testing.F) {
	f.Add([]byte(getReq+getReq), 3)
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"+getReq), 1)
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"), 2)
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:  0003 \r\n\r\nabc"+getReq), 5)
	f.Add([]byte("POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+getReq), 4)
	f.Fuzz(func(t *testing.T, data []byte, piece int) {
		if piece <= 0 {
			piece = 1
		}
		c := &ScanConn{}
		for i := 0; i < len(data); i += piece {
			c.scan(data[i:min(i+piece, len(data))])
		}
		if c.protoN > len(c.proto) || c.nameN > len(c.name) || c.lineLen > maxTrailer+maxChunkLine {
			t.Fatalf("state out of bounds: proto %d name %d line %d", c.protoN, c.nameN, c.lineLen)
		}
		checkAgainstGo(t, data)
	})
}
