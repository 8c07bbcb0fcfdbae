// SPDX-License-Identifier: Apache-2.0

package h1

import (
	"io"
	"net"
	"strings"
	"testing"
)

// pieceConn is a net.Conn whose reads return at most piece bytes of r.
type pieceConn struct {
	net.Conn
	r     io.Reader
	piece int
}

func (c *pieceConn) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.piece)]) }

// readAll reads stream through a ScanConn in pieces.
func readAll(stream string, piece int) *ScanConn {
	c := NewScanConn(&pieceConn{r: strings.NewReader(stream), piece: piece})
	buf := make([]byte, 64)
	for {
		if _, err := c.Read(buf); err != nil {
			return c
		}
	}
}

// A connection that opens with HTTP/2's preface (h2c with prior
// knowledge) is HTTP/2, whatever the reads' sizes; the same line later in
// an HTTP/1 connection, or a request line that only begins like it, is
// scanned as HTTP/1 and refused.
func TestScanHTTP2Preface(t *testing.T) {
	for _, piece := range []int{1, 3, 7, 24, 64} {
		c := readAll(h2Preface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00", piece)
		if !c.HTTP2() || c.poisonAt.Load() != 0 {
			t.Errorf("piece %d: preface not recognised (h2 %v, poisoned %q)", piece, c.HTTP2(), c.poisonWhy)
		}
		c = readAll(getReq+h2Preface, piece)
		if c.HTTP2() || c.poisonAt.Load() != 2 {
			t.Errorf("piece %d: a preface after a request: h2 %v, poisoned at %d (%q), want request 2 refused", piece, c.HTTP2(), c.poisonAt.Load(), c.poisonWhy)
		}
		c = readAll("PRI * HTTP/2.1\r\n\r\n", piece)
		if c.HTTP2() || c.poisonAt.Load() != 1 {
			t.Errorf("piece %d: a near preface: h2 %v, poisoned at %d (%q)", piece, c.HTTP2(), c.poisonAt.Load(), c.poisonWhy)
		}
		c = readAll("PR"+getReq[2:], piece) // shares a prefix, then is HTTP/1
		if c.HTTP2() || c.blocks.Load() != 1 {
			t.Errorf("piece %d: %q: h2 %v, %d header blocks", piece, "PR…", c.HTTP2(), c.blocks.Load())
		}
		c = readAll(getReq, piece)
		if c.HTTP2() || c.blocks.Load() != 1 || c.Next() != "" {
			t.Errorf("piece %d: a plain request: h2 %v, %d blocks", piece, c.HTTP2(), c.blocks.Load())
		}
	}
}
