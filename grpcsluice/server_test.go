// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/grpctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A call its stage's gate refuses is RESOURCE_EXHAUSTED with a RetryInfo
// detail and the grpc-retry-pushback-ms trailer carrying the same
// pushback: the stage's computed wait (here the next token, ~1000 s
// away) bounded to [retry_after, retry_after_max], plus up to
// retry_jitter; the handler never runs; the health service is exempt.
func TestShedIsResourceExhaustedWithRetryInfo(t *testing.T) {
	pol := newPolicy(t, `
stages: [{name: api, match: {path_prefix: /}, controller: static-rate, params: {rate: 0.001}, burst: 1}]
reject: {retry_after: 2s, retry_after_max: 2s, retry_jitter: 1s}`)
	svc := &service{}
	cc := bufDial(t, NewServer(pol, ServerOptions{}), svc)
	tc := testpb.NewTestServiceClient(cc)
	ctx := ctxT(t)
	if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	var tr metadata.MD
	_, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Trailer(&tr))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("second call: %v, want RESOURCE_EXHAUSTED", err)
	}
	delay := grpctest.RetryDelay(st)
	if delay < 2*time.Second || delay > 3*time.Second {
		t.Errorf("RetryInfo delay %v, want within [2s, 3s] (details %v)", delay, st.Details())
	}
	if v := tr.Get(PushbackTrailer); len(v) != 1 || v[0] != strconv.FormatInt(delay.Milliseconds(), 10) {
		t.Errorf("trailer %s = %q, want %d", PushbackTrailer, v, delay.Milliseconds())
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
	if got := totals(pol, "api", 0); got.Rejected != 1 || got.Admitted != 1 {
		t.Errorf("stage totals %+v, want 1 admitted and 1 rejected", got)
	}
	hc := healthpb.NewHealthClient(cc)
	for i := range 20 {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health check %d: %v (the health service is exempt)", i, err)
		}
	}
}

// Stages are matched by a method's full name and by service.
func TestStagesByMethodAndService(t *testing.T) {
	pol := newPolicy(t, `
stages:
  - {name: empty, match: {grpc_method: /grpc.testing.TestService/EmptyCall}, controller: static-rate, params: {rate: 0.001}, burst: 1}
  - {name: test,  match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 0.001}, burst: 3}`)
	cc := bufDial(t, NewServer(pol, ServerOptions{}), &service{})
	tc := testpb.NewTestServiceClient(cc)
	ctx := ctxT(t)
	var emptyOK, unaryOK int
	for range 5 {
		if _, err := tc.EmptyCall(ctx, &testpb.Empty{}); err == nil {
			emptyOK++
		} else if status.Code(err) != codes.ResourceExhausted {
			t.Fatal(err)
		}
		if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); err == nil {
			unaryOK++
		} else if status.Code(err) != codes.ResourceExhausted {
			t.Fatal(err)
		}
	}
	if emptyOK != 1 || unaryOK != 3 {
		t.Errorf("EmptyCall served %d (want 1: its method's stage), UnaryCall %d (want 3: its service's stage)", emptyOK, unaryOK)
	}
	if a := totals(pol, "empty", 0).Admitted; a != 1 {
		t.Errorf("stage empty admitted %d, want 1", a)
	}
}

// Over real TCP: the priority and tenant metadata of a trusted peer
// give the class and travel to the handler's context with the call's
// deadline; from an untrusted peer they are ignored, and a malformed
// priority is treated as absent. The same with the tap handle installed
// (ServerOptions).
func TestHopMetadataOverTCP(t *testing.T) {
	for _, tapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("tap=%v", tapped), func(t *testing.T) { testHopMetadataOverTCP(t, tapped) })
	}
}

