// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/ctxsleep"
)

// Client is sluice's client side for gRPC calls: its unary and stream
// client interceptors drive, per destination (the ClientConn's target),
// the same throttle and retry budget as package client's HTTP Transport
// (client.Dests, client.LiveCall), with the same configuration
// (client.Config: the proxy's backends.client section). For every call
// they
//
//   - stamp what travels: the priority and the tenant of sluice.HopFrom
//     as metadata under the hop headers' names, lowercased
//     (x-sluice-priority, x-sluice-tenant), unless the call's outgoing
//     metadata already has them; the deadline travels as gRPC's own
//     grpc-timeout, from the context;
//   - refuse an attempt with less than MinRemaining left of the deadline
//     (DEADLINE_EXCEEDED, wrapping client.ErrDeadline);
//   - throttle the destination adaptively, counting RESOURCE_EXHAUSTED as
//     a refusal for overload and every other answer as accepted, and
//     refusing locally with RESOURCE_EXHAUSTED (wrapping
//     client.ErrThrottled);
//   - retry only what a retry can help and the server did not do:
//     UNAVAILABLE (try again, on another replica), and RESOURCE_EXHAUSTED
//     that carries a pushback (a google.rpc.RetryInfo detail, or the
//     grpc-retry-pushback-ms trailer; a negative one forbids a retry);
//     within the destination's retry budget, after a back-off with full
//     jitter and no earlier than the pushback. A stream is retried only
//     before any response message was received, and only while at most
//     MaxReplay messages were sent on it (they are sent again). As
//     always with gRPC, a SendMsg that returns io.EOF means the attempt
//     ended: its status, and the retry, come with RecvMsg.
//
// Retries assume that an UNAVAILABLE call was not done: true of
// transport failures and of sluice's servers (which refuse before the
// handler), not of a handler that returns UNAVAILABLE after doing its
// work. Set Retry.MaxAttempts to 1 for services that do.
//
// A Client is safe for concurrent use.
type Client struct {
	*client.Dests
	names atomic.Pointer[mdNames]
}

// mdNames are the metadata keys of the priority and the tenant.
type mdNames struct{ priority, tenant string }

// MaxReplay is the most messages a stream may have sent and still be
// retried.
const MaxReplay = 16

// NewClient returns a Client with cfg (SetDefaults is applied to a copy;
// an invalid field is a *sluice.FieldError) and opts (metrics under
// opts.Registerer, as client.New's).
func NewClient(cfg client.Config, opts client.Options) (*Client, error) {
	d, err := client.NewDests(cfg, opts)
	if err != nil {
		return nil, err
	}
	c := &Client{Dests: d}
	c.names.Store(namesOf(d.Config()))
	return c, nil
}

// SetConfig puts cfg into force for the calls that start from now on.
func (c *Client) SetConfig(cfg client.Config) error {
	if err := c.Dests.SetConfig(cfg); err != nil {
		return err
	}
	c.names.Store(namesOf(c.Dests.Config()))
	return nil
}

func namesOf(cfg client.Config) *mdNames {
	return &mdNames{priority: strings.ToLower(cfg.PriorityHeader), tenant: strings.ToLower(cfg.TenantHeader)}
}

// callError is a status error that wraps a client side's error.
type callError struct {
	st  *status.Status
	err error
}

func (e *callError) Error() string              { return e.st.Err().Error() }
func (e *callError) GRPCStatus() *status.Status { return e.st }
func (e *callError) Unwrap() error              { return e.err }

// The client side's own refusals, as gRPC status errors.
var (
	errThrottled = &callError{status.New(codes.ResourceExhausted, client.ErrThrottled.Error()), client.ErrThrottled}
	errLate      = &callError{status.New(codes.DeadlineExceeded, client.ErrDeadline.Error()), client.ErrDeadline}
)

// UnaryInterceptor returns the unary client interceptor (give it to
// grpc.WithChainUnaryInterceptor).
func (c *Client) UnaryInterceptor() grpc.UnaryClientInterceptor { return c.unary }

// StreamInterceptor returns the stream client interceptor (give it to
// grpc.WithChainStreamInterceptor).
func (c *Client) StreamInterceptor() grpc.StreamClientInterceptor { return c.stream }

