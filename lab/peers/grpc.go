// SPDX-License-Identifier: Apache-2.0

package peers

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/lab/tick"
)

// UserKey is the metadata key of the end user's id (DAGOR's port's
// "user-id"): end users set it with WithUser, services pass it on.
const UserKey = "user-id"

// Signal sources of LiveServer.
const (
	// SourceSched reads the Go scheduler's latency (SchedLatency), as
	// the public ports do.
	SourceSched = "sched"
	// SourceQueue reads a QueueMeter over the calls the server admitted:
	// a call waits from its admission until its handler calls Begin on
	// its context (or, when the handler never does, until the handler
	// starts: see ServerOptions.MarkBegin).
	SourceQueue = "queue"
)

// ServerOptions configure a LiveServer.
type ServerOptions struct {
	// Source is the signal Update reads: SourceSched (default) or
	// SourceQueue.
	Source string
	// MarkBegin says the handlers call Begin(ctx) when their work
	// starts (after waiting for a worker of their own); without it a
	// call begins service when its handler is called.
	MarkBegin bool
	// Now is the clock (default time.Now); tests pass their own.
	Now func() time.Time
}

// LiveServer drives a Server on real gRPC calls: a unary server
// interceptor that asks Admit (a refusal is RESOURCE_EXHAUSTED with the
// peer's reply metadata in the trailer, as the ports answer), serves the
// admitted call with what Admit forwards in its context, and attaches
// Done's reply metadata as trailer; and Run, the loop that calls Update
// every Period with the source's Signal. It is safe for concurrent use.
type LiveServer struct {
	mu     sync.Mutex
	s      Server
	opts   ServerOptions
	meter  QueueMeter
	sched  SchedLatency
	nextID atomic.Uint64
}

// NewLiveServer returns the live driver of s.
func NewLiveServer(s Server, opts ServerOptions) (*LiveServer, error) {
	switch opts.Source {
	case "":
		opts.Source = SourceSched
	case SourceSched, SourceQueue:
	default:
		return nil, errors.New(`peers: ServerOptions.Source must be "sched" or "queue", not "` + opts.Source + `"`)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &LiveServer{s: s, opts: opts}, nil
}

// Run calls Update every Period until ctx ends. Start it once, on its
// own goroutine.
func (l *LiveServer) Run(ctx context.Context) {
	tick.Every(ctx.Done(), l.s.Period(), l.Tick)
}

// Tick runs one Update with the signal since the last one (Run's step).
func (l *LiveServer) Tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	var sig Signal
	if l.opts.Source == SourceQueue {
		sig = l.meter.Read(now)
	} else {
		sig = l.sched.Read()
	}
	l.s.Update(now, sig)
}

type beginKey struct{}

type beginMark struct {
	l    *LiveServer
	id   uint64
	done atomic.Bool
}

// Begin marks, on a call's context, that its handler's work starts now:
// the end of its queueing delay for a LiveServer with SourceQueue and
// MarkBegin. It is a no-op on any other context and after the first call.
func Begin(ctx context.Context) {
	m, _ := ctx.Value(beginKey{}).(*beginMark)
	if m == nil || !m.done.CompareAndSwap(false, true) {
		return
	}
	m.l.mu.Lock()
	m.l.meter.Begin(m.l.opts.Now(), m.id)
	m.l.mu.Unlock()
}

// UnaryServerInterceptor returns the interceptor.
func (l *LiveServer) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		c := &Call{ID: l.nextID.Add(1), Method: info.FullMethod, Meta: firstValues(md)}
		c.User = c.Meta[UserKey]
		if dl, ok := ctx.Deadline(); ok {
			c.Deadline = dl
		}
		queue := l.opts.Source == SourceQueue
		l.mu.Lock()
		a := l.s.Admit(l.opts.Now(), c)
		if a.Admit && queue {
			l.meter.Arrive(l.opts.Now(), c.ID)
		}
		l.mu.Unlock()
		if !a.Admit {
			_ = grpc.SetTrailer(ctx, toMD(a.Reply))
			return nil, status.Error(codes.ResourceExhausted, "overload: "+a.Reason)
		}
		ctx = context.WithValue(ctx, forwardKey{}, &forwarded{meta: a.Forward, user: c.User})
		mark := &beginMark{l: l, id: c.ID}
		if queue {
			if l.opts.MarkBegin {
				ctx = context.WithValue(ctx, beginKey{}, mark)
			} else {
				Begin(context.WithValue(ctx, beginKey{}, mark))
			}
		}
		resp, err := handler(ctx, req)
		l.mu.Lock()
		if queue && mark.done.CompareAndSwap(false, true) {
			// Never marked: it did not wait for service in the end.
			l.meter.Leave(c.ID)
		}
		reply := l.s.Done(l.opts.Now(), c, outcomeOf(err))
		l.mu.Unlock()
		_ = grpc.SetTrailer(ctx, toMD(reply))
		return resp, err
	}
}

type forwardKey struct{}

type forwarded struct {
	meta Metadata
	user string
}

type userKey struct{}