func testHopMetadataOverTCP(t *testing.T, tapped bool) {
	for _, tc := range []struct {
		name, trusted, priority string
		wantPriority            string
		wantTenant              string
	}{
		{"trusted", "127.0.0.0/8", "low", "low", "acme"},
		{"criticality", "127.0.0.0/8", "SHEDDABLE", "SHEDDABLE", "acme"},
		{"untrusted", "10.0.0.0/8", "low", "", ""},
		{"malformed", "127.0.0.0/8", "no such class", "", "acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := newPolicy(t, `
classes: {order: [high, low], default: high, trusted_proxies: [`+tc.trusted+`]}
stages: [{name: api, match: {grpc_service: grpc.testing.TestService}, controller: static-rate, params: {rate: 1000}}]`)
			svc := &service{}
			sl := NewServer(pol, ServerOptions{})
			var cc *grpc.ClientConn
			if tapped {
				cc = tcpDialOpts(t, sl.ServerOptions(), svc)
			} else {
				cc = tcpDial(t, sl, svc)
			}
			ctx := metadata.AppendToOutgoingContext(ctxT(t), "x-sluice-priority", tc.priority, "x-sluice-tenant", "acme")
			if _, err := testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
				t.Fatal(err)
			}
			got := svc.last.Load()
			if got.hop != (sluice.Hop{Priority: tc.wantPriority, Tenant: tc.wantTenant}) {
				t.Errorf("handler's hop %+v, want priority %q tenant %q", got.hop, tc.wantPriority, tc.wantTenant)
			}
			if got.deadline <= 0 || got.deadline > 10*time.Second {
				t.Errorf("handler's deadline %v left, want the call's (≤ 10s)", got.deadline)
			}
			wantClass := 0
			if tc.wantPriority != "" {
				wantClass = 1
			}
			if a := totals(pol, "api", wantClass).Admitted; a != 1 {
				t.Errorf("class %d admitted %d, want 1", wantClass, a)
			}
		})
	}
}

// A call whose deadline passes before it can get a slot is
// DEADLINE_EXCEEDED, not RESOURCE_EXHAUSTED: retrying cannot help.
func TestDeadlineRejection(t *testing.T) {
	pol := newPolicy(t, `
stages: [{name: q, match: {grpc_service: grpc.testing.TestService}, controller: static-concurrency, params: {limit: 1}, queue: {max: 4, timeout: 1h}}]`)
	svc := &service{block: make(chan struct{})}
	cc := bufDial(t, NewServer(pol, ServerOptions{}), svc)
	tc := testpb.NewTestServiceClient(cc)
	ctx := ctxT(t)
	done := holdSlot(ctx, tc, pol.Stage("q"))
	short, cancel := contextWithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := tc.UnaryCall(short, &testpb.SimpleRequest{})
	if c := status.Code(err); c != codes.DeadlineExceeded {
		t.Errorf("queued call past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	close(svc.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

// SetServing(false) answers UNAVAILABLE (try another replica), the
// health service still answers.
func TestNotServingIsUnavailable(t *testing.T) {
	srv := NewServer(newPolicy(t, `stages: []`), ServerOptions{})
	cc := bufDial(t, srv, &service{})
	ctx := ctxT(t)
	srv.SetServing(false)
	_, err := testpb.NewTestServiceClient(cc).EmptyCall(ctx, &testpb.Empty{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("draining: %v, want UNAVAILABLE", err)
	}
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health check while draining: %v", err)
	}
	srv.SetServing(true)
	if _, err := testpb.NewTestServiceClient(cc).EmptyCall(ctx, &testpb.Empty{}); err != nil {
		t.Errorf("serving again: %v", err)
	}
}

// A stream is admitted once, at open, holds its slot while it is short,
// and gives it back (never a response-time sample) once it is open past
// long_lived, so that a unary call queued behind it gets the slot.
func TestStreamAdmittedOnceThenLongLived(t *testing.T) {
	pol := newPolicy(t, `
stages: [{name: s, match: {grpc_service: grpc.testing.TestService}, controller: static-concurrency, params: {limit: 1}, queue: {max: 4, timeout: 1h}, long_lived: 200ms}]`)
	svc := &service{}
	cc := bufDial(t, NewServer(pol, ServerOptions{}), svc)
	tc := testpb.NewTestServiceClient(cc)
	ctx := ctxT(t)
	opened := time.Now() // before the stream's admission
	st, err := tc.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := st.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte{byte(i)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	stg := pol.Stage("s")
	if n := stg.InFlight(); n != 1 {
		t.Fatalf("in flight %d with the stream open, want 1", n)
	}
	if _, err := tc.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(opened); el < 200*time.Millisecond {
		t.Errorf("the unary call was served %v after the stream opened, before the stream was long-lived", el)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err == nil {
		t.Fatal("stream did not end")
	}
	tot := totals(pol, "s", 0)
	if tot.Admitted != 2 {
		t.Errorf("admitted %d, want 2 (the stream once, the unary call)", tot.Admitted)
	}
	for deadline := time.Now().Add(5 * time.Second); stg.InFlight() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := stg.InFlight(); n != 0 {
		t.Errorf("in flight %d after the stream ended", n)
	}
}

// A handler's error is a failure for the stage only when it is the
// service's (UNAVAILABLE, INTERNAL, …), not the caller's.
func TestSucceeded(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, true},
		{status.Error(codes.NotFound, ""), true},
		{status.Error(codes.InvalidArgument, ""), true},
		{status.Error(codes.Internal, ""), false},
		{status.Error(codes.Unavailable, ""), false},
		{status.Error(codes.ResourceExhausted, ""), false},
		{errors.New("plain"), false},
	} {
		if got := succeeded(tc.err); got != tc.want {
			t.Errorf("succeeded(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
