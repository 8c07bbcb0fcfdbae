// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/reject"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/stage"
)

// DefaultExempt lists the services whose calls are never admission
// controlled by default: the health service (a load balancer's health
// checks must see the truth, not a shed) and server reflection.
var DefaultExempt = []string{
	"grpc.health.v1.Health",
	"grpc.reflection.v1.ServerReflection",
	"grpc.reflection.v1alpha.ServerReflection",
}

// PushbackTrailer is the trailer in which grpc-go's retry reads a
// server's pushback, in milliseconds (gRFC A6).
const PushbackTrailer = "grpc-retry-pushback-ms"

// ServerOptions are a Server's inputs besides its policy.
type ServerOptions struct {
	// Exempt lists the full names of services ("grpc.health.v1.Health")
	// whose calls bypass admission control. nil: DefaultExempt; an empty
	// non-nil slice exempts nothing.
	Exempt []string
}

// Server is sluice's admission control for a gRPC server: its unary and
// stream interceptors put every call through a sluice.Policy, the
// interface sluice.Middleware takes — with package policy's, the same
// classification, stages, controllers, rejections and metrics as the
// middleware — before the handler runs.
//
// A call is read as the HTTP/2 request it is (the gRPC protocol):
// method POST, path its full method name ("/pkg.Service/Method", which
// stages select with match.grpc_method, match.grpc_service or a path
// rule), its metadata as request headers (the headers the policy reads:
// hop headers, class rule headers), its peer as the remote address and
// its deadline as the request's. A stream is admitted once, when it
// opens; it becomes a stream for the stage (it gives back its
// concurrency slot and is never a response-time sample) once it is
// still open after its stage's long_lived (default 30s), as a long HTTP
// response does.
//
// A Server is safe for concurrent use.
type Server struct {
	b       atomic.Pointer[bound]
	exempt  map[string]bool
	serving atomic.Bool
	tapped  atomic.Bool // the tap handle has run (see TapHandle)
}

// bound is a policy and what the interceptors read for it.
type bound struct {
	pol      sluice.Policy
	admitCtx ContextAdmitter // nil: Admit with a copy of the request
	rej      Rejecter        // nil: read from the policy's HTTP answer
	hdr      []header        // the headers the policy reads
	all      bool            // the policy does not say: every metadata key
	needPeer bool            // class rules may read the peer
	needHost bool            // stage rules read the host
}

// RequestReader is implemented by a sluice.Policy that says what it
// reads of a request (package policy's *Policy does): the canonical
// names of the headers, whether it always reads the client's connection
// (RemoteAddr, and TLS when the call came over TLS: the verified client
// certificate; both are also set whenever one of the headers is present),
// and whether it reads the Host. The interceptors then fill in only
// those. Without it, every key of a call's metadata becomes a header,
// and the peer and the :authority are always read.
type RequestReader interface {
	ReadsRequest() (headers []string, remoteAddr, host bool)
}

// ContextAdmitter is implemented by a sluice.Policy that admits a
// request with a context given beside it (package policy's AdmitContext),
// saving the copy that r.WithContext makes. Without it, the interceptors
// call Admit with the call's context on a copy of the request.
type ContextAdmitter interface {
	AdmitContext(ctx context.Context, r *http.Request) (sluice.Admission, error)
}

// Rejecter is implemented by a sluice.Policy that says what a rejection
// says besides writing it (package policy's Rejection): the stage and
// the class named in RESOURCE_EXHAUSTED's message, and the pushback.
// Without it, the pushback is the Retry-After (whole seconds) of the
// policy's HTTP answer (Reject), and the stage and class are "-".
type Rejecter interface {
	Rejection(r *http.Request) policy.Rejection
}

// header is a header name in its HTTP (canonical) and metadata (lower
// case) forms.
type header struct{ canon, md string }

// NewServer returns a Server admitting calls through p, serving. p is
// any sluice.Policy, as sluice.Middleware takes; package policy's
// *Policy also implements RequestReader, ContextAdmitter and Rejecter.
func NewServer(p sluice.Policy, opts ServerOptions) *Server {
	s := &Server{exempt: map[string]bool{}}
	ex := opts.Exempt
	if ex == nil {
		ex = DefaultExempt
	}
	for _, name := range ex {
		s.exempt[strings.Trim(name, "/")] = true
	}
	s.SetPolicy(p)
	s.serving.Store(true)
	return s
}

// SetPolicy puts p into force for the calls that arrive from now on (a
// reload).
func (s *Server) SetPolicy(p sluice.Policy) {
	b := &bound{pol: p, all: true, needPeer: true, needHost: true}
	b.admitCtx, _ = p.(ContextAdmitter)
	b.rej, _ = p.(Rejecter)
	if rr, ok := p.(RequestReader); ok {
		names, peer, host := rr.ReadsRequest()
		b.all, b.needPeer, b.needHost = false, peer, host
		for _, n := range names {
			b.hdr = append(b.hdr, header{canon: n, md: strings.ToLower(n)})
		}
	}
	s.b.Store(b)
}

