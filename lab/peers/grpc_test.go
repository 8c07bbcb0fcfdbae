// SPDX-License-Identifier: Apache-2.0

package peers_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/lab/internal/grpctest"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/lab/peers/breakwater"
	"github.com/sluicehq/sluice/lab/peers/dagor"
	"github.com/sluicehq/sluice/lab/peers/rajomon"
)

const unary = "/grpc.testing.TestService/UnaryCall"

// service answers UnaryCall with handle's result.
type service struct {
	testpb.UnimplementedTestServiceServer
	handle func(ctx context.Context) error
}

func (s *service) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if s.handle != nil {
		if err := s.handle(ctx); err != nil {
			return nil, err
		}
	}
	return &testpb.SimpleResponse{}, nil
}

// serve starts a loopback gRPC server with the peer's server side and
// returns its address.
func serve(t *testing.T, ls *peers.LiveServer, handle func(ctx context.Context) error) string {
	t.Helper()
	var opts []grpc.ServerOption
	if ls != nil {
		opts = append(opts, grpc.UnaryInterceptor(ls.UnaryServerInterceptor()))
	}
	srv := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(srv, &service{handle: handle})
	return grpctest.Serve(t, srv)
}

// dial returns a TestService client through the peer's client side.
func dial(t *testing.T, addr string, lc *peers.LiveClient) testpb.TestServiceClient {
	t.Helper()
	return testpb.NewTestServiceClient(grpctest.Dial(t, addr, grpc.WithUnaryInterceptor(lc.UnaryClientInterceptor())))
}

func liveServer(t *testing.T, s peers.Server) *peers.LiveServer {
	t.Helper()
	ls, err := peers.NewLiveServer(s, peers.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// Breakwater's metadata round trip: the client's id and demand reach the
// server, the server's window comes back in the trailer and becomes the
// client's.
func TestLiveBreakwaterRoundTrip(t *testing.T) {
	cfg := breakwater.DefaultConfig()
	cfg.InitialCredits, cfg.Cores = 5, 1
	srv, _ := breakwater.NewServer(cfg)
	cl, _ := breakwater.NewClient(cfg, "client-1")
	var mu sync.Mutex
	var got metadata.MD
	addr := serve(t, liveServer(t, srv), func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		got, _ = metadata.FromIncomingContext(ctx)
		return nil
	})
	c := dial(t, addr, peers.NewLiveClient(cl, nil))
	if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if v := got.Get(breakwater.KeyClient); len(v) != 1 || v[0] != "client-1" || len(got.Get(breakwater.KeyDemand)) != 1 {
		t.Fatalf("server saw metadata %v", got)
	}
	// open 5, one client ≤ cores: w = min(0+0+5, 0+5) = 5.
	if avail, used := cl.Window(); avail != 5 || used != 0 {
		t.Fatalf("client window %d, outstanding %d; want 5, 0", avail, used)
	}
	if w := srv.Window("client-1"); w != 5 {
		t.Fatalf("server's window for the client: %d", w)
	}
}

// A call waiting for a credit never waits past its context: it ends with
// DEADLINE_EXCEEDED at its deadline and leaves the peer's queue, while
// the credit it waited for is still held.
func TestLiveWaitHonoursDeadline(t *testing.T) {
	cfg := breakwater.DefaultConfig()
	cfg.ClientDelay = time.Hour // only the context can end the wait
	srv, _ := breakwater.NewServer(cfg)
	cl, _ := breakwater.NewClient(cfg, "c")
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	addr := serve(t, liveServer(t, srv), func(ctx context.Context) error {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	lc := peers.NewLiveClient(cl, nil)
	c := dial(t, addr, lc)
	var wg sync.WaitGroup
	wg.Add(1)
	var firstErr error
	go func() {
		defer wg.Done()
		_, firstErr = c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	}()
	<-entered // the only credit is taken
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	waited := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("waiting call: %v, want DEADLINE_EXCEEDED", err)
	}
	if waited < 45*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("waiting call returned after %s, want at its 50 ms deadline", waited)
	}
	if n := lc.Waiting(); n != 0 || cl.Queued() != 0 {
		t.Fatalf("%d calls still wait (%d in the peer's queue)", n, cl.Queued())
	}
	close(release)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if _, used := cl.Window(); used != 0 {
		t.Fatalf("%d credits still outstanding", used)
	}
}

// Rajomon's refusal is RESOURCE_EXHAUSTED with the price in the
// trailer; the end user learns it and then refuses locally, also with
// RESOURCE_EXHAUSTED.
func TestLiveRajomonRefusal(t *testing.T) {
	cfg := rajomon.DefaultConfig()
	cfg.InitialTokens, cfg.PriceTTL, cfg.PriceStep = 0, 0, 5
	srv, _ := rajomon.NewServer(cfg, nil)
	srv.Update(time.Now(), peers.Signal{Delay: time.Second}) // price 5
	user, _ := rajomon.NewClient(cfg, nil)
	var served atomic.Int32
	c := dial(t, serve(t, liveServer(t, srv), func(context.Context) error { served.Add(1); return nil }), peers.NewLiveClient(user, nil))
	_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("0 tokens at price 5: %v, want RESOURCE_EXHAUSTED", err)
	}
	if p := user.Price(unary); p != 5 {
		t.Fatalf("price heard %d, want 5", p)
	}
	_, err = c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	if s, _ := status.FromError(err); s.Code() != codes.ResourceExhausted || served.Load() != 0 {
		t.Fatalf("second call: %v (served %d), want a local RESOURCE_EXHAUSTED", err, served.Load())
	}
}

