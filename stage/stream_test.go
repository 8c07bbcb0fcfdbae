// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

// Stream hands the slot back at once; Done then completes the request
// without releasing again and without a response-time sample.
func TestLifecycleStream(t *testing.T) {
	cfg := control.DefaultStaticConcurrencyConfig()
	cfg.Limit = 1
	now := time.Now()
	s := newStage(t, Options{Name: "ws", Controller: &cfg, MaxQueue: 1, QueueTimeout: time.Millisecond}, now)
	ctx := context.Background()
	t1, err := s.Enter(ctx, 0)
	if err != nil || !t1.Held() || s.InFlight() != 1 {
		t.Fatalf("enter: %v held %v in flight %d", err, t1.Held(), s.InFlight())
	}
	var l1 Lifecycle
	l1.Reset(t1)
	if !l1.Stream(time.Now()) || l1.Stream(time.Now()) {
		t.Fatal("Stream must take effect exactly once")
	}
	if s.InFlight() != 0 {
		t.Fatalf("in flight after Stream: %d", s.InFlight())
	}
	t2, err := s.Enter(ctx, 0)
	if err != nil {
		t.Fatalf("slot not reusable after Stream: %v", err)
	}
	if !l1.Done(time.Now(), Outcome{OK: true}) || l1.Done(time.Now(), Outcome{OK: true}) {
		t.Fatal("Done must take effect exactly once")
	}
	if s.InFlight() != 1 || s.QueueLen() != 0 {
		t.Fatalf("a stream's Done released a slot: in flight %d", s.InFlight())
	}
	t2.Done(sluice.Success)
	if s.InFlight() != 0 {
		t.Fatalf("in flight %d", s.InFlight())
	}
	s.Step(now.Add(2 * time.Second))
	tot := s.Totals(0)
	if tot.Completed != 2 || tot.Last.Samples != 1 || tot.Errors != 0 {
		t.Fatalf("totals %+v, last %+v", tot, tot.Last)
	}
	var zero Lifecycle
	zero.Stream(now)
	zero.Done(now, Outcome{})
	if zero.Ticket().Held() {
		t.Fatal("zero ticket holds a slot")
	}
}

// On a stage without a concurrency limit a stream only drops the sample.
func TestLifecycleStreamWithoutLimit(t *testing.T) {
	s := sedaStage(t, nil, false)
	tk, err := s.Enter(context.Background(), 0)
	if err != nil || tk.Held() {
		t.Fatalf("%v %v", err, tk.Held())
	}
	var l Lifecycle
	l.Reset(tk)
	l.Stream(time.Now())
	l.Done(time.Now(), Outcome{OK: false})
	s.Step(time.Now().Add(2 * time.Second))
	if tot := s.Totals(0); tot.Completed != 1 || tot.Errors != 1 || tot.Last.Samples != 0 {
		t.Fatalf("totals %+v", tot)
	}
}
