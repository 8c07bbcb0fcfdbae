// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/lab/internal/grpctest"
	"github.com/sluicehq/sluice/lab/peers/breakwater"
	"github.com/sluicehq/sluice/policy"
)

// serveHotel serves s on a loopback port until the test ends and
// returns its address.
func serveHotel(t *testing.T, s *HotelService) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = s.Server().Serve(lis); close(done) }()
	t.Cleanup(func() { s.Close(); <-done })
	return lis.Addr().String()
}

func hotelRecords(t *testing.T, ctx context.Context, cc *grpc.ClientConn) []HotelRecord {
	t.Helper()
	var out wrapperspb.BytesValue
	if err := cc.Invoke(ctx, HotelRecordsMethod, &emptypb.Empty{}, &out); err != nil {
		t.Fatal(err)
	}
	recs, err := ParseHotelRecords(bytes.NewReader(out.GetValue()))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// Two services on loopback, frontend → rate, without control: a user
// call burns each one's CPU time, travels with its request index and
// deadline, and lands in both services' records; Scale multiplies an
// API's work, Busy counts the workers' time, and a call whose deadline
// passed before the work is recorded as gone and makes no call on.
func TestHotelServiceChain(t *testing.T) {
	rate, err := NewHotelService(HotelServiceConfig{Name: "rate", Workers: 1, Mode: HotelNone,
		Methods: []HotelMethodConfig{{API: "search", Work: 2 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	rateAddr := serveHotel(t, rate)
	front, err := NewHotelService(HotelServiceConfig{Name: "frontend", Entry: true, Workers: 2, Mode: HotelNone,
		Methods: []HotelMethodConfig{{API: "search", Work: time.Millisecond, Calls: []HotelCallConfig{{Service: "rate", Addr: rateAddr}}}}})
	if err != nil {
		t.Fatal(err)
	}
	fc, rc := grpctest.Dial(t, serveHotel(t, front)), grpctest.Dial(t, rateAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(i string) error {
		c := metadata.AppendToOutgoingContext(ctx, HotelRequestMD, i)
		return fc.Invoke(c, HotelMethod("frontend", "search"), &emptypb.Empty{}, &emptypb.Empty{})
	}
	if err := call("7"); err != nil {
		t.Fatal(err)
	}
	if err := rc.Invoke(ctx, HotelScaleMethod, wrapperspb.String("search=5"), &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := call("8"); err != nil {
		t.Fatal(err)
	}
	recs := hotelRecords(t, ctx, rc)
	if len(recs) != 2 || recs[0].Request != 7 || recs[1].Request != 8 || recs[0].API != "search" {
		t.Fatalf("rate's records %+v, want requests 7 and 8", recs)
	}
	// The CPU clock counts what the thread burnt: at least the work
	// asked (2 ms, then 5 × 2 ms), whatever else the machine runs.
	if recs[0].CPU < 2*time.Millisecond || recs[1].CPU < 10*time.Millisecond || recs[0].Deadline.IsZero() || recs[0].Gone {
		t.Errorf("rate's records %+v: want the work's CPU time, the caller's deadline, not gone", recs)
	}
	var busy wrapperspb.DoubleValue
	if err := rc.Invoke(ctx, HotelBusyMethod, &emptypb.Empty{}, &busy); err != nil || busy.GetValue() < 0.012 {
		t.Errorf("rate's busy seconds %v (%v), want ≥ 0.012", busy.GetValue(), err)
	}
	if fr := hotelRecords(t, ctx, fc); len(fr) != 2 || fr[1].Request != 8 {
		t.Errorf("frontend's records %+v", fr)
	}
	// Work of 50 ms at the frontend, a 20 ms deadline: the work is done
	// all the same (CPU-bound, the context unwatched), recorded gone,
	// and rate sees no call.
	if err := fc.Invoke(ctx, HotelScaleMethod, wrapperspb.String("=50"), &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, HotelRequestMD, "9"), 20*time.Millisecond)
	defer cancelShort()
	if err := fc.Invoke(short, HotelMethod("frontend", "search"), &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("a call past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fr := hotelRecords(t, ctx, fc)
		if len(fr) == 3 {
			if !fr[2].Gone || fr[2].Request != 9 {
				t.Errorf("the late call's record %+v, want gone", fr[2])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late call was not recorded: %+v", fr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(hotelRecords(t, ctx, rc)); n != 2 {
		t.Errorf("rate saw %d calls, want 2 (none for the late call)", n)
	}
	if err := rc.Invoke(ctx, HotelScaleMethod, wrapperspb.String("search=0"), &emptypb.Empty{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a scale of 0: %v, want INVALID_ARGUMENT", err)
	}
}

// In sluice mode grpcsluice's interceptors admit the calls (a stage over
// its rate refuses with RESOURCE_EXHAUSTED) and hotel.Control is exempt;
// in a peer's mode the peer's server side runs at the service.
func TestHotelServiceModes(t *testing.T) {
	var pc policy.Config
	if err := yaml.Unmarshal([]byte(`stages: [{name: hotel, match: {path_prefix: /}, controller: static-rate, params: {rate: 0.001}, burst: 1}]`), &pc); err != nil {
		t.Fatal(err)
	}
	pc.SetDefaults()
	s, err := NewHotelService(HotelServiceConfig{Name: "rate", Workers: 1, Mode: HotelSluice, Policy: pc,
		Methods: []HotelMethodConfig{{API: "search", Work: time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	cc := grpctest.Dial(t, serveHotel(t, s))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := HotelMethod("rate", "search")
	if err := cc.Invoke(ctx, m, &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := cc.Invoke(ctx, m, &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("over the stage's rate: %v, want RESOURCE_EXHAUSTED", err)
	}
	for range 3 {
		if n := len(hotelRecords(t, ctx, cc)); n != 1 {
			t.Errorf("records: %d, want 1 (and the control service never refused)", n)
		}
	}
	peer, err := NewHotelPeer("breakwater", new(breakwater.DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	bw, err := NewHotelService(HotelServiceConfig{Name: "frontend", Entry: true, Workers: 1, Mode: "breakwater", Peer: peer,
		Methods: []HotelMethodConfig{{API: "search", Work: time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	bc := grpctest.Dial(t, serveHotel(t, bw))
	if err := bc.Invoke(ctx, HotelMethod("frontend", "search"), &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
		t.Errorf("breakwater's server side with its initial credits: %v", err)
	}
}

// A configuration is checked field by field.
func TestHotelServiceConfigValidate(t *testing.T) {
	ok := HotelServiceConfig{Name: "rate", Workers: 1, Mode: HotelNone, Methods: []HotelMethodConfig{{API: "search"}}}
	cases := map[string]func(c *HotelServiceConfig){
		"name is required": func(c *HotelServiceConfig) { c.Name = "" },
		"workers=0":        func(c *HotelServiceConfig) { c.Workers = 0 },
		"queue_limit=-1":   func(c *HotelServiceConfig) { c.QueueLimit = -1 },
		"no methods":       func(c *HotelServiceConfig) { c.Methods = nil },
		"methods[0].calls[0]": func(c *HotelServiceConfig) {
			c.Methods = []HotelMethodConfig{{API: "search", Calls: []HotelCallConfig{{Service: "geo"}}}}
		},
		`mode "dagor"`: func(c *HotelServiceConfig) { c.Mode = "dagor" },
	}
	for want, f := range cases {
		c := ok
		f(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
	if _, err := NewHotelService(HotelServiceConfig{Name: "f", Workers: 1, Mode: HotelNone,
		Methods: []HotelMethodConfig{{API: "a", Calls: []HotelCallConfig{{Service: "b", Addr: "10.0.0.1:1"}}}}}); err == nil {
		t.Error("a call off loopback accepted")
	}
	for _, v := range []string{"search", "search=x", "=0", "=1001", "=NaN"} {
		if _, _, err := ParseHotelScale(v); err == nil {
			t.Errorf("scale %q accepted", v)
		}
	}
	if api, f, err := ParseHotelScale("reserve=10"); api != "reserve" || f != 10 || err != nil {
		t.Errorf("reserve=10: %q %v %v", api, f, err)
	}
}
