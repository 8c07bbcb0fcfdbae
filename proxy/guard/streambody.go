// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// guardedBody is a request body streamed upstream: each read has the
// body deadlines (limits.deadline), and a failure is recorded as
// the client's fault.
//
// Over HTTP/1 the deadline is the connection's read deadline, set before
// every read (a field of the connection: cheap). Over HTTP/2 setting a
// stream's read deadline is a message to the connection's serving
// goroutine and a timer there, three per unary gRPC call; so there one
// timer of the body's own watches it instead: armed at the first read's
// deadline, it finds at expiry either that the deadline moved on (bytes
// came: it re-arms) or that it passed, and only then sets the stream's
// read deadline to now, which fails the read in progress as the
// deadline would have. The deadlines are the same.
type guardedBody struct {
	rc    io.ReadCloser
	ctl   *http.ResponseController
	lim   *limits
	start time.Time
	h2    bool // HTTP/2: the timer watches the deadline

	mu    sync.Mutex
	last  time.Time
	got   int64
	err   error
	done  bool          // the handler returned: its ResponseController is gone
	ended bool          // the body ended (EOF or error)
	wait  time.Duration // spent in reads of the client's body
	timer *time.Timer   // h2: fires at the deadline armed last
}

func (b *guardedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	if b.last.IsZero() {
		b.last = b.start
	}
	if !b.done {
		now := time.Now()
		d, err := b.lim.deadline(b.start, b.last, now, b.got)
		if err != nil {
			b.err = &bodyError{err}
			b.mu.Unlock()
			return 0, b.err
		}
		switch {
		case !b.h2:
			_ = b.ctl.SetReadDeadline(d)
		case b.timer == nil && !d.IsZero():
			b.timer = time.AfterFunc(d.Sub(now), b.expire)
		}
	}
	b.mu.Unlock()
	start := time.Now()
	n, err := b.rc.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wait += time.Since(start)
	b.got += int64(n)
	if n > 0 {
		b.last = time.Now()
	}
	if b.lim.maxBody > 0 && b.got > b.lim.maxBody {
		err = errBodyTooLarge
	}
	if err != nil {
		b.end()
	}
	switch {
	case b.h2 || b.done:
	case err == io.EOF:
		_ = b.ctl.SetReadDeadline(time.Time{})
	case err != nil:
		_ = b.ctl.SetReadDeadline(time.Now()) // the connection closes after the answer
	}
	if err != nil && err != io.EOF {
		b.err = &bodyError{err}
		return n, b.err
	}
	return n, err
}

// expire runs when the armed deadline comes (HTTP/2): it cuts the read
// in progress if the body's deadline has passed, and re-arms for the
// later deadline that the bytes read since give otherwise.
func (b *guardedBody) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || b.ended {
		return
	}
	now := time.Now()
	d, err := b.lim.deadline(b.start, b.last, now, b.got)
	if err != nil {
		_ = b.ctl.SetReadDeadline(now)
		return
	}
	b.timer.Reset(d.Sub(now))
}

// end marks the body over and stops its timer; b.mu is held.
func (b *guardedBody) end() {
	b.ended = true
	if b.timer != nil {
		b.timer.Stop()
	}
}

func (b *guardedBody) Close() error { return b.rc.Close() }

func (b *guardedBody) handlerDone() {
	b.mu.Lock()
	b.done = true
	b.end()
	b.mu.Unlock()
}

// bodyKey finds a streamed request's *guardedBody in its context
// (ReverseProxy wraps the body it sends upstream).
type bodyKey struct{}

// BodyError returns the error with which the body of req failed to read
// while it streamed upstream, or nil: the client's fault, to answer with
// Metrics.BodyFailed.
func BodyError(req *http.Request) error {
	b, ok := req.Context().Value(bodyKey{}).(*guardedBody)
	if !ok {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// ClientReadWait returns how long the proxy has spent waiting for the
// request body of r while it streamed upstream (request_buffering:
// false), or 0 (a buffered body was read before the request started).
// Subtracted from a response time, it leaves the time spent on the
// backend rather than on a slow uploader.
func ClientReadWait(r *http.Request) time.Duration {
	b, ok := r.Context().Value(bodyKey{}).(*guardedBody)
	if !ok {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wait
}
