// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/policy"
)

// admitWith puts r, the HTTP view of a call whose context is ctx,
// through the policy.
func (b *bound) admitWith(ctx context.Context, r *http.Request) (sluice.Admission, error) {
	if b.admitCtx != nil {
		return b.admitCtx.AdmitContext(ctx, r)
	}
	return b.pol.Admit(r.WithContext(ctx))
}

// rejection returns what the refusal of r (with err) says: the policy's
// Rejection when it has one, else the Retry-After of its HTTP answer.
func (b *bound) rejection(r *http.Request, err error) policy.Rejection {
	if b.rej != nil {
		return b.rej.Rejection(r)
	}
	w := headerWriter{}
	b.pol.Reject(w, r, err)
	secs, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 32)
	return policy.Rejection{Stage: "-", Class: "-", RetryAfter: time.Duration(max(secs, 0)) * time.Second}
}

// headerWriter is a ResponseWriter that keeps only the header.
type headerWriter http.Header

func (w headerWriter) Header() http.Header         { return http.Header(w) }
func (w headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w headerWriter) WriteHeader(int)             {}

// allHeaders copies every key of the call's incoming metadata but the
// pseudo-headers (":authority") and gRPC's own ("grpc-timeout", …) to
// h, for a policy that does not say what it reads, and reports whether
// there was any.
func allHeaders(h http.Header, ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	found := false
	for k, v := range md {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") {
			continue
		}
		h[http.CanonicalHeaderKey(k)] = v
		found = true
	}
	return found
}
