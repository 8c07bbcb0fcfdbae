package proxy

import (
	"strings"
	"testing"
)

// verdicts feeds stream to a scanConn in pieces of the given size and
// returns the verdicts of the first n requests.
func verdicts(stream string, piece, n int) []string {
	c := &scanConn{}
	for i := 0; i < len(stream); i += piece {
		c.scan([]byte(stream[i:min(i+piece, len(stream))]))
	}
	out := make([]string, n)
	for i := range out {
		out[i] = c.next()
	}
	return out
}

func TestScanVerdicts(t *testing.T) {
	const get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	cases := []struct {
		name   string
		stream string
		want   []string // "" clean, else a substring of the reason
	}{
		{"clean pipeline", get + get + get, []string{"", "", ""}},
		{"cl body then get", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 30\r\n\r\n" +
			"GET / HTTP/1.1\r\nContent-Length" + // body bytes that look like headers
			get, []string{"", ""}},
		{"chunked body then get", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5;ext=1\r\nhello\r\n1A\r\nContent-Length: 1\r\n\r\nxxxxxxxx\r\n0\r\nTrailer: x\r\n\r\n" + get,
			[]string{"", ""}},
		{"cl plus te", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			[]string{"both Content-Length and Transfer-Encoding"}},
		{"te plus cl, mixed case", "POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\ncontent-LENGTH: 4\r\n\r\n",
			[]string{"both"}},
		{"good then smuggled", get + "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
			[]string{"", "both"}},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n  c\r\n\r\n", []string{"folding"}},
		{"bare LF", "GET / HTTP/1.1\nHost: a\n\n" + get, []string{"", ""}},
		{"http/1.0 with long url", "GET /" + strings.Repeat("x", 300) + " HTTP/1.0\r\nContent-Length: 2\r\n\r\nab" + get,
			[]string{"", ""}},
		{"identical duplicate cl", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab" + get,
			[]string{"", ""}},
		{"long header line", "GET / HTTP/1.1\r\nX-Long: " + strings.Repeat("y", 500) + "\r\nHost: a\r\n\r\n" + get,
			[]string{"", ""}},
	}
	for _, c := range cases {
		for _, piece := range []int{1, 3, 7, 64, 1 << 20} {
			got := verdicts(c.stream, piece, len(c.want))
			for i, w := range c.want {
				if (w == "") != (got[i] == "") || !strings.Contains(got[i], w) {
					t.Errorf("%s (pieces of %d): request %d verdict %q, want %q", c.name, piece, i+1, got[i], w)
				}
			}
		}
	}
}

func TestScanStopsOnUpgradeAndH2(t *testing.T) {
	c := &scanConn{}
	c.scan([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	if c.state != scanStopped {
		t.Errorf("HTTP/2 preface: state %d, want stopped", c.state)
	}
	c = &scanConn{}
	c.scan([]byte("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
	c.stop()
	c.Conn = nil
	// after stop the scanner ignores frames that look like smuggling
	if c.stopped.Load() != true {
		t.Fatal("stop not recorded")
	}
}

func FuzzScan(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 3)
	f.Add([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), 1)
	f.Add([]byte("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"), 2)
	f.Fuzz(func(t *testing.T, data []byte, piece int) {
		if piece <= 0 {
			piece = 1
		}
		c := &scanConn{}
		for i := 0; i < len(data); i += piece {
			c.scan(data[i:min(i+piece, len(data))])
		}
		if c.lineLen > keepLine || c.tailLen > len(c.tail) || c.remain < 0 {
			t.Fatalf("state out of bounds: line %d tail %d remain %d", c.lineLen, c.tailLen, c.remain)
		}
		if uint64(len(c.flagged)) > c.blocks {
			t.Fatalf("%d verdicts for %d header blocks", len(c.flagged), c.blocks)
		}
	})
}