// begin starts a call: its verdict as an error, or the stamped context.
func (c *Client) begin(call *client.LiveCall, ctx context.Context, target string) (context.Context, error) {
	deadline, _ := ctx.Deadline()
	switch c.BeginHop(call, target, sluice.HopFrom(ctx), time.Now(), true, deadline) {
	case client.Throttled:
		return nil, errThrottled
	case client.Late:
		return nil, errLate
	}
	return c.stamp(ctx), nil
}

// stamp adds the hop's priority and tenant to ctx's outgoing metadata.
func (c *Client) stamp(ctx context.Context) context.Context {
	hop := sluice.HopFrom(ctx)
	if hop == (sluice.Hop{}) {
		return ctx
	}
	n := c.names.Load()
	var kv []string
	if hop.Priority != "" && len(metadata.ValueFromOutgoingContext(ctx, n.priority)) == 0 {
		kv = append(kv, n.priority, hop.Priority)
	}
	if hop.Tenant != "" && len(metadata.ValueFromOutgoingContext(ctx, n.tenant)) == 0 {
		kv = append(kv, n.tenant, hop.Tenant)
	}
	if kv == nil {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// attemptCtx bounds an attempt by Retry.PerTryTimeout when set.
func (c *Client) attemptCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	pt := c.Dests.Config().Retry.PerTryTimeout
	if pt <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, pt)
}

func (c *Client) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var call client.LiveCall
	sctx, err := c.begin(&call, ctx, cc.Target())
	if err != nil {
		return err
	}
	var tr metadata.MD
	opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&tr))
	for {
		actx, cancel := c.attemptCtx(sctx)
		err := invoker(actx, method, req, reply, cc, opts...)
		cancel()
		if err != nil && ctx.Err() != nil {
			call.Done(time.Now(), client.Result{Outcome: sluice.Ignore})
			return err
		}
		now := time.Now()
		stop, wait := call.Done(now, Judge(err, tr))
		if stop != client.StopRetry || !ctxsleep.Sleep(ctx, wait) || call.Overran(time.Now()) {
			return err
		}
		tr = nil
	}
}

// Judge returns how the client side judges a call's answer: err (nil
// for OK) and its trailer (nil: none). RESOURCE_EXHAUSTED is an overload
// refusal; UNAVAILABLE, DEADLINE_EXCEEDED and CANCELLED are no answer the
// destination chose (client.Result.NoAnswer: the throttle counts them as
// accepted, as HTTP's transport failures, and they make no accept run).
func Judge(err error, trailer metadata.MD) client.Result {
	r := client.Result{Judged: true}
	if err == nil {
		return r
	}
	r.Outcome = sluice.OutcomeOf(succeeded(err))
	st := status.Convert(err)
	r.RetryAfter, r.HasRetryAfter = Pushback(st, trailer)
	switch st.Code() {
	case codes.Unavailable:
		r.Retryable = !r.HasRetryAfter || r.RetryAfter >= 0
		r.NoAnswer = true
	case codes.DeadlineExceeded, codes.Canceled:
		r.NoAnswer = true
	case codes.ResourceExhausted:
		r.Refused = true
		r.Retryable = r.HasRetryAfter && r.RetryAfter >= 0
	}
	if r.RetryAfter < 0 {
		r.RetryAfter = 0
	}
	return r
}

// Pushback returns the delay a server asked for: the retry_delay of a
// google.rpc.RetryInfo detail of st, else the trailer
// grpc-retry-pushback-ms (a negative value: do not retry, returned as
// -1ns). false: neither.
func Pushback(st *status.Status, trailer metadata.MD) (time.Duration, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			if err := ri.GetRetryDelay().CheckValid(); err == nil {
				return max(ri.GetRetryDelay().AsDuration(), 0), true
			}
		}
	}
	if v := trailer.Get(PushbackTrailer); len(v) == 1 {
		ms, err := strconv.ParseInt(v[0], 10, 32)
		if err == nil {
			if ms < 0 {
				return -1, true
			}
			return time.Duration(ms) * time.Millisecond, true
		}
	}
	return 0, false
}

