// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/httpx"
)

// The IETF RateLimit header fields, as draft-ietf-httpapi-ratelimit-headers-10
// (September 2025) defines them: two Structured Fields (RFC 9651) Lists
// of one Item each, a String naming the policy with Integer parameters.
//
//	RateLimit-Policy: "<stage>";q=<burst>;w=<⌈burst/rate⌉>
//	RateLimit: "<stage>";r=<⌊tokens⌋>;t=<⌈(burst − tokens)/rate⌉>
//
// sluice's quota is its token bucket (rate requests per second, burst
// tokens): q is the bucket's size, a client may spend it at once, and w is
// the time a drained bucket takes to refill (at least 1 s). r is the
// requests the bucket would admit now (its whole tokens) and t the seconds
// until it is full again (0 when it is full). The values follow the
// bucket as a controller or cluster mode sets it.
const (
	headerRateLimitPolicy = "RateLimit-Policy"
	headerRateLimit       = "RateLimit"
)

// writeRateLimit sets the two fields for e's stage at now, or nothing when
// its gate is not a bucket.
func writeRateLimit(h http.Header, e *entry, now time.Time) {
	q, ok := e.st.Quota(now)
	if !ok {
		return
	}
	name := httpx.SFString(e.name)
	burst := float64(q.Burst)
	w := max(int64(math.Ceil(burst/q.Rate)), 1)
	if q.Rate == 0 {
		w = math.MaxInt32 // never refills: the longest window we say
	}
	tokens := min(max(q.Tokens, 0), burst)
	var t int64
	if tokens < burst {
		t = int64(math.Ceil((burst - tokens) / q.Rate))
		if q.Rate == 0 {
			t = math.MaxInt32
		}
	}
	h.Add(headerRateLimitPolicy, name+";q="+strconv.Itoa(q.Burst)+";w="+strconv.FormatInt(w, 10))
	h.Add(headerRateLimit, name+";r="+strconv.FormatInt(int64(math.Floor(tokens)), 10)+";t="+strconv.FormatInt(t, 10))
}

// WriteRateLimit sets the IETF RateLimit-Policy and RateLimit fields of
// the stage named stageName on h at now, when that stage has
// ratelimit_headers; otherwise it does nothing (and costs one flag check
// when no stage has it). The proxy calls it on the responses of admitted
// requests; Reject calls it on rejections.
func (p *Policy) WriteRateLimit(h http.Header, stageName string, now time.Time) {
	if !p.anyRateLimit {
		return
	}
	if e := p.byName[stageName]; e != nil && e.rateLimit {
		writeRateLimit(h, e, now)
	}
}

// SetResponseHeaders implements sluice.ResponseHeaders: the middleware
// calls it before the handler runs, so an admitted request's response
// carries the stage's RateLimit fields (ratelimit_headers).
func (a *admission) SetResponseHeaders(h http.Header) {
	if a.e != nil && a.e.rateLimit {
		writeRateLimit(h, a.e, time.Now())
	}
}
