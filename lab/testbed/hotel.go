// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpcsluice"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/policy"
)

// Hotel service modes besides the peers' names (HotelPeerNames).
const (
	// HotelNone: no overload control.
	HotelNone = "none"
	// HotelSluice: grpcsluice's server interceptors with the policy, its
	// client interceptors (client.DefaultConfig) on the calls.
	HotelSluice = "sluice"
)

// Metadata a hotel service passes on from the call it serves to the
// calls it makes.
const (
	// HotelRequestMD is the index of the user request a call serves (the
	// lab's instrumentation, in the records).
	HotelRequestMD = "x-lab-request"
	// HotelClassMD is the user request's class (high, low): the
	// application's own priority, which the sluice policy classifies by.
	HotelClassMD = "x-sluice-class"
)

// HotelCallConfig is one call a handler makes after its work.
type HotelCallConfig struct {
	// Service is the callee's service name; Addr its address
	// (host:port, loopback).
	Service string `json:"service"`
	Addr    string `json:"addr"`
}

// HotelMethodConfig is one API a hotel service serves.
type HotelMethodConfig struct {
	// API is the API's name: the method is its name with the first
	// letter upper-cased.
	API string `json:"api"`
	// Work is the CPU time of its handler (before the scale).
	Work time.Duration `json:"work"`
	// Calls are made one after the other after the work.
	Calls []HotelCallConfig `json:"calls"`
}

// HotelServiceConfig configures one service of the hotel graph
// (graph-hotel): its name and methods, its worker pool, and its mode.
type HotelServiceConfig struct {
	Name string `json:"name"`
	// Entry marks the graph's entry service (a peer's server side there
	// assigns priorities).
	Entry bool `json:"entry"`
	// Workers goroutines do the handlers' work (its CPU quota in
	// cores); QueueLimit calls wait for one at most (0: unbounded), the
	// others are refused RESOURCE_EXHAUSTED.
	Workers    int                 `json:"workers"`
	QueueLimit int                 `json:"queue_limit"`
	Methods    []HotelMethodConfig `json:"methods"`
	// Mode is none, sluice or a peer's name.
	Mode string `json:"mode"`
	// Policy is the sluice mode's policy; Peer the peer mode's peer
	// (set by the caller, not encoded).
	Policy policy.Config `json:"-"`
	Peer   peers.Peer    `json:"-"`
	// Seed seeds the client side's and the work's draws.
	Seed uint64 `json:"seed"`
}

// Validate reports the first invalid field.
func (c *HotelServiceConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("hotel service: name is required")
	case c.Workers < 1:
		return fmt.Errorf("hotel service %s: workers=%d: want ≥ 1", c.Name, c.Workers)
	case c.QueueLimit < 0:
		return fmt.Errorf("hotel service %s: queue_limit=%d: want ≥ 0 (0: unbounded)", c.Name, c.QueueLimit)
	case len(c.Methods) == 0:
		return fmt.Errorf("hotel service %s: no methods", c.Name)
	case !CPUTimeSupported:
		return fmt.Errorf("hotel service %s: burning CPU time needs a thread CPU clock (Linux)", c.Name)
	}
	for i, m := range c.Methods {
		if m.API == "" || m.Work < 0 {
			return fmt.Errorf("hotel service %s: methods[%d]: an API name and a work ≥ 0 are required", c.Name, i)
		}
		for j, k := range m.Calls {
			if k.Service == "" || k.Addr == "" {
				return fmt.Errorf("hotel service %s: methods[%d].calls[%d]: service and addr are required", c.Name, i, j)
			}
		}
	}
	switch c.Mode {
	case HotelNone, HotelSluice:
	default:
		if c.Peer == nil || c.Peer.Name() != c.Mode {
			return fmt.Errorf("hotel service %s: mode %q: want none, sluice or a peer (%s) with its configuration", c.Name, c.Mode, strings.Join(HotelPeerNames, ", "))
		}
	}
	return nil
}

// HotelGRPCName returns the gRPC service name of a hotel service:
// "hotel." + its name with the first letter upper-cased.
func HotelGRPCName(service string) string {
	if service == "" {
		return "hotel."
	}
	return "hotel." + strings.ToUpper(service[:1]) + service[1:]
}

// HotelMethod returns the full method of API api at service.
func HotelMethod(service, api string) string {
	if api == "" {
		return "/" + HotelGRPCName(service) + "/"
	}
	return "/" + HotelGRPCName(service) + "/" + strings.ToUpper(api[:1]) + api[1:]
}