// DAGOR across two hops: the entry assigns the priorities and forwards
// them through its handler's context to its own calls; the downstream
// reads them and its level comes back to the entry's client side.
func TestLiveDagorAcrossHops(t *testing.T) {
	cfg := dagor.DefaultConfig()
	cfg.Business = map[string]int{unary: 3}
	back, _ := dagor.NewServer(cfg, false)
	seenc := make(chan metadata.MD, 1)
	backAddr := serve(t, liveServer(t, back), func(ctx context.Context) error {
		md, _ := metadata.FromIncomingContext(ctx)
		seenc <- md
		return nil
	})
	entry, _ := dagor.NewServer(cfg, true)
	entryClient, _ := dagor.NewClient(cfg)
	down := dial(t, backAddr, peers.NewLiveClient(entryClient, nil))
	entryAddr := serve(t, liveServer(t, entry), func(ctx context.Context) error {
		_, err := down.UnaryCall(ctx, &testpb.SimpleRequest{})
		return err
	})
	userSide, _ := dagor.NewClient(cfg)
	c := dial(t, entryAddr, peers.NewLiveClient(userSide, nil))
	if _, err := c.UnaryCall(peers.WithUser(context.Background(), "alice"), &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	seen := <-seenc
	u := cfg.UserPriority(time.Now(), "alice")
	if b := seen.Get(dagor.KeyBusiness); len(b) != 1 || b[0] != "3" {
		t.Fatalf("downstream saw %v, want business 3", seen)
	}
	if us := seen.Get(dagor.KeyUser); len(us) != 1 || us[0] != strconv.Itoa(u) {
		t.Fatalf("downstream saw user priority %v, want %d", us, u)
	}
	if id := seen.Get(peers.UserKey); len(id) != 1 || id[0] != "alice" {
		t.Fatalf("downstream saw user %v", id)
	}
	if b, uu, ok := entryClient.Level(unary); !ok || b != 64 || uu != 128 {
		t.Fatalf("entry heard level (%d,%d) %v, want (64,128)", b, uu, ok)
	}
}

// spyServer admits everything and keeps the signals Update gets.
type spyServer struct {
	mu   sync.Mutex
	sigs []peers.Signal
}

func (s *spyServer) Admit(time.Time, *peers.Call) peers.Admission {
	return peers.Admission{Admit: true}
}
func (s *spyServer) Done(time.Time, *peers.Call, peers.Outcome) peers.Metadata {
	return nil
}
func (s *spyServer) Update(_ time.Time, sig peers.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sigs = append(s.sigs, sig)
}
func (s *spyServer) Period() time.Duration { return time.Hour }

// With the queue signal, a call waits from its admission until its
// handler marks the start of its work (peers.Begin), on the server's
// clock.
func TestLiveQueueSignal(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	spy := &spyServer{}
	ls, err := peers.NewLiveServer(spy, peers.ServerOptions{Source: peers.SourceQueue, MarkBegin: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, ls, func(ctx context.Context) error {
		advance(30 * time.Millisecond) // waits for a worker
		peers.Begin(ctx)
		advance(5 * time.Millisecond) // works
		return nil
	})
	c := dial(t, addr, peers.NewLiveClient(&passClient{}, clock))
	for range 2 {
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	ls.Tick()
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.sigs) != 1 || spy.sigs[0] != (peers.Signal{Delay: 30 * time.Millisecond, Mean: 30 * time.Millisecond, Began: 2}) {
		t.Fatalf("signals %+v", spy.sigs)
	}
	if _, err := peers.NewLiveServer(spy, peers.ServerOptions{Source: "cpu"}); err == nil {
		t.Fatal("an unknown source accepted")
	}
}

// passClient sends everything.
type passClient struct{}

func (passClient) Send(time.Time, *peers.Call) peers.Decision { return peers.Decision{} }
func (passClient) Received(time.Time, *peers.Call, peers.Metadata, peers.Outcome) []peers.Release {
	return nil
}
func (passClient) Cancel(time.Time, *peers.Call) []peers.Release { return nil }
func (passClient) Update(time.Time) []peers.Release              { return nil }
func (passClient) Period() time.Duration                         { return time.Hour }
