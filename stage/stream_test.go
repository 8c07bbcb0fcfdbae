package stage

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
)

// Stream hands the slot back at once; DoneStream completes the request
// without releasing again and without a response-time sample.
func TestTicketStream(t *testing.T) {
	cfg := control.DefaultStaticConcurrencyConfig()
	cfg.Limit = 1
	now := time.Now()
	s, err := New(Options{Name: "ws", Controller: &cfg, MaxQueue: 1, QueueTimeout: time.Millisecond}, now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t1, err := s.Enter(ctx, 0)
	if err != nil || !t1.Held() || s.limiter.InFlight() != 1 {
		t.Fatalf("enter: %v held %v in flight %d", err, t1.Held(), s.limiter.InFlight())
	}
	t1.Stream()
	if s.limiter.InFlight() != 0 {
		t.Fatalf("in flight after Stream: %d", s.limiter.InFlight())
	}
	t2, err := s.Enter(ctx, 0)
	if err != nil {
		t.Fatalf("slot not reusable after Stream: %v", err)
	}
	t1.DoneStream(true)
	if s.limiter.InFlight() != 1 {
		t.Fatalf("DoneStream released a slot: in flight %d", s.limiter.InFlight())
	}
	t2.Done(true, true)
	if s.limiter.InFlight() != 0 {
		t.Fatalf("in flight %d", s.limiter.InFlight())
	}
	s.Step(now.Add(2 * time.Second))
	tot := s.Totals(0)
	if tot.Completed != 2 || tot.Last.Samples != 1 || tot.Errors != 0 {
		t.Fatalf("totals %+v, last %+v", tot, tot.Last)
	}
	var zero Ticket
	zero.Stream()
	zero.DoneStream(false)
	if zero.Held() {
		t.Fatal("zero ticket holds a slot")
	}
}

// On a stage without a concurrency limit Stream only drops the sample.
func TestTicketStreamWithoutLimit(t *testing.T) {
	s := sedaStage(t, nil, false)
	tk, err := s.Enter(context.Background(), 0)
	if err != nil || tk.Held() {
		t.Fatalf("%v %v", err, tk.Held())
	}
	tk.Stream()
	tk.DoneStream(false)
	s.Step(time.Now().Add(2 * time.Second))
	if tot := s.Totals(0); tot.Completed != 1 || tot.Errors != 1 || tot.Last.Samples != 0 {
		t.Fatalf("totals %+v", tot)
	}
}