// SetServing sets whether the server takes calls. While it does not
// (draining before a shutdown, not ready yet), every call but the exempt
// ones is answered UNAVAILABLE at once: the caller should try another
// replica.
func (s *Server) SetServing(on bool) { s.serving.Store(on) }

// exempted reports whether fullMethod's service is exempt.
func (s *Server) exempted(fullMethod string) bool {
	if len(s.exempt) == 0 {
		return false
	}
	svc := strings.TrimPrefix(fullMethod, "/")
	if i := strings.LastIndexByte(svc, '/'); i >= 0 {
		svc = svc[:i]
	}
	return s.exempt[svc]
}

// errNotServing is the answer of a server that does not serve.
var errNotServing = status.Error(codes.Unavailable, "sluice: not serving: try another replica")

// UnaryInterceptor returns the unary server interceptor (give it to
// grpc.ChainUnaryInterceptor or grpc.UnaryInterceptor).
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor { return s.unary }

// StreamInterceptor returns the stream server interceptor.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor { return s.stream }

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.exempted(info.FullMethod) {
		return handler(ctx, req)
	}
	a, hctx, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	finished := false
	defer func() {
		if !finished { // the handler panicked
			a.Done(sluice.Failure)
		}
	}()
	resp, err := handler(hctx, req)
	if cut := cancelled(ctx, hctx, err); cut != nil {
		resp, err = nil, cut
	}
	finished = true
	a.Done(sluice.OutcomeOf(succeeded(err) && ctx.Err() == nil))
	return resp, err
}

// cancelled returns the status of a call whose handler failed with err
// after sluice ended its context (hctx) while the call's own (ctx) still
// ran: RESOURCE_EXHAUSTED when the stage's hog rule cancelled it (the
// cause wraps sluice.ErrHog), DEADLINE_EXCEEDED when the deadline of its
// timeout header passed. nil otherwise: a handler that answered keeps
// its answer, and a call whose caller left or whose own grpc-timeout
// passed is grpc-go's to end.
func cancelled(ctx, hctx context.Context, err error) error {
	if err == nil || hctx.Err() == nil || ctx.Err() != nil {
		return nil
	}
	cause := context.Cause(hctx)
	switch {
	case errors.Is(cause, sluice.ErrHog):
		return statusOf(reject.Answer{Reason: reject.Hog, Detail: cause.Error()}.GRPC())
	case errors.Is(cause, context.DeadlineExceeded):
		return statusOf(reject.Answer{Reason: reject.HandlerDeadline}.GRPC())
	}
	return nil
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if s.exempted(info.FullMethod) {
		return handler(srv, ss)
	}
	ctx := ss.Context()
	a, hctx, err := s.admit(ctx, info.FullMethod)
	if err != nil {
		return err
	}
	w := &serverStream{ServerStream: ss, ctx: hctx}
	end := s.watchLong(a)
	finished := false
	defer func() {
		if !finished {
			end(sluice.Failure)
		}
	}()
	err = handler(srv, w)
	if cut := cancelled(ctx, hctx, err); cut != nil {
		err = cut
	}
	finished = true
	end(sluice.OutcomeOf(succeeded(err) && ctx.Err() == nil))
	return err
}

// watchLong makes a a stream once it is still open after its stream
// deadline (the stage's long_lived), from a timer, and returns the
// function that ends it: the timer never touches a after that.
func (s *Server) watchLong(a sluice.Admission) func(sluice.Outcome) {
	var mu sync.Mutex
	ended := false
	var tm *time.Timer
	if d, ok := a.(sluice.StreamDeadline); ok {
		if at := d.StreamDeadline(); !at.IsZero() {
			tm = time.AfterFunc(time.Until(at), func() {
				mu.Lock()
				if !ended {
					a.Stream()
				}
				mu.Unlock()
			})
		}
	}
	return func(o sluice.Outcome) {
		if tm != nil {
			tm.Stop()
		}
		mu.Lock()
		ended = true
		mu.Unlock()
		a.Done(o)
	}
}

// serverStream gives the handler the admission's context.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *serverStream) Context() context.Context { return w.ctx }

// callRequest is the HTTP view of a call, pooled.
type callRequest struct {
	r   http.Request
	u   url.URL
	tls tls.ConnectionState // r.TLS, when the call came over TLS
}

var requestPool = sync.Pool{New: func() any {
	c := new(callRequest)
	c.r.URL = &c.u
	c.r.Header = make(http.Header, 4)
	return c
}}