// HotelService is one service of the hotel graph on real sockets: a gRPC
// service (HotelGRPCName, one unary method per API, google.protobuf.Empty
// in and out, its service descriptor written here) whose handler waits
// for one of Workers worker slots, burns the method's CPU time on it
// (thread CPU time, as testbed cgi does), gives it back and then makes
// its calls, one after the other, with the call's context (its deadline
// travels as grpc-timeout; a call whose context ended makes none) and
// answers. Neither the wait nor the work watches the call's context: the
// work of a call whose caller left is done all the same, as a CPU-bound
// Go handler does it, and recorded as gone.
//
// The service hotel.Control, exempt from admission control, answers the
// lab: Records (the calls' records, CSV), Scale (multiply an API's work)
// and Busy (the workers' busy seconds so far).
//
// In sluice mode grpcsluice's server interceptors admit the calls and
// its client interceptors carry the calls on; in a peer's mode the
// peer's peers.LiveServer (its queueing-delay signal from the worker
// queue, the papers' signal: a call waits from its admission until a
// worker takes it) and a peers.LiveClient per callee.
type HotelService struct {
	cfg     HotelServiceConfig
	srv     *grpc.Server
	conns   map[string]*grpc.ClientConn
	methods map[string]*hotelMethod
	sem     chan struct{}
	waiting atomic.Int64
	busy    atomic.Int64 // nanoseconds of work done
	scale   sync.Map     // API → float64 (the "" key: all)
	rec     hotelRecorder
	ctr     counters
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
	rngs    sync.Pool
}

type hotelMethod struct {
	cfg   HotelMethodConfig
	calls []hotelCall
}

type hotelCall struct {
	cc     *grpc.ClientConn
	method string
}

// hotelControl is the lab's control service.
const hotelControl = "hotel.Control"

// NewHotelService validates cfg and returns the service; serve its Server
// and Close it when done.
func NewHotelService(cfg HotelServiceConfig) (*HotelService, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &HotelService{cfg: cfg, conns: map[string]*grpc.ClientConn{}, methods: map[string]*hotelMethod{},
		sem: make(chan struct{}, cfg.Workers), cancel: cancel}
	var seq atomic.Uint64
	s.rngs.New = func() any { return rand.New(rand.NewPCG(cfg.Seed, seq.Add(1))) }
	s.scale.Store("", 1.0)
	sopts, dial, err := s.control(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, m := range cfg.Methods {
		hm := &hotelMethod{cfg: m}
		for _, k := range m.Calls {
			cc := s.conns[k.Addr]
			if cc == nil {
				if _, err := loadgen.CheckLoopbackURL("addr", "http://"+k.Addr); err != nil {
					s.Close()
					return nil, fmt.Errorf("hotel service %s: call to %s: %w", cfg.Name, k.Service, err)
				}
				opts, err := dial(k.Service)
				if err != nil {
					s.Close()
					return nil, err
				}
				if cc, err = grpc.NewClient(k.Addr, opts...); err != nil {
					s.Close()
					return nil, fmt.Errorf("hotel service %s: %w", cfg.Name, err)
				}
				s.conns[k.Addr] = cc
			}
			hm.calls = append(hm.calls, hotelCall{cc: cc, method: HotelMethod(k.Service, m.API)})
		}
		s.methods[m.API] = hm
	}
	s.srv = grpc.NewServer(sopts...)
	s.srv.RegisterService(s.desc(), s)
	s.srv.RegisterService(s.controlDesc(), s)
	return s, nil
}

// control returns the server options and, per callee, the dial options
// of the service's mode, and starts the mode's loops.
func (s *HotelService) control(ctx context.Context) ([]grpc.ServerOption, func(to string) ([]grpc.DialOption, error), error) {
	cfg := s.cfg
	base := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	switch cfg.Mode {
	case HotelNone:
		return nil, func(string) ([]grpc.DialOption, error) {
			return append(base, grpc.WithChainUnaryInterceptor(forwardHotelMD)), nil
		}, nil
	case HotelSluice:
		pol, err := policy.New(cfg.Policy, policy.Options{Rand: rand.New(rand.NewPCG(cfg.Seed, 0x706f6c))})
		if err != nil {
			return nil, nil, fmt.Errorf("hotel service %s: policy: %w", cfg.Name, err)
		}
		cl, err := grpcsluice.NewClient(client.DefaultConfig(), client.Options{Rand: rand.New(rand.NewPCG(cfg.Seed, 0x74696572))})
		if err != nil {
			return nil, nil, fmt.Errorf("hotel service %s: client: %w", cfg.Name, err)
		}
		s.wg.Go(func() { pol.Run(ctx) })
		srv := grpcsluice.NewServer(pol, grpcsluice.ServerOptions{Exempt: append([]string{hotelControl}, grpcsluice.DefaultExempt...)})
		return srv.ServerOptions(), func(string) ([]grpc.DialOption, error) {
			return append(base, grpc.WithChainUnaryInterceptor(forwardHotelMD, cl.UnaryInterceptor())), nil
		}, nil
	}
	var sopts []grpc.ServerOption
	srv, err := cfg.Peer.Server(cfg.Name, cfg.Entry)
	if err != nil {
		return nil, nil, fmt.Errorf("hotel service %s: %s's server side: %w", cfg.Name, cfg.Mode, err)
	}
	if srv != nil {
		ls, err := peers.NewLiveServer(srv, peers.ServerOptions{Source: peers.SourceQueue, MarkBegin: true})
		if err != nil {
			return nil, nil, err
		}
		s.wg.Go(func() { ls.Run(ctx) })
		ic := ls.UnaryServerInterceptor()
		sopts = append(sopts, grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if strings.HasPrefix(info.FullMethod, "/"+hotelControl+"/") {
				return h(ctx, req)
			}
			return ic(ctx, req, info, h)
		}))
	}
	return sopts, func(to string) ([]grpc.DialOption, error) {
		cl, err := cfg.Peer.Client(cfg.Name, to)
		if err != nil {
			return nil, fmt.Errorf("hotel service %s: %s's client side toward %s: %w", cfg.Name, cfg.Mode, to, err)
		}
		opts := append(base, grpc.WithChainUnaryInterceptor(forwardHotelMD))
		if cl != nil {
			lc := peers.NewLiveClient(cl, nil)
			s.wg.Go(func() { lc.Run(ctx) })
			opts = append(opts, grpc.WithChainUnaryInterceptor(lc.UnaryClientInterceptor()))
		}
		return opts, nil
	}, nil
}

