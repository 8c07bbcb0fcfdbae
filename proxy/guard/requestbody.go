// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/proxy/buffer"
	"github.com/sluicehq/sluice/proxy/internal/h1"
)

// deadline returns when the next body read must end: body_timeout after
// the last bytes, and no later than body_timeout plus got/min_rate after
// the body started; the zero time without a timeout.
func (l *limits) deadline(start, last, now time.Time, got int64) (time.Time, error) {
	if l.bodyTimeout <= 0 {
		return time.Time{}, nil
	}
	d := last.Add(l.bodyTimeout)
	if l.bodyRate > 0 {
		if r := start.Add(l.bodyTimeout + time.Duration(float64(got)/l.bodyRate*float64(time.Second))); r.Before(d) {
			d = r
		}
	}
	if l.readTimeout > 0 {
		// read_timeout bounds the whole request: the server set it as the
		// connection's deadline, which ours replace. Counted here from the
		// start of the body, so up to the header's time late.
		if r := start.Add(l.readTimeout); r.Before(d) {
			d = r
		}
	}
	if !d.After(now) {
		return time.Time{}, errBodyTimeout
	}
	// Not closer than a second: when the read that ends the body returns,
	// the server starts a background read under this deadline until it is
	// cleared, and a timeout there would cancel the request.
	return later(d, now.Add(time.Second)), nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// buffer reads r's body completely into a spool of package buffer
// (memory up to request_buffer_bytes, then an unlinked temporary file)
// and replaces it with the spool. The returned body is closed when the
// request ends.
func (g *Guard) buffer(r *http.Request, rc *http.ResponseController, sc *h1.ScanConn, ord uint64) (io.ReadCloser, error) {
	br := &bodyReader{r: r, rc: rc, lim: &g.lim, sc: sc, ord: ord, start: time.Now()}
	br.last = br.start
	sp := buffer.NewBody(g.lim.tmpDir, g.lim.bufMem, r.ContentLength)
	if err := sp.Fill(br); err != nil {
		// The connection is closed after the answer: end any read the
		// server would make to discard the rest of the body.
		_ = rc.SetReadDeadline(time.Now())
		_ = sp.Close()
		return nil, &bodyError{err}
	}
	_ = rc.SetReadDeadline(time.Time{})
	_ = r.Body.Close()
	// Forward a complete body of known length, without the trailer
	// section if it had one (as nginx does).
	r.Body = sp
	r.ContentLength = br.got
	r.TransferEncoding = nil
	r.Trailer = nil
	if br.got == 0 {
		r.Body = http.NoBody
	}
	return sp, nil
}

// bodyReader reads a request body for buffering within the listener's
// limits: each read by its deadline, the body within
// max_request_body_bytes, and its framing sound (sc: a fault ends the
// read without waiting for the rest).
type bodyReader struct {
	r           *http.Request
	rc          *http.ResponseController
	lim         *limits
	sc          *h1.ScanConn
	ord         uint64
	start, last time.Time // of the body, of its last bytes
	got         int64     // bytes read
}

func (b *bodyReader) Read(p []byte) (int, error) {
	d, err := b.lim.deadline(b.start, b.last, time.Now(), b.got)
	if err != nil {
		return 0, err
	}
	if b.r.ContentLength > 0 && b.got == b.r.ContentLength {
		d = time.Time{} // only EOF is left: no network read
	}
	_ = b.rc.SetReadDeadline(d) // ErrNotSupported: no timeout
	n, err := b.r.Body.Read(p)
	if n > 0 {
		b.got += int64(n)
		b.last = time.Now()
		if b.lim.maxBody > 0 && b.got > b.lim.maxBody {
			return n, errBodyTooLarge
		}
	}
	if err == nil && b.sc != nil && b.sc.BodyFault(b.ord) != "" {
		return n, errBodyFraming
	}
	return n, err
}
