// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/grpctest"
)

// byHeader is a hand-written sluice.Policy (none of the optional
// interfaces): it admits a call whose X-Ticket header is "ok" and
// refuses the others with Retry-After: 7, and records how each admitted
// call ended.
type byHeader struct {
	mu    sync.Mutex
	seen  []string // the X-Ticket and the peer of each call
	ended []sluice.Outcome
}

func (p *byHeader) Admit(r *http.Request) (sluice.Admission, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, r.Header.Get("X-Ticket")+"@"+r.RemoteAddr)
	if r.Header.Get("X-Ticket") != "ok" || r.Context().Err() != nil {
		return nil, sluice.ErrRejected
	}
	return byHeaderAdmission{p}, nil
}

func (p *byHeader) Reject(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Retry-After", "7")
	w.WriteHeader(http.StatusServiceUnavailable)
}

type byHeaderAdmission struct{ p *byHeader }

func (a byHeaderAdmission) Quality() float64 { return 1 }
func (a byHeaderAdmission) Stream()          {}
func (a byHeaderAdmission) Done(o sluice.Outcome) {
	a.p.mu.Lock()
	a.p.ended = append(a.p.ended, o)
	a.p.mu.Unlock()
}

// The Server takes any sluice.Policy: the call's metadata reaches it as
// headers, with the peer as the remote address; a refusal is
// RESOURCE_EXHAUSTED with the policy's Retry-After as the pushback; an
// admitted call is finished with its outcome.
func TestServerTakesAnyPolicy(t *testing.T) {
	pol := &byHeader{}
	svc := &service{}
	cc := bufDial(t, NewServer(pol, ServerOptions{}), svc)
	tc := testpb.NewTestServiceClient(cc)
	ok := metadata.AppendToOutgoingContext(ctxT(t), "x-ticket", "ok")
	if _, err := tc.UnaryCall(ok, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("admitted call: %v", err)
	}
	_, err := tc.UnaryCall(ctxT(t), &testpb.SimpleRequest{})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("refused call: %v, want RESOURCE_EXHAUSTED", err)
	}
	if delay := grpctest.RetryDelay(st); delay != 7*time.Second {
		t.Errorf("pushback %v, want the policy's Retry-After 7s", delay)
	}
	pol.mu.Lock()
	defer pol.mu.Unlock()
	if len(pol.seen) != 2 || pol.seen[0] != "ok@bufconn" || pol.seen[1] != "@bufconn" {
		t.Errorf("the policy saw %q, want [ok@bufconn @bufconn]", pol.seen)
	}
	if len(pol.ended) != 1 || pol.ended[0] != sluice.Success {
		t.Errorf("ended %v, want [success]", pol.ended)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}
