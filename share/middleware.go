// SPDX-License-Identifier: Apache-2.0

package share

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Middleware returns net/http middleware that enforces s's shares on the
// replies of the wrapped handler. identify maps a request to its client;
// nil uses s.Matcher().MatchRequest(r, false) (API key and peer address;
// the client header is believed from no peer).
//
// Per request it:
//
//  1. identifies the client and admits the request with Shares.Begin at
//     the arrival time t0, taking a standby slot; a client whose slots are
//     all taken (or whose d_i is 0) gets an immediate 503 Service
//     Unavailable with Retry-After, and the handler does not run;
//  2. runs the handler, holding back its reply until the reply's size is
//     known: the size is the Content-Length the handler (or the backend
//     behind a reverse proxy) set before its first body write, in which
//     case nothing is buffered; otherwise the reply is buffered up to
//     Config.ReplyBuffer bytes and its size is the buffered length when
//     the handler returns (the middleware then sets Content-Length). A
//     reply that outgrows the buffer, or that the handler flushes, is
//     delayed for the bytes known at that moment and the rest streams
//     without further delay; every byte still counts in the measurement,
//     so the client's next replies pay for it;
//  3. waits for the client's turn (unless Config.Parallel: the client's
//     earlier replies finish their delay and send first), then waits the
//     computed delay (1/d_i − 1/Â)·size before sending the first byte. If
//     the client disconnects while waiting, the standby slot
//     is freed at once, the request is counted as cancelled and nothing is
//     sent. A delay above Config.MaxDelay answers 503 instead (the
//     handler's work is then lost; its headers are discarded);
//  4. sends the reply and records it with Reservation.Done: the bytes of
//     the body and the response time from t0 to the last byte handed to
//     the connection (flushed), the injected delay included.
//
// The response writer the handler sees implements Flush, Hijack and
// Unwrap, so http.ResponseController reaches the underlying writer
// (deadlines, full duplex). A hijacked connection (a WebSocket, say) is
// released from the mechanism at once: it is neither delayed nor measured.
// 1xx informational responses pass through at once.
func Middleware(s *Shares, identify func(*http.Request) ClientID) func(http.Handler) http.Handler {
	if identify == nil {
		m := s.Matcher()
		identify = func(r *http.Request) ClientID { return m.MatchRequest(r, false) }
	}
	maxBuf := s.cfg.ReplyBuffer
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t0 := time.Now()
			c := identify(r)
			res, err := s.Begin(t0, c)
			if err != nil {
				writeRejection(w, err, s, c)
				return
			}
			s.RateLimit(w.Header(), c)
			defer res.Release() // also on panic
			rw := &replyWriter{w: w, res: &res, ctx: r.Context(), max: maxBuf, status: http.StatusOK}
			next.ServeHTTP(rw, r)
			rw.finish()
		})
	}
}

// writeRejection answers an explicit, cheap 503 with Retry-After (and
// client c's RateLimit fields when s sends them).
func writeRejection(w http.ResponseWriter, err error, s *Shares, c ClientID) {
	retry, reason := time.Second, "rejected"
	var re *RejectError
	if errors.As(err, &re) {
		retry, reason = re.RetryAfter, re.Reason.String()
	}
	h := w.Header()
	clear(h)
	h.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retry.Seconds())))))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	s.RateLimit(h, c)
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, "503 Service Unavailable: client bandwidth share exceeded ("+reason+")\n")
}

// errAborted is returned to a handler that writes after its reply was
// abandoned (client gone during the delay, or reply rejected).
var errAborted = errors.New("share: reply abandoned (client gone or reply rejected)")

const (
	buffering uint8 = iota
	streaming
	aborted
	hijacked
)

// replyWriter holds a reply back until its delay is over. It belongs to
// the handler's goroutine.
type replyWriter struct {
	w      http.ResponseWriter
	res    *Reservation
	ctx    context.Context
	max    int
	buf    []byte
	status int
	state  uint8
	sent   int64
}