// WithUser returns ctx whose calls run on behalf of end user id: the
// client interceptor sends it as UserKey (an end user's own calls; a
// service passes on the user of the request it serves).
func WithUser(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, userKey{}, id)
}

// LiveClient drives a Client on real gRPC calls: a unary client
// interceptor that asks Send, waits in the peer's queue while it says
// Wait — never past the call's context: a call whose context ends while
// it waits leaves the queue (Cancel) with the context's error —, refuses
// a denied call with RESOURCE_EXHAUSTED, attaches the peer's metadata,
// and gives Received the reply's trailer and outcome; and Run, the loop
// that calls Update every Period. It is safe for concurrent use.
type LiveClient struct {
	mu      sync.Mutex
	c       Client
	now     func() time.Time
	waiting map[*Call]chan Decision
	nextID  atomic.Uint64
}

// NewLiveClient returns the live driver of c; now is the clock (nil:
// time.Now).
func NewLiveClient(c Client, now func() time.Time) *LiveClient {
	if now == nil {
		now = time.Now
	}
	return &LiveClient{c: c, now: now, waiting: make(map[*Call]chan Decision)}
}

// Run calls Update every Period until ctx ends. Start it once, on its
// own goroutine.
func (l *LiveClient) Run(ctx context.Context) {
	tick.Every(ctx.Done(), l.c.Period(), l.Tick)
}

// Tick runs one Update (Run's step).
func (l *LiveClient) Tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dispatch(l.c.Update(l.now()))
}

// Waiting returns how many calls wait in the peer's queue.
func (l *LiveClient) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}

// dispatch hands released calls their decision; l.mu is held.
func (l *LiveClient) dispatch(rs []Release) {
	for _, r := range rs {
		if ch, ok := l.waiting[r.Call]; ok {
			delete(l.waiting, r.Call)
			ch <- r.Decision
		}
	}
}

// UnaryClientInterceptor returns the interceptor.
func (l *LiveClient) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c := &Call{ID: l.nextID.Add(1), Method: method}
		if f, ok := ctx.Value(forwardKey{}).(*forwarded); ok {
			c.Meta, c.User = f.meta, f.user
		}
		if u, ok := ctx.Value(userKey{}).(string); ok {
			c.User = u
		}
		if dl, ok := ctx.Deadline(); ok {
			c.Deadline = dl
		}
		d, err := l.decide(ctx, c)
		if err != nil {
			return err
		}
		if d.Verdict == Deny {
			return status.Error(codes.ResourceExhausted, "overload (client side): "+d.Reason)
		}
		kv := make([]string, 0, 2*len(d.Meta)+2)
		for _, k := range sortedKeys(d.Meta) {
			kv = append(kv, k, d.Meta[k])
		}
		if c.User != "" {
			kv = append(kv, UserKey, c.User)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
		var tr metadata.MD
		err = invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&tr))...)
		l.mu.Lock()
		l.dispatch(l.c.Received(l.now(), c, firstValues(tr), outcomeOf(err)))
		l.mu.Unlock()
		return err
	}
}

// decide returns the call's decision, waiting in the queue while the
// peer says so and ctx lasts; c.Sent is set for a call that goes.
func (l *LiveClient) decide(ctx context.Context, c *Call) (Decision, error) {
	l.mu.Lock()
	d := l.c.Send(l.now(), c)
	if d.Verdict != Wait {
		c.Sent = l.now()
		l.mu.Unlock()
		return d, nil
	}
	ch := make(chan Decision, 1)
	l.waiting[c] = ch
	l.mu.Unlock()
	select {
	case d = <-ch:
	case <-ctx.Done():
		l.mu.Lock()
		if _, ok := l.waiting[c]; ok {
			delete(l.waiting, c)
			l.dispatch(l.c.Cancel(l.now(), c))
			l.mu.Unlock()
			return Decision{}, status.FromContextError(ctx.Err()).Err()
		}
		l.mu.Unlock()
		d = <-ch // released as the context ended
		if d.Verdict == Send {
			// Sent and at once abandoned: the peer sees it end.
			l.mu.Lock()
			c.Sent = l.now()
			l.dispatch(l.c.Received(l.now(), c, nil, Canceled))
			l.mu.Unlock()
		}
		return Decision{}, status.FromContextError(ctx.Err()).Err()
	}
	l.mu.Lock()
	c.Sent = l.now()
	l.mu.Unlock()
	return d, nil
}

// outcomeOf classifies a call's error.
func outcomeOf(err error) Outcome {
	switch status.Code(err) {
	case codes.OK:
		return OK
	case codes.ResourceExhausted:
		return Rejected
	case codes.Canceled, codes.DeadlineExceeded:
		return Canceled
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled
	}
	return Failed
}

func firstValues(md metadata.MD) Metadata {
	m := make(Metadata, len(md))
	for k, v := range md {
		if len(v) > 0 {
			m[k] = v[0]
		}
	}
	return m
}

func toMD(m Metadata) metadata.MD {
	md := make(metadata.MD, len(m))
	for k, v := range m {
		md.Set(k, v)
	}
	return md
}

func sortedKeys(m Metadata) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