// forwardHotelMD passes on the served call's request index and class.
func forwardHotelMD(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var kv []string
	for _, k := range []string{HotelRequestMD, HotelClassMD} {
		if v := metadata.ValueFromIncomingContext(ctx, k); len(v) > 0 {
			kv = append(kv, k, v[0])
		}
	}
	if kv != nil {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Server returns the gRPC server.
func (s *HotelService) Server() *grpc.Server { return s.srv }

// desc is the service's descriptor: one unary method per API.
func (s *HotelService) desc() *grpc.ServiceDesc {
	d := &grpc.ServiceDesc{ServiceName: HotelGRPCName(s.cfg.Name), HandlerType: (*any)(nil)}
	for _, m := range s.cfg.Methods {
		api := m.API
		full := HotelMethod(s.cfg.Name, api)
		d.Methods = append(d.Methods, grpc.MethodDesc{MethodName: full[strings.LastIndexByte(full, '/')+1:],
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(emptypb.Empty)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, _ any) (any, error) { return s.handle(ctx, api) }
				if ic == nil {
					return h(ctx, in)
				}
				return ic(ctx, in, &grpc.UnaryServerInfo{Server: s, FullMethod: full}, h)
			}})
	}
	return d
}

// handle serves one call of api.
func (s *HotelService) handle(ctx context.Context, api string) (any, error) {
	m := s.methods[api]
	arrival := time.Now()
	// In the system: waiting for a worker or working.
	n := s.waiting.Add(1)
	defer s.waiting.Add(-1)
	if lim := s.cfg.QueueLimit; lim > 0 && n > int64(lim+s.cfg.Workers) {
		s.ctr.count(503)
		return nil, status.Error(codes.ResourceExhausted, "hotel: the worker queue is full")
	}
	s.sem <- struct{}{}
	start := time.Now()
	peers.Begin(ctx)
	cpu := s.burn(time.Duration(float64(m.cfg.Work) * s.factor(api)))
	<-s.sem
	finish := time.Now()
	s.busy.Add(int64(finish.Sub(start)))
	dl, _ := ctx.Deadline()
	s.rec.add(HotelRecord{API: api, Request: requestIndex(ctx), Arrival: arrival, Start: start, Finish: finish,
		CPU: cpu, Deadline: dl, Gone: ctx.Err() != nil})
	if err := ctx.Err(); err != nil {
		s.ctr.count(504)
		return nil, status.FromContextError(err).Err()
	}
	for _, c := range m.calls {
		if err := c.cc.Invoke(ctx, c.method, &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
			s.ctr.count(502)
			return nil, err
		}
	}
	s.ctr.count(200)
	return &emptypb.Empty{}, nil
}

// burn burns d of the thread's CPU time and returns how much it burnt.
func (s *HotelService) burn(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, err := threadCPU()
	r := s.rngs.Get().(*rand.Rand)
	burnCPU(r, d)
	s.rngs.Put(r)
	t1, err1 := threadCPU()
	if err != nil || err1 != nil {
		return d
	}
	return t1 - t0
}

// factor returns the scale of api's work: the API's own times the
// service's (the "" key).
func (s *HotelService) factor(api string) float64 {
	f := 1.0
	if v, ok := s.scale.Load(""); ok {
		f *= v.(float64)
	}
	if v, ok := s.scale.Load(api); ok {
		f *= v.(float64)
	}
	return f
}

// Stats returns the calls counted by their answer's HTTP equivalent.
func (s *HotelService) Stats() Stats { return s.ctr.stats() }

// Close stops the server, the connections and the mode's loops. It is
// idempotent.
func (s *HotelService) Close() error {
	var err error
	s.once.Do(func() {
		if s.srv != nil {
			s.srv.Stop()
		}
		for _, cc := range s.conns {
			err = errors.Join(err, cc.Close())
		}
		s.cancel()
		s.wg.Wait()
	})
	return err
}
