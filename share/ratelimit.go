// SPDX-License-Identifier: Apache-2.0

package share

import (
	"math"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/internal/httpx"
)

// RateLimit sets on h the IETF RateLimit-Policy and RateLimit fields of
// client c (draft-ietf-httpapi-ratelimit-headers-10, quota unit
// "content-bytes", one-second window), when Config.RateLimitHeaders is on;
// otherwise it does nothing:
//
//	RateLimit-Policy: "<client>";q=⌊b_i⌋;qu="content-bytes";w=1
//	RateLimit: "<client>";r=⌊max(d_i − avg_i, 0)⌋;t=1
//
// where b_i is the client's allocation, d_i its available bandwidth now and
// avg_i its measured bandwidth, all in bytes per second (Li & Jamin §3).
// The quota is the client's share of B; the remaining quota is the
// headroom between what the mechanism lets it have now (more than b_i
// while others leave bandwidth unused, up to 2·b_i − avg_i while it is
// below its share) and what it takes: a client at r = 0 has its replies
// delayed. t = 1: the manager recomputes d_i every period (≤ 1 s).
func (s *Shares) RateLimit(h http.Header, c ClientID) {
	if !s.cfg.RateLimitHeaders {
		return
	}
	i := s.idx(c)
	s.mu.Lock()
	b, avg, d := s.clients[i].b, s.clients[i].avg, s.available(i)
	s.mu.Unlock()
	name := httpx.SFString(s.names[i])
	h.Add("RateLimit-Policy", name+";q="+strconv.FormatInt(int64(math.Floor(b)), 10)+`;qu="content-bytes";w=1`)
	h.Add("RateLimit", name+";r="+strconv.FormatInt(int64(math.Floor(math.Max(d-avg, 0))), 10)+";t=1")
}