// Header returns the underlying header map; nothing is sent before the
// delay is over.
func (rw *replyWriter) Header() http.Header { return rw.w.Header() }

// Unwrap returns the underlying ResponseWriter (for http.ResponseController).
func (rw *replyWriter) Unwrap() http.ResponseWriter { return rw.w }

func (rw *replyWriter) WriteHeader(code int) {
	switch {
	case rw.state == aborted || rw.state == hijacked:
	case code >= 100 && code < 200 && code != http.StatusSwitchingProtocols:
		rw.w.WriteHeader(code) // informational: pass through
	case rw.state == streaming:
		rw.w.WriteHeader(code) // superfluous; net/http logs it
	default:
		rw.status = code
	}
}

// Hijack hands the connection to the handler and releases the request
// from the share mechanism (no delay, no measurement).
func (rw *replyWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(rw.w).Hijack()
	if err == nil {
		rw.state = hijacked
		rw.buf = nil
		rw.res.Release()
	}
	return c, brw, err
}

func (rw *replyWriter) Write(p []byte) (int, error) {
	switch rw.state {
	case hijacked:
		return 0, http.ErrHijacked
	case aborted:
		return 0, errAborted
	case streaming:
		n, err := rw.w.Write(p)
		rw.sent += int64(n)
		return n, err
	}
	if size, ok := rw.contentLength(); ok {
		if err := rw.release(size); err != nil {
			return 0, err
		}
		return rw.Write(p)
	}
	if len(rw.buf)+len(p) <= rw.max {
		rw.buf = append(rw.buf, p...)
		return len(p), nil
	}
	if err := rw.release(int64(len(rw.buf) + len(p))); err != nil {
		return 0, err
	}
	return rw.Write(p)
}

// Flush sends what is buffered (after the delay) and flushes the
// underlying writer.
func (rw *replyWriter) Flush() {
	if rw.state == buffering {
		size := int64(len(rw.buf))
		if cl, ok := rw.contentLength(); ok {
			size = cl
		}
		if rw.release(size) != nil {
			return
		}
	}
	if rw.state == streaming {
		_ = http.NewResponseController(rw.w).Flush()
	}
}

// contentLength returns the Content-Length the handler set, if valid.
func (rw *replyWriter) contentLength() (int64, bool) {
	v := rw.w.Header()["Content-Length"]
	if len(v) != 1 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// release computes the delay for size bytes, waits it, and sends the
// status line, headers and buffered bytes. On rejection it answers 503; if
// the client goes away it abandons the reply.
func (rw *replyWriter) release(size int64) error {
	if err := rw.res.Turn(rw.ctx); err != nil {
		rw.state = aborted
		rw.buf = nil
		return errAborted
	}
	d, err := rw.res.Delay(time.Now(), size)
	if err != nil {
		rw.state = aborted
		rw.buf = nil
		rw.res.Release()
		writeRejection(rw.w, err, rw.res.s, rw.res.client)
		return err
	}
	if err := rw.res.Wait(rw.ctx, d); err != nil {
		rw.state = aborted
		rw.buf = nil
		return errAborted
	}
	rw.state = streaming
	rw.w.WriteHeader(rw.status)
	if len(rw.buf) > 0 {
		n, err := rw.w.Write(rw.buf)
		rw.sent += int64(n)
		rw.buf = nil
		if err != nil {
			return err
		}
	}
	return nil
}

// finish runs after the handler returned: it sends a still-buffered reply
// (with its Content-Length), flushes, and records the reply.
func (rw *replyWriter) finish() {
	if rw.state == buffering {
		h := rw.w.Header()
		if _, ok := rw.contentLength(); !ok && bodyAllowed(rw.status) && len(h["Transfer-Encoding"]) == 0 {
			h.Set("Content-Length", strconv.Itoa(len(rw.buf)))
		}
		if rw.release(int64(len(rw.buf))) != nil {
			return
		}
	}
	if rw.state != streaming {
		return
	}
	_ = http.NewResponseController(rw.w).Flush()
	rw.res.Done(time.Now(), rw.sent)
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