// admit puts the call to fullMethod through the policy. It returns the
// admission and the handler's context, or the call's answer.
func (s *Server) admit(ctx context.Context, fullMethod string) (sluice.Admission, context.Context, error) {
	if !s.serving.Load() {
		return nil, nil, errNotServing
	}
	b := s.b.Load()
	cr := requestPool.Get().(*callRequest)
	md, tapped := s.tappedMetadata(ctx)
	r := b.request(cr, ctx, fullMethod, md, tapped)
	a, err := b.admitWith(ctx, r)
	if err != nil {
		err = b.refusal(ctx, r, err)
		b.release(cr)
		return nil, nil, err
	}
	b.release(cr)
	hctx := ctx
	if c, ok := a.(sluice.RequestContext); ok {
		if x := c.Context(); x != nil {
			hctx = x
		}
	}
	if q := a.Quality(); q < 1 {
		hctx = sluice.WithQuality(hctx, q)
	}
	return a, hctx, nil
}

// request fills cr with the call's HTTP view (its context is the
// call's, passed to AdmitContext beside it). With tapped, md is the
// call's metadata as the tap handle found it (nil: none of the headers
// b reads); without, the headers are read from ctx.
func (b *bound) request(cr *callRequest, ctx context.Context, fullMethod string, md metadata.MD, tapped bool) *http.Request {
	r := &cr.r
	r.Method = http.MethodPost
	cr.u.Path = fullMethod
	r.RequestURI = fullMethod
	r.ProtoMajor, r.Proto = 2, "HTTP/2.0"
	found := false
	if b.all {
		found = allHeaders(r.Header, ctx)
	}
	for _, h := range b.hdr {
		if v := incoming(ctx, md, tapped, h.md); len(v) > 0 {
			r.Header[h.canon] = v
			found = true
		}
	}
	if b.needHost {
		if v := incoming(ctx, md, tapped, ":authority"); len(v) > 0 {
			r.Host = v[0]
		}
	}
	if found || b.needPeer {
		if p, ok := peer.FromContext(ctx); ok {
			if p.Addr != nil {
				r.RemoteAddr = p.Addr.String()
			}
			// The TLS client certificate grpc-go verified, for the
			// class rules and tenant key that read it (client-cert).
			if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
				cr.tls = ti.State
				r.TLS = &cr.tls
			}
		}
	}
	return r
}

// incoming returns the values of the call's metadata key (lower case):
// from md, as the tap handle found it, with tapped; else from ctx.
func incoming(ctx context.Context, md metadata.MD, tapped bool, key string) []string {
	if tapped {
		return md[key]
	}
	return metadata.ValueFromIncomingContext(ctx, key)
}

// release recycles cr.
func (b *bound) release(cr *callRequest) {
	clear(cr.r.Header)
	cr.r.Host, cr.r.RemoteAddr, cr.r.TLS, cr.tls = "", "", nil, tls.ConnectionState{}
	requestPool.Put(cr)
}

// refusal returns the gRPC answer to a call Admit refused with err.
func (b *bound) refusal(ctx context.Context, r *http.Request, err error) error {
	switch {
	case errors.Is(err, stage.ErrDeadline):
		return statusOf(reject.Answer{Reason: reject.EarlyDiscard}.GRPC())
	case !errors.Is(err, sluice.ErrRejected):
		if ce := ctx.Err(); ce != nil {
			return status.FromContextError(ce).Err()
		}
		return status.FromContextError(err).Err()
	}
	rj := b.rejection(r, err)
	st := reject.Answer{Reason: reject.Overloaded, Stage: rj.Stage, Class: rj.Class, RetryAfter: rj.RetryAfter}.GRPC()
	_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackTrailer, st.Pushback))
	return statusOf(st)
}

// Overloaded returns the status error of a call shed for overload:
// RESOURCE_EXHAUSTED with a google.rpc.RetryInfo detail carrying
// retryAfter. The message names the stage and the class.
func Overloaded(stageName, className string, retryAfter time.Duration) error {
	return statusOf(reject.Answer{Reason: reject.Overloaded, Stage: stageName, Class: className, RetryAfter: retryAfter}.GRPC())
}

// statusOf is st as the status error a handler returns: its code and
// message, and its RetryInfo as a detail when it has one (its pushback
// goes in a trailer, which the caller sets).
func statusOf(st reject.Status) error {
	s := status.New(codes.Code(st.Code), st.Message)
	if st.RetryInfo {
		if d, err := s.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(st.RetryAfter)}); err == nil {
			s = d
		}
	}
	return s.Err()
}

// succeeded reports whether a handler's error says the service did its
// work: no error, or one that is the caller's (INVALID_ARGUMENT,
// NOT_FOUND, PERMISSION_DENIED, …, as an HTTP 4xx is). UNKNOWN,
// CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL,
// UNAVAILABLE and DATA_LOSS are failures (as a 5xx or a client that went
// away is).
func succeeded(err error) bool {
	if err == nil {
		return true
	}
	switch status.Code(err) {
	case codes.Unknown, codes.Canceled, codes.DeadlineExceeded, codes.ResourceExhausted,
		codes.Internal, codes.Unavailable, codes.DataLoss:
		return false
	}
	return true
}
