// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/internal/reject"
	"github.com/sluicehq/sluice/share"
)

// Client bandwidth shares in the proxy (Li & Jamin, docs/algorithms.md
// §3; config section shares).
//
// After its stage admitted it, a request is identified (API key, then the
// client header if the peer is one of classes.trusted_proxies, then the
// client address: the peer, or the first untrusted X-Forwarded-For entry
// from a trusted peer) and admitted by Shares.Begin, which takes one of
// the client's standby slots; a client at its standby limit (or with no
// bandwidth at all) gets an immediate 503 with Retry-After and the backend
// is not asked. Once the backend's response headers are in, before any
// byte goes to the client:
//
//   - with a Content-Length, the reply is held for (1/d_i − 1/Â)·size;
//   - without one (chunked), the headers go out at once and the body is
//     paced while it streams: each piece of n bytes read from the backend
//     waits (1/d_i − 1/Â)·n before it is written, so the whole reply
//     waits what its size calls for, measured as it streams;
//   - upgrades (101) and event streams are neither delayed nor measured.
//
// Unless shares.parallel is set, a client's replies take turns through
// this delay and their sending (share.Reservation.Turn), so that a client
// with several requests in flight gets its share in aggregate, not per
// reply. A delay above max_delay answers 503 with Retry-After instead. A
// client that disconnects while waiting frees its standby slot at once
// and nothing is sent. The reply is recorded (bytes, and the response time
// from admission to the last byte, the delay included) when it is
// complete. The stage's own response-time sample excludes the injected
// delay: it measures the backend, not the share policy. A buffered
// response (package buffer) is read from the backend while it waits for its
// turn or its delay, and while it is paced (the pacing is on the client's
// side of the buffer): its backend slot is given back when the backend is
// done. A response that is not buffered keeps its slot while it is
// delayed.

// identify returns the share client of r.
func (g *generation) identify(r *http.Request) share.ClientID {
	m := g.shares.Matcher()
	id := m.Identity(r, g.pol.PeerTrusted(r))
	if a := g.pol.ClientIP(r); a.IsValid() {
		id.Addr = a
	}
	return m.Match(id)
}

// shareRejected answers a share rejection explicitly: a 503 with
// Retry-After from the rejection (at least 1 s), or, to a gRPC call,
// RESOURCE_EXHAUSTED with that delay as its RetryInfo and pushback (an
// HTTP 503 would reach a gRPC client as UNAVAILABLE, which it retries at
// once).
func shareRejected(w http.ResponseWriter, r *http.Request, err error) {
	a := reject.Answer{Reason: reject.ClientShare, RetryAfter: time.Second, Detail: "rejected"}
	var re *share.RejectError
	if errors.As(err, &re) {
		a.RetryAfter, a.Detail = re.RetryAfter, re.Reason.String()
	}
	reject.Write(w, r, reject.ProtocolOf(r), a)
}

// shareBefore runs in modifyResponse: it delays a reply of known size, or
// arranges the pacing of one of unknown size, and counts the body bytes.
// An error (rejection, client gone) aborts the reply; errorHandler
// answers it.
func (rs *reqState) shareBefore(res *http.Response) error {
	if !rs.shareOn {
		return nil
	}
	if res.StatusCode == http.StatusSwitchingProtocols || httpx.IsEventStream(res.Header.Get("Content-Type")) {
		rs.res.Release()
		rs.shareOn = false
		return nil
	}
	// The client's replies take turns through delay and send (unless
	// shares.parallel): wait for this one's.
	if err := rs.res.Turn(rs.Context); err != nil {
		rs.clientGone.Store(true)
		return err
	}
	size := res.ContentLength
	if res.Request.Method == http.MethodHead || res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusNotModified {
		size = 0
	}
	body := &shareBody{rc: res.Body, rs: rs, pace: size < 0}
	res.Body = body
	if size < 0 {
		return nil
	}
	d, err := rs.res.Delay(time.Now(), size)
	if err != nil {
		rs.shareErr = err
		return err
	}
	if err := rs.res.Wait(rs.Context, d); err != nil {
		rs.clientGone.Store(true)
		return err
	}
	rs.shareDelay.Add(int64(d))
	return nil
}

// shareEnd records the request's reply with the share mechanism when it
// ends, or releases its reservation: a reply not delivered whole (ok
// false, the client gone), rejected, empty, or turned into a stream is
// not a bandwidth sample.
func (rs *reqState) shareEnd(ok bool) {
	if !rs.shareOn {
		return
	}
	rs.shareOn = false
	if ok && rs.shareBytes > 0 && rs.shareErr == nil && !rs.clientGone.Load() && !rs.lc.Streamed() {
		rs.res.Done(time.Now(), rs.shareBytes)
		return
	}
	rs.res.Release()
}

// shareBody counts the bytes of a reply read from the backend and, for a
// reply of unknown size, paces them: a piece of n bytes waits
// (1/d_i − 1/Â)·n before ReverseProxy writes it. The first wait frees the
// standby slot; a rejection computed mid-stream (the headers are gone)
// lets the rest stream undelayed. It is read by the handler's goroutine.
type shareBody struct {
	rc     io.ReadCloser
	rs     *reqState
	pace   bool
	waited bool
}

func (b *shareBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n <= 0 {
		return n, err
	}
	rs := b.rs
	rs.shareBytes += int64(n)
	if !b.pace || !rs.shareOn {
		return n, err
	}
	var d time.Duration
	if dd, derr := rs.res.Delay(time.Now(), int64(n)); derr == nil {
		d = dd
	}
	var werr error
	switch {
	case !b.waited: // the first piece: its wait ends the standby
		b.waited = true
		werr = rs.res.Wait(rs.Context, d)
	case d > 0:
		werr = share.Wait(rs.Context, d)
	}
	if werr != nil {
		rs.clientGone.Store(true)
		return 0, werr
	}
	rs.shareDelay.Add(int64(d))
	return n, err
}

func (b *shareBody) Close() error { return b.rc.Close() }

// sharesCollector reports the running generation's share metrics
// (sluice_share_*, labelled by the configured clients and others). It is
// an unchecked collector: the set of metrics depends on the running
// configuration.
type sharesCollector struct{ h *Handler }

func (c sharesCollector) Describe(chan<- *prometheus.Desc) {}

func (c sharesCollector) Collect(ch chan<- prometheus.Metric) {
	if g := c.h.gen.Load(); g != nil && g.shares != nil {
		share.NewCollector(g.shares).Collect(ch)
	}
}

// runShares runs the share manager of g until ctx ends.
func runShares(ctx context.Context, s *share.Shares) { _ = s.Run(ctx) }