func (c *Client) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s := &clientStream{c: c, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts}
	var err error
	if s.sctx, err = c.begin(&s.call, ctx, cc.Target()); err != nil {
		return nil, err
	}
	for {
		if err = s.open(); err == nil {
			return s, nil
		}
		if s.sequel(err, nil) != nil {
			return nil, err
		}
	}
}

// clientStream is a stream that may be opened again (retried) until it
// is committed: a response message arrived, more than MaxReplay messages
// were sent, or the call ended.
type clientStream struct {
	c        *Client
	ctx      context.Context // the caller's
	sctx     context.Context // stamped
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	call     client.LiveCall

	mu        sync.Mutex // guards what follows; held while sending
	cs        grpc.ClientStream
	cancel    context.CancelFunc // the attempt's
	sent      []any
	closeSent bool
	committed bool
	ended     bool
}

// open opens an attempt and replays what was sent. s.mu is held or the
// stream is not shared yet.
func (s *clientStream) open() error {
	actx, cancel := s.c.attemptCtx(s.sctx)
	cs, err := s.streamer(actx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		cancel()
		return err
	}
	for _, m := range s.sent {
		if err := cs.SendMsg(m); err != nil {
			break // the status comes with RecvMsg
		}
	}
	if s.closeSent {
		_ = cs.CloseSend()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.cs, s.cancel = cs, cancel
	return nil
}

// sequel decides after an attempt that failed with err: nil when the
// call is retried (after its wait), else the error that ends it.
func (s *clientStream) sequel(err error, trailer metadata.MD) error {
	if s.ctx.Err() != nil {
		s.call.Done(time.Now(), client.Result{Outcome: sluice.Ignore})
		return err
	}
	stop, wait := s.call.Done(time.Now(), Judge(err, trailer))
	if stop != client.StopRetry || !ctxsleep.Sleep(s.ctx, wait) || s.call.Overran(time.Now()) {
		return err
	}
	return nil
}

// commit makes the stream final: no retry from now on. s.mu is held.
func (s *clientStream) commit() {
	s.committed = true
	s.sent = nil
}

// end records the end of the call once. s.mu is held.
func (s *clientStream) end(err error, trailer metadata.MD) {
	if s.ended {
		return
	}
	s.ended = true
	if err != nil && s.ctx.Err() != nil {
		s.call.Done(time.Now(), client.Result{Outcome: sluice.Ignore})
		return
	}
	s.call.Done(time.Now(), Judge(err, trailer))
}

func (s *clientStream) Header() (metadata.MD, error) {
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	return cs.Header()
}

func (s *clientStream) Trailer() metadata.MD {
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	return cs.Trailer()
}

func (s *clientStream) Context() context.Context {
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	return cs.Context()
}

func (s *clientStream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeSent = true
	return s.cs.CloseSend()
}

func (s *clientStream) SendMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.committed {
		if len(s.sent) < MaxReplay {
			s.sent = append(s.sent, m)
		} else {
			s.commit()
		}
	}
	return s.cs.SendMsg(m)
}

func (s *clientStream) RecvMsg(m any) error {
	for {
		s.mu.Lock()
		cs, committed := s.cs, s.committed
		s.mu.Unlock()
		err := cs.RecvMsg(m)
		s.mu.Lock()
		if s.cs != cs { // retried meanwhile by another RecvMsg
			s.mu.Unlock()
			continue
		}
		switch {
		case err == nil:
			// The destination took the call: it is answered, for the
			// throttle, and final.
			if !committed {
				s.commit()
			}
			s.end(nil, nil)
			s.mu.Unlock()
			return nil
		case errors.Is(err, io.EOF):
			s.end(nil, nil)
			s.mu.Unlock()
			return err
		case s.committed || s.ended:
			s.end(err, cs.Trailer())
			s.mu.Unlock()
			return err
		}
		if s.sequel(err, cs.Trailer()) != nil {
			s.ended = true
			s.mu.Unlock()
			return err
		}
		for {
			oerr := s.open()
			if oerr == nil {
				break
			}
			if s.sequel(oerr, nil) != nil {
				s.ended = true
				s.mu.Unlock()
				return oerr
			}
		}
		s.mu.Unlock()
	}
}
