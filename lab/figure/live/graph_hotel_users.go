// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpcsluice"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/lab/testbed"
	"github.com/sluicehq/sluice/lab/tick"
)

// hotelUsers are a row's end users: a connection to the entry per class,
// through the row's client side for end users — sluice's (one per class,
// client.DefaultConfig), or the peer's (UserClients client sides per
// class, each user on the side of its number modulo UserClients, as in
// the simulator), or none.
type hotelUsers struct {
	pl       hotelPlan
	conns    []*grpc.ClientConn
	sides    int
	peer     bool
	mu       sync.Mutex
	inflight sync.WaitGroup
	cancel   context.CancelFunc
	loops    sync.WaitGroup
}

type hotelSideKey struct{}

func (pl hotelPlan) newUsers(ctx context.Context, env *Env, procs *hotelProcs, scn, row string) (*hotelUsers, error) {
	g := pl.g
	u := &hotelUsers{pl: pl, sides: 1}
	lctx, cancel := context.WithCancel(ctx)
	u.cancel = cancel
	var peer peers.Peer
	if row != figure.HotelNone && row != figure.HotelSluice {
		p, _ := pl.c.PeerPoint(scn, row)
		cfg, err := figure.HotelPeerConfig(row, g, p)
		if err == nil {
			peer, err = testbed.NewHotelPeer(row, cfg)
		}
		if err != nil {
			u.close()
			return nil, err
		}
		u.sides, u.peer = pl.c.UserClients, true
	}
	live := map[peers.Client]*peers.LiveClient{}
	entry := g.Services[g.Entry].Name
	for cl := range figure.HotelClasses {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		switch {
		case row == figure.HotelSluice:
			gc, err := grpcsluice.NewClient(client.DefaultConfig(), client.Options{Rand: rand.New(rand.NewPCG(env.Seed*10+uint64(cl), 0x636c69656e74))})
			if err != nil {
				u.close()
				return nil, err
			}
			opts = append(opts, grpc.WithChainUnaryInterceptor(gc.UnaryInterceptor()))
		case peer != nil:
			ics, err := peerSides(peer, u.sides, entry, live, func(c peers.Client) peers.Client {
				if obs, ok := c.(peers.LoadObserver); ok {
					return &observedClient{Client: c, obs: obs, load: newLoadPoller(lctx, procs, g, &u.loops), g: g}
				}
				return c
			}, func(lc *peers.LiveClient) { u.loops.Go(func() { lc.Run(lctx) }) })
			if err != nil {
				u.close()
				return nil, err
			}
			opts = append(opts, grpc.WithChainUnaryInterceptor(dispatchSide(ics)))
		}
		cc, err := grpc.NewClient(procs.addrs[g.Entry], opts...)
		if err != nil {
			u.close()
			return nil, err
		}
		u.conns = append(u.conns, cc)
	}
	return u, nil
}

// peerSides returns the interceptors of sides client sides of peer toward
// the entry service: one LiveClient per distinct client object, shared
// by every side (and, through live, every class) that has it — a peer
// whose client side is one object for every caller (TopFull's entry)
// gets one LiveClient, whose lock serializes every call into it. wrap
// wraps a new client before its LiveClient is made; start runs its
// loop. A nil interceptor is a side without a client.
func peerSides(peer peers.Peer, sides int, entry string, live map[peers.Client]*peers.LiveClient,
	wrap func(peers.Client) peers.Client, start func(*peers.LiveClient)) ([]grpc.UnaryClientInterceptor, error) {
	var ics []grpc.UnaryClientInterceptor
	for range sides {
		c, err := peer.Client("", entry)
		if err != nil {
			return nil, err
		}
		if c == nil {
			ics = append(ics, nil)
			continue
		}
		lc := live[c]
		if lc == nil {
			lc = peers.NewLiveClient(wrap(c), nil)
			live[c] = lc
			start(lc)
		}
		ics = append(ics, lc.UnaryClientInterceptor())
	}
	return ics, nil
}

// side returns ctx for a call of user number user of class cl: its user
// id (peers.WithUser) and its client side.
func (u *hotelUsers) side(ctx context.Context, cl, user int) context.Context {
	if !u.peer {
		return ctx
	}
	ctx = peers.WithUser(ctx, figure.HotelClasses[cl]+"-"+strconv.Itoa(user))
	return context.WithValue(ctx, hotelSideKey{}, user%u.sides)
}

// dispatchSide is a client interceptor that runs the interceptor of the
// call's client side (hotelSideKey; nil: none).
func dispatchSide(ics []grpc.UnaryClientInterceptor) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		i, _ := ctx.Value(hotelSideKey{}).(int)
		if i < 0 || i >= len(ics) || ics[i] == nil {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		return ics[i](ctx, method, req, reply, cc, invoker, opts...)
	}
}

func (u *hotelUsers) close() {
	if u.cancel != nil {
		u.cancel()
	}
	u.loops.Wait()
	for _, cc := range u.conns {
		_ = cc.Close()
	}
}

// loadSnapshot is the services' busy seconds at a time.
type loadSnapshot struct {
	at   time.Time
	busy []float64
}

// newLoadPoller polls every service's busy seconds every 100 ms and
// returns the latest snapshot's reader.
func newLoadPoller(ctx context.Context, procs *hotelProcs, g *figure.HotelGraph, wg *sync.WaitGroup) func() loadSnapshot {
	var mu sync.Mutex
	var last loadSnapshot
	poll := func() {
		snap := loadSnapshot{at: time.Now(), busy: make([]float64, len(g.Services))}
		var err error
		for s := range g.Services {
			b, e := procs.busy(ctx, s)
			snap.busy[s], err = b, errors.Join(err, e)
		}
		if err == nil {
			mu.Lock()
			last = snap
			mu.Unlock()
		}
	}
	poll()
	wg.Go(func() {
		tick.Every(ctx.Done(), 100*time.Millisecond, poll)
	})
	return func() loadSnapshot {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// observedClient tells a client side that reads the services'
// utilization (TopFull's entry) each service's busy fraction since its
// last update, before each update, as the simulator does; it runs under
// the LiveClient's lock like every other call into the client.
type observedClient struct {
	peers.Client
	obs  peers.LoadObserver
	load func() loadSnapshot
	prev loadSnapshot
	g    *figure.HotelGraph
}

// Update observes the load, then updates the client.
func (o *observedClient) Update(now time.Time) []peers.Release {
	snap := o.load()
	if el := snap.at.Sub(o.prev.at).Seconds(); !o.prev.at.IsZero() && el > 0 && len(snap.busy) == len(o.prev.busy) {
		for s := range snap.busy {
			sv := o.g.Services[s]
			o.obs.ObserveLoad(now, sv.Name, (snap.busy[s]-o.prev.busy[s])/el/float64(sv.Workers*sv.Instances))
		}
	}
	if !snap.at.IsZero() {
		o.prev = snap
	}
	return o.Client.Update(now)
}
