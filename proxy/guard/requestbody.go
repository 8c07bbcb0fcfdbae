// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/proxy/buffer"
	"github.com/sluicehq/sluice/proxy/internal/h1"
)

// bodyChunk is the size of each read of a buffered body past
// request_buffer_bytes, written to its temporary file.
const bodyChunk = 32 << 10

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

// buffer reads r's body completely into a buffer.Store (memory up to
// request_buffer_bytes, then an unlinked temporary file) and replaces it
// with the copy. The returned body is closed when the request ends.
func (g *Guard) buffer(r *http.Request, rc *http.ResponseController, sc *h1.ScanConn, ord uint64) (io.ReadCloser, error) {
	lim := &g.lim
	start := time.Now()
	last := start
	var got int64
	st := buffer.NewStore(buffer.StoreConfig{Dir: lim.tmpDir, Memory: lim.bufMem,
		Initial: min(max(r.ContentLength, 512), lim.bufMem), Chunk: bodyChunk})
	fail := func(err error) (io.ReadCloser, error) {
		// The connection is closed after the answer: end any read the
		// server would make to discard the rest of the body.
		_ = rc.SetReadDeadline(time.Now())
		_ = st.Close()
		return nil, &bodyError{err}
	}
	for {
		now := time.Now()
		d, err := lim.deadline(start, last, now, got)
		if err != nil {
			return fail(err)
		}
		if r.ContentLength > 0 && got == r.ContentLength {
			d = time.Time{} // only EOF is left: no network read
		}
		_ = rc.SetReadDeadline(d) // ErrNotSupported: no timeout
		n, err := r.Body.Read(st.Next())
		if n > 0 {
			got += int64(n)
			last = time.Now()
			if lim.maxBody > 0 && got > lim.maxBody {
				return fail(errBodyTooLarge)
			}
			if werr := st.Commit(n); werr != nil {
				return fail(werr)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		if sc != nil && sc.BodyFault(ord) != "" {
			return fail(errBodyFraming) // no need to wait for the rest
		}
	}
	_ = rc.SetReadDeadline(time.Time{})
	_ = r.Body.Close()
	if err := st.Rewind(); err != nil {
		return fail(err)
	}
	// Forward a complete body of known length, without the trailer
	// section if it had one (as nginx does).
	r.Body = st
	r.ContentLength = got
	r.TransferEncoding = nil
	r.Trailer = nil
	if got == 0 {
		r.Body = http.NoBody
	}
	return st, nil
}
